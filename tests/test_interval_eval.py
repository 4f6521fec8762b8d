"""Interval evaluation: before training, every N steps and after the last, at its own temperature
and sample count, with an interval over problems."""

import pytest
from accelerate import Accelerator
from transformers import TrainerControl, TrainerState

from execrl.evaluation.interval_eval import IntervalEvaluation, pass_at_1_interval
from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

PROBLEMS = [
    Problem(id=f"p/{i}", prompt=f"Return {i}.", test_type="assert", tests=[f"assert f() == {i}"], entry_point="f")
    for i in range(4)
]


class RecordingTrainer:
    def __init__(self):
        self.accelerator = Accelerator(cpu=True)
        self.logged = []

    def log(self, metrics):
        self.logged.append(metrics)
        # As Trainer.log does: its on_log handling resets the step's control flags.
        if getattr(self, "control", None) is not None:
            self.control.should_log = False


def test_interval_is_the_normal_approximation_over_problems():
    mean, low, high = pass_at_1_interval([4, 0, 2, 2], samples=4)
    assert mean == pytest.approx(0.5)
    assert low == pytest.approx(0.5 - 1.959964 * (1 / 6) ** 0.5 / 2)
    assert high == pytest.approx(0.5 + 1.959964 * (1 / 6) ** 0.5 / 2)
    assert pass_at_1_interval([3, 3], samples=3) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        pass_at_1_interval([], samples=1)


