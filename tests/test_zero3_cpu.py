"""DeepSpeed ZeRO-3 for real on 2 CPU processes (gloo), through the `train` rule's `accelerate launch` with
workflow/accelerate/zero3-cpu.yaml: DeepSpeed's own partitioning, gathering and checkpointing, as on GPUs.
"""

import json
import re

import pytest
import torch

from test_train_job import (
    PROBLEMS,
    checkpoints,
    dpo_settings,
    grpo_settings,
    job,
    loaded_by_rank,
    pairs,
    run,
    step_records,
    tiny,  # noqa: F401 (the module's tiny model)
    write_jsonl,
    writers,
)

pytestmark = pytest.mark.slow
ZERO3 = "zero3-cpu.yaml"


def zero3_checkpoint(workdir):
    """(ZeRO stage, processes the optimizer state is partitioned over) of the newest DeepSpeed checkpoint."""
    step = sorted(workdir.glob("checkpoints/*/run/*/checkpoint-*/global_step*"), key=lambda p: int(p.name[11:]))[-1]
    model = torch.load(step / "zero_pp_rank_0_mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)
    optimizer = torch.load(step / "zero_pp_rank_0_mp_rank_00_optim_states.pt", map_location="cpu", weights_only=False)
    assert model["dp_world_size"] == 2
    return model["ds_config"]["zero_optimization"]["stage"], optimizer["optimizer_state_dict"]["partition_count"]


def test_dpo_with_lora_under_zero3(tiny, tmp_path):  # noqa: F811
    data = write_jsonl(tmp_path / "pairs.jsonl", pairs(8))
    log = run(*job(tiny, tmp_path, "dpo", dpo_settings(), data, config=ZERO3), tmp_path)
    batches = loaded_by_rank(log)
    shards = {rank: [pair for batch in rank_batches for pair in batch] for rank, rank_batches in batches.items()}
    assert sorted(map(int, shards[0] + shards[1])) == list(range(8))
    assert step_records(tmp_path) == [1, 2]
    assert writers(tmp_path, tmp_path / "trained", tmp_path / "metrics.jsonl") == {"0"}
    assert (tmp_path / "trained" / "adapter_config.json").is_file()
    # DeepSpeed wrote the checkpoint, its optimizer state in one partition per process.
    assert zero3_checkpoint(tmp_path) == (3, 2)


def test_full_weight_dpo_under_zero3_saves_a_loadable_model(tiny, tmp_path):  # noqa: F811
    from transformers import AutoModelForCausalLM

    data = write_jsonl(tmp_path / "pairs.jsonl", pairs(8))
    run(*job(tiny, tmp_path, "dpo", dpo_settings(lora=None), data, config=ZERO3), tmp_path)
    # The weights gathered from the 2 shards (zero3_save_16bit_model), every one of them trained.
    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "trained")
    base = AutoModelForCausalLM.from_pretrained(tiny / "model")
    assert trained.state_dict().keys() == base.state_dict().keys()
    assert all(weight.numel() for weight in trained.state_dict().values())
    changed = [name for name, weight in trained.state_dict().items() if not torch.equal(weight, base.state_dict()[name])]
    assert "model.layers.0.mlp.up_proj.weight" in changed and "model.layers.0.self_attn.q_proj.weight" in changed


def test_grpo_with_lora_under_zero3(tiny, tmp_path):  # noqa: F811
    data = write_jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    log = run(*job(tiny, tmp_path, "grpo", grpo_settings(), data, config=ZERO3,
                   extra=("--eval-problems", str(data), "--sandbox-workers", "1")), tmp_path)
    batches = loaded_by_rank(log)
    assert set(batches) == {0, 1}
    assert sorted(set(step_records(tmp_path))) == [0, 1, 2]
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2]
    assert (tmp_path / "trained" / "adapter_config.json").is_file()
    assert zero3_checkpoint(tmp_path) == (3, 2)


