"""`exec` and `code_game` through TRL's GRPOTrainer and `execrl.training.train_job`: one real step each on a
tiny random model, with the sandbox running every completion as a program."""

import json

import pytest

from conftest import build_tiny_model
from execrl.training import train_job
from execrl.training.code_game_settings import CodeGameSettings
from execrl.training.grpo import GRPOSettings
from execrl.problems import Problem
from execrl.training.exec_reward import ExecRewardSettings

PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Print {i} squared.", test_type="assert", tests=[f"assert {i} == {i}"])
    for i in range(4)
]
GRPO = GRPOSettings(num_generations=4, prompts_per_step=2, max_steps=2, max_completion_length=12, save_steps=100,
                    gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False, eval_every=0, temperature=1.0)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    texts = [f"print({i} * {i})\n" for i in range(50)] + [p.prompt for p in PROBLEMS] * 5
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts)


def settings_json(method: str) -> str:
    import dataclasses

    sections = {
        "grpo": dataclasses.asdict(GRPO),
        "exec": dataclasses.asdict(ExecRewardSettings()),
        "prompt": {"template": "{prompt}\n", "num_tests_shown": 0, "chat_template": "never"},
        "execution": {"timeout_s": 1.0, "memory_mb": 512},
        "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    }
    if method == "code_game":
        sections["code_game"] = dataclasses.asdict(CodeGameSettings(max_prediction_tokens=8))
    return json.dumps(sections)


def run_job(method, tiny_model, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in PROBLEMS))
    metrics = tmp_path / "metrics.jsonl"
    train_job.main([
        method, "--model", tiny_model, "--settings", settings_json(method), "--data", str(problems),
        "--eval-problems", str(problems), "--output", str(tmp_path / "trained"), "--metrics", str(metrics),
        "--checkpoint-root", str(tmp_path / "checkpoints"), "--run-name", f"{method}/test", "--sandbox-workers", "1",
    ])
    assert (tmp_path / "trained" / "adapter_config.json").exists()
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def test_exec_trains_on_the_execution_reward(tiny_model, tmp_path):
    records = [r for r in run_job("exec", tiny_model, tmp_path) if "program/run_rate" in r]
    assert len(records) == 2
    for record in records:
        shares = [record[f"program/{k}_rate"] for k in ("syntax_error", "error", "timeout")]
        assert record["program/run_rate"] + sum(shares) == pytest.approx(1.0)
        # seed 002's values: the mean reward is the outcome shares weighted by them
        assert -1.0 <= record["reward"] <= 1.0


def test_code_game_logs_the_opponents_accuracy(tiny_model, tmp_path):
    records = [r for r in run_job("code_game", tiny_model, tmp_path) if "code_game/reward" in r]
    assert len(records) == 2
    for record in records:
        assert record["code_game/reward"] == pytest.approx(record["reward"])
        assert 0.0 <= record["code_game/nondeterministic_rate"] <= record["program/error_rate"]
        # output is counted in the trainer's tokenizer against the opponent's 8 tokens
        assert 0.0 <= record["code_game/long_output_rate"] <= record["program/run_rate"]