def test_evaluates_at_step_0_every_n_steps_and_at_the_end_at_its_own_temperature():
    asked = []

    def sample(prompts, temperature):
        asked.append((len(prompts), temperature))
        # Problems 0 and 1 are solved by every sample, problem 2 by every other one, 3 never.
        answers = []
        for position, prompt in enumerate(prompts):
            value = int(prompt.split()[1].rstrip("."))
            right = value in (0, 1) or (value == 2 and position % 2 == 0)
            answers.append(f"def f():\n    return {value if right else -1}\n")
        return answers

    trainer = RecordingTrainer()
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=2)) as executor:
        interval = IntervalEvaluation(PROBLEMS, [p.prompt for p in PROBLEMS], executor, sample, every=2, samples=2, temperature=0.2)
        interval.trainer = trainer
        state = TrainerState()
        interval.on_train_begin(None, state, None)
        for step in range(1, 6):
            state.global_step = step
            control = trainer.control = TrainerControl(should_log=True)
            interval.on_step_end(None, state, control)
            assert control.should_log  # the step's own record (loss, learning rate) is still written
        interval.on_train_end(None, state, None)
    assert [n for n, _ in asked] == [8] * 4  # steps 0, 2, 4 and the last (5)
    assert {t for _, t in asked} == {0.2}
    first = trainer.logged[0]
    assert first["interval_eval/pass_at_1"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert first["interval_eval/problems_passed"] == 3
    assert first["interval_eval/pass_at_1_low"] < first["interval_eval/pass_at_1"] < first["interval_eval/pass_at_1_high"]
    # seed 002's names, after the problems' data set (ids p/0 ... p/3)
    assert first["p_eval/pass_rate"] == first["interval_eval/pass_at_1"] and first["p_eval/problems_passed"] == 3


def test_benchmark_name_is_the_shared_id_prefix():
    from execrl.evaluation.interval_eval import benchmark_name

    def problems(*ids):
        return [Problem(id=i, prompt="p", test_type="assert", tests=["assert True"]) for i in ids]

    assert benchmark_name(problems("mbpp/11", "mbpp/12")) == "mbpp"
    assert benchmark_name(problems("mbpp/11", "taco/1")) == "heldout"
    assert benchmark_name(problems("mbpp/11", "x")) == "heldout"


class CountingEvaluation(IntervalEvaluation):
    def evaluate(self, step):
        self.steps.append(step)
        self._last_step = step


def test_a_resumed_run_does_not_evaluate_step_0_again_and_the_last_step_only_once():
    interval = CountingEvaluation(PROBLEMS[:1], ["Return 0."], None, None, every=2, samples=1, temperature=0.2)
    interval.trainer, interval.steps = RecordingTrainer(), []
    state = TrainerState()
    state.global_step = 4  # resumed from checkpoint-4
    interval.on_train_begin(None, state, None)
    state.global_step = 6
    interval.on_step_end(None, state, TrainerControl(should_log=True))
    interval.on_train_end(None, state, None)
    assert interval.steps == [6]


def record_sampling(monkeypatch, sampler_class) -> list[tuple[int, int]]:
    """(prompts, the longest completion in tokens) of each call of `sampler_class`, which still samples."""
    sampled = []
    original = sampler_class.__call__

    def recorded(self, prompt_texts, temperature=None):
        samples = original(self, prompt_texts, temperature)
        sampled.append((len(prompt_texts), max(len(sample[1]) for sample in samples)))
        return samples

    monkeypatch.setattr(sampler_class, "__call__", recorded)
    return sampled


def test_a_real_dpo_run_evaluates_before_its_first_step_every_n_steps_and_after_its_last(tmp_path, monkeypatch):
    """DPO through its training job (one process, in this process): the adapter as trained so far samples
    the held-out problems with transformers and the sandbox runs them, into DPO's own metrics file;
    `eval_problems`, `eval_samples` and `eval_max_new_tokens` size what each evaluation samples."""
    import json

    from conftest import build_tiny_model
    from execrl.generation.policy_sampling import TransformersPolicySampler
    from execrl.training import train_job

    sampled = record_sampling(monkeypatch, TransformersPolicySampler)

    tasks = [(f"Write f(x) returning x + {i}.", f"def f(x):\n    return x + {i}\n") for i in range(8)]
    model = build_tiny_model(tmp_path / "tiny", [prompt + "\n" + code for prompt, code in tasks] * 20)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(
        json.dumps({"prompt": f"{prompt}\n", "chosen": code, "rejected": code.replace("+", "-")}) + "\n"
        for prompt, code in tasks * 2
    ))  # 16 pairs, 2 a step: 8 steps
    held_out = tmp_path / "test.jsonl"
    held_out.write_text("".join(
        json.dumps({"id": f"t/{i}", "prompt": f"Write f(x) returning x + {i}.", "test_type": "assert",
                    "tests": [f"assert f(1) == {1 + i}"], "entry_point": "f"}) + "\n"
        for i in range(5)
    ))
    settings = {
        "dpo": {"per_device_train_batch_size": 2, "num_train_epochs": 1, "save_steps": 100, "max_length": 64,
                "gradient_checkpointing": False, "learning_rate": 1e-3, "seed": 0, "eval_every": 3,
                "eval_problems": 3, "eval_samples": 2, "eval_temperature": 0.5, "eval_max_new_tokens": 12},
        "prompt": {"template": "{prompt}\n", "num_tests_shown": 0},
        "execution": {"timeout_s": 2, "memory_mb": 512},
        "lora": {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
    }
    metrics = tmp_path / "metrics.jsonl"
    train_job.main([
        "dpo", "--model", model, "--settings", json.dumps(settings), "--pairs", str(pairs),
        "--eval-problems", str(held_out), "--output", str(tmp_path / "trained"), "--metrics", str(metrics),
        "--checkpoint-root", str(tmp_path / "checkpoints"), "--run-name", "dpo/run", "--sandbox-workers", "1",
    ])

    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    evaluations = [r for r in records if "interval_eval/pass_at_1" in r]
    # Before the first step, at steps 3 and 6, and after the last (8): 3 of the 5 problems, 2 samples each.
    assert [r["step"] for r in evaluations] == [0, 3, 6, 8]
    for r in evaluations:
        assert round(r["interval_eval/pass_at_1"] * 6, 6) == round(r["interval_eval/pass_at_1"] * 6)
        assert r["interval_eval/pass_at_1_low"] <= r["interval_eval/pass_at_1"] <= r["interval_eval/pass_at_1_high"]
        assert 0 <= r["interval_eval/problems_passed"] <= 3
    # Each of the 4 evaluations sampled 3 problems x 2 samples, the longest cut at 12 tokens.
    assert sampled == [(6, 12)] * 4, sampled
    # DPO's own per-step records are all there beside them.
    assert sorted({r["step"] for r in records if "loss" in r}) == list(range(1, 9))
    assert (tmp_path / "trained" / "adapter_config.json").is_file()


def test_a_real_grpo_run_evaluates_eval_problems_at_its_completion_length(tmp_path, monkeypatch, capsys):
    """GRPO through its training job (one process, in this process): its interval evaluation samples
    `eval_problems` of the held-out problems, `eval_samples` each, cut at `max_completion_length`;
    its rollouts (TRL's own sampling) are not the evaluation's sampler."""
    import json

    from conftest import build_tiny_model
    from execrl.training import grpo as grpo_module
    from execrl.training import train_job

    sampled = record_sampling(monkeypatch, grpo_module.PolicySampler)
    tasks = [(f"Write f(x) returning x + {i}.", f"def f(x):\n    return x + {i}\n") for i in range(6)]
    model = build_tiny_model(tmp_path / "tiny", [prompt + "\n" + code for prompt, code in tasks] * 20)
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(
        json.dumps({"id": f"t/{i}", "prompt": prompt, "test_type": "assert", "tests": [f"assert f(1) == {1 + i}"],
                    "entry_point": "f", "reference": code}) + "\n"
        for i, (prompt, code) in enumerate(tasks)
    ))  # fmt: skip
    settings = {
        "grpo": {"num_generations": 2, "prompts_per_step": 2, "max_steps": 1, "max_completion_length": 10, "train_problems": 100,
                 "save_steps": 100, "gradient_checkpointing": False, "learning_rate": 1e-3, "eval_every": 1,
                 "eval_problems": 4, "eval_samples": 2, "use_vllm": False, "temperature": 1.0, "seed": 0},
        "rewards": {"binary": 1.0},
        "lora": {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
        "prompt": {"template": "{prompt}\n", "num_tests_shown": 0},
        "execution": {"timeout_s": 2, "memory_mb": 512},
        "watch": {"sample_size": 4},
    }  # fmt: skip
    train_job.main([
        "grpo", "--model", model, "--settings", json.dumps(settings), "--problems", str(problems),
        "--eval-problems", str(problems), "--output", str(tmp_path / "trained"), "--metrics", str(tmp_path / "metrics.jsonl"),
        "--checkpoint-root", str(tmp_path / "checkpoints"), "--run-name", "grpo/run", "--sandbox-workers", "1",
    ])  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "interval_eval/pass_at_1" in r] == [0, 1]
    # Before the step and after it: 4 of the 6 problems x 2 samples, the longest cut at 10 tokens.
    assert sampled == [(8, 10)] * 2, sampled
    # More training problems asked for than the file has: the job says it trains on all of them.
    assert f"grpo.train_problems is 100, but {problems} has 6 problems: training on all 6" in capsys.readouterr().err