def test_killed_zero3_run_resumes_from_its_checkpoint(tiny, tmp_path):  # noqa: F811
    import os
    import signal
    import subprocess
    import time

    data = write_jsonl(tmp_path / "pairs.jsonl", pairs(60))
    command, env = job(tiny, tmp_path, "dpo", dpo_settings(batch=1, save_steps=5), data, config=ZERO3)
    first = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not checkpoints(tmp_path) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    assert first.poll() is None, "the run ended before it could be killed"
    time.sleep(1)  # let the checkpoint's DeepSpeed files land
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not (tmp_path / "trained").exists()
    saved = max(json.loads(p.read_text())["global_step"] for p in checkpoints(tmp_path))
    assert saved < 30

    log = run(command, env, tmp_path)
    resumed = [int(step) for step in re.findall(r"resuming from \S+/checkpoint-(\d+)", log)]
    assert len(resumed) == 2 and resumed[0] == resumed[1] >= saved
    assert step_records(tmp_path) == list(range(1, 31))  # 60 pairs, 1 per process and step
    assert (tmp_path / "trained" / "adapter_config.json").is_file()


def test_code_game_with_a_frozen_base_opponent_under_zero3(tmp_path):
    """The `base` opponent is loaded after the trainer exists, when ZeRO-3's `zero.Init` would build it
    from empty shards; it must be a whole model on every process, sampling as on one."""
    from test_program_methods import PROBLEMS as PROGRAM_PROBLEMS
    from test_program_methods import settings_json

    from conftest import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny", [f"print({i} * {i})\n" for i in range(50)] * 2)
    (tmp_path / "tiny" / "hook").mkdir()
    (tmp_path / "tiny" / "hook" / "sitecustomize.py").write_text("")
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in PROGRAM_PROBLEMS))
    settings = json.loads(settings_json("code_game"))
    command, env = job(tmp_path / "tiny", tmp_path, "code_game", settings, data, config=ZERO3,
                       extra=("--eval-problems", str(data), "--sandbox-workers", "1"))
    command[command.index("--model") + 1] = model
    run(command, env, tmp_path)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    games = [r for r in records if "code_game/reward" in r]
    # Before the fix both processes died in the opponent's first forward pass (empty embedding shards:
    # "Padding_idx must be within num_embeddings").
    assert len(games) == 2 and all(r["code_game/reward"] == pytest.approx(r["reward"]) for r in games)
    assert zero3_checkpoint(tmp_path) == (3, 2)



def test_spiral_self_play_with_unequal_rounds_under_zero3(tmp_path):
    """Each ZeRO-3 sampling call gathers the sharded weights (a collective), so both processes must
    make the same number of calls although their games last a different number of rounds and one
    process may need more games than the other to fill its step."""
    import dataclasses

    from test_spiral_trainer import GRPO, SPIRAL

    from conftest import build_tiny_model

    texts = [f"[{i}]" for i in range(9)] * 20 + ["You are playing Tic-tac-toe. Legal moves: [0], [1]"] * 5
    build_tiny_model(tmp_path / "tiny", texts)
    (tmp_path / "tiny" / "hook").mkdir()
    (tmp_path / "tiny" / "hook" / "sitecustomize.py").write_text("")
    problems = [{"id": f"t/{i}", "prompt": f"Return {i}.", "test_type": "assert", "tests": [f"assert f() == {i}"]} for i in range(4)]
    data = write_jsonl(tmp_path / "problems.jsonl", problems)
    settings = {
        "grpo": {**dataclasses.asdict(GRPO), "max_steps": 3, "save_steps": 3},
        "spiral": {**dataclasses.asdict(SPIRAL), "games_per_step": 2, "illegal_move": "random", "observation": "compact",
                   "eval_opponents": list(SPIRAL.eval_opponents)},
        "prompt": {"template": "{prompt}\n", "num_tests_shown": 0, "chat_template": "never"},
        "execution": {"timeout_s": 1.0, "memory_mb": 512},
        "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    }
    command, env = job(tmp_path / "tiny", tmp_path, "spiral", settings, data, config=ZERO3,
                       extra=("--eval-problems", str(data), "--sandbox-workers", "1"))
    log = run(command, env, tmp_path)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "spiral/self_play/turns_per_game" in r] == [1, 2, 3]
    assert [r["step"] for r in records if "spiral/eval/random/win_rate" in r] == [0, 1, 2, 3]
    # The processes really played rounds of different counts: the lockstep padded the shorter one.
    padded = [int(n) for n in re.findall(r"self-play lockstep: (\d+) padding calls", log)]
    assert sum(padded) > 0
    assert zero3_checkpoint(tmp_path) == (3, 2)
