"""A 2-process training job (`accelerate launch`, gloo on CPU) killed after its first checkpoint
resumes from it when started again, and ends as the job never interrupted ends, to the bit: every
metric of every logged step, and the trained weights. DPO runs through the workflow's `train` rule
(each rank on its own shard, one adapter written); GRPO, whose samples draw random numbers, through
the command that rule runs."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import EMBEDDED, SNAKEMAKE, copy_workflow, dpo_paths, run_snakemake
from test_workflow import REDUCED, deep_update

pytestmark = pytest.mark.slow

CONFIG = ("--configfile", EMBEDDED, "config/test.yaml")
TWO_PROCESSES = ("--set-resources", "train:processes=2")
# Keys of a metrics record that measure the machine, not the training: wall-clock times and rates.
WALL_CLOCK = re.compile(r"elapsed_s|runtime|per_second|step_time")


def handmade_pairs(n):
    return [
        {
            "problem_id": f"builtin/train/{i:04d}",
            "prompt": f"Write a function f(x) that returns x plus {i}.\nTest: assert f(1) == {i + 1}\n",
            "chosen": f"def f(x):\n    return x + {i}\n",
            "rejected": f"def f(x):\n    return x - {i}\n",
            "kind": "pass_vs_fail",
        }
        for i in range(n)
    ]


def checkpoints(workdir):
    root = workdir / dpo_paths(workdir, "config/test.yaml")["checkpoints"]
    return sorted(root.glob("*/checkpoint-*/trainer_state.json"))


def training_metrics(path):
    """Every record of a metrics file, less what the clock measures."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in record.items() if not WALL_CLOCK.search(k)} for record in records]


def weights_digest(trained):
    """sha256 over the trained adapter's tensors (names and bytes), the file's metadata aside."""
    from safetensors.torch import load_file

    tensors = load_file(trained / "adapter_model.safetensors")
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def test_killed_two_process_dpo_job_resumes_from_its_checkpoint_to_the_same_result(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = deep_update(
        json.loads(json.dumps(REDUCED)),
        {
            "experiment": {"methods": ["base", "dpo"]},
            # An interval evaluation samples between every two steps, so the checkpoint the job resumes
            # from comes after sampling from a trained adapter.
            "dpo": {"per_device_train_batch_size": 2, "num_train_epochs": 1, "save_steps": 3, "max_length": 128,
                    "eval_every": 2, "eval_problems": 8, "eval_max_new_tokens": 24},
        },
    )
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    paths = dpo_paths(workdir, "config/test.yaml")
    PAIRS, TRAINED, METRICS = paths["pairs"], paths["trained"], paths["metrics"]
    run_snakemake(workdir, PAIRS, *CONFIG)
    # The reduced model may pass nothing; train on pairs made by hand so there is something to learn.
    (workdir / PAIRS).write_text("".join(json.dumps(p) + "\n" for p in handmade_pairs(60)))

    # The same job never interrupted, then removed with its checkpoints, so the next starts afresh.
    run_snakemake(workdir, TRAINED, *CONFIG, *TWO_PROCESSES)
    uninterrupted = training_metrics(workdir / METRICS)
    uninterrupted_weights = weights_digest(workdir / TRAINED)
    shutil.rmtree(workdir / TRAINED)
    (workdir / METRICS).unlink()
    shutil.rmtree(workdir / paths["checkpoints"])

    command = [SNAKEMAKE, "--cores", "2", TRAINED, *CONFIG, *TWO_PROCESSES]
    # As run_snakemake does: the rule's shell finds `accelerate` beside the tests' interpreter.
    env = {**os.environ, "PYTHONHASHSEED": "0", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    first = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not checkpoints(workdir) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    assert checkpoints(workdir), "no checkpoint appeared before the job ended"
    os.killpg(first.pid, signal.SIGKILL)  # as a preempted Slurm job would be
    first.wait()
    assert not (workdir / TRAINED).exists()
    saved_step = max(json.loads(p.read_text())["global_step"] for p in checkpoints(workdir))
    assert saved_step >= 3

    # The killed scheduler left its lock behind, as a killed session would.
    run_snakemake(workdir, "--unlock", *CONFIG)
    run_snakemake(workdir, TRAINED, *CONFIG, *TWO_PROCESSES, "--rerun-incomplete")
    log = (workdir / paths["log"]).read_text()
    assert "2 process(es)" in log
    shards = {}
    for rank, ids in re.findall(r"rank (\d+)/2 loads ([^\n]+)", log):
        shards.setdefault(rank, set()).update(ids.split())
    assert set(shards) == {"0", "1"} and not shards["0"] & shards["1"]
    assert "resuming from" in log and "checkpoint-" in log
    resumed_from = int(log.split("resuming from")[1].split("checkpoint-")[1].split()[0])
    assert resumed_from >= saved_step
    assert (workdir / TRAINED / "adapter_config.json").is_file()

    resumed = training_metrics(workdir / METRICS)
    steps = [record["step"] for record in resumed]
    assert steps == sorted(steps)
    assert steps[-1] == 15  # 60 pairs / (2 processes x batch 2), one epoch: where it would have ended without the kill
    assert sum("grad_norm" in record for record in resumed) == 15
    assert sum("interval_eval/pass_at_1" in record for record in resumed) == 9  # steps 0, 2, ..., 14 and 15
    differences = [
        (before["step"], key, before.get(key), after.get(key))
        for before, after in zip(uninterrupted, resumed, strict=True)
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    ]
    assert not differences, f"(step, metric, uninterrupted, resumed): {differences}"
    assert weights_digest(workdir / TRAINED) == uninterrupted_weights


GRPO_PROBLEMS = [
    {"id": f"t/{i}", "prompt": f"Write f(x) returning x + {i}.", "test_type": "assert",
     "tests": [f"assert f(1) == {1 + i}", f"assert f(2) == {2 + i}"], "entry_point": "f",
     "reference": f"def f(x):\n    return x + {i}\n"}
    for i in range(8)
]
# 8 problems, 4 per step: an epoch every 2 steps, so the checkpoint at step 3 lies inside the second
# epoch and the one at step 6 at the end of the third. An interval evaluation every 2 steps samples
# from the adapter between the steps, besides the generation of every step; LoRA dropout draws
# random numbers in every forward pass.
GRPO_SETTINGS = {
    "grpo": {"num_generations": 4, "prompts_per_step": 4, "max_steps": 8, "learning_rate": 0.0005,
             "temperature": 1.0, "max_completion_length": 16, "save_steps": 3, "eval_every": 2,
             "eval_problems": 4, "use_vllm": False, "gradient_checkpointing": False},
    "rewards": {"binary": 0.0, "fraction": 1.0},
    "prompt": {"template": "{prompt}\nTest: {tests}\n", "num_tests_shown": 1},
    "execution": {"timeout_s": 5, "memory_mb": 1024},
    "watch": {},
    "lora": {"r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj", "up_proj"]},
}


@pytest.fixture(scope="module")
def warm_tiny_model(tmp_path_factory):
    """A one-layer model fine-tuned on GRPO_PROBLEMS' references until its samples pass some tests and
    fail others: rewards that differ within a group, so GRPO's updates move the adapter."""
    from conftest import build_tiny_model
    from execrl.problems import Problem
    from execrl.prompting import PromptConfig
    from execrl.training.sft import SFTSettings, run_sft

    root = tmp_path_factory.mktemp("warm")
    problems = [Problem(**p) for p in GRPO_PROBLEMS]
    base = build_tiny_model(root, [p.prompt + "\n" + p.reference for p in problems] * 20)
    run_sft(base, problems * 4, PromptConfig(**GRPO_SETTINGS["prompt"]),
            SFTSettings(num_train_epochs=30, learning_rate=0.01, per_device_train_batch_size=8),
            root / "warm", root / "sft.jsonl")
    return root / "warm"


def grpo_job(model, root, output):
    """`accelerate launch` of a 2-process GRPO job as the train rule starts it, writing under `output`."""
    problems = root / "problems.jsonl"
    problems.write_text("".join(json.dumps(p) + "\n" for p in GRPO_PROBLEMS))
    return [
        str(Path(sys.executable).parent / "accelerate"), "launch", "--config_file",
        str(Path(__file__).parents[1] / "workflow" / "accelerate" / "cpu.yaml"),
        "--num_processes", "2", "--num_machines", "1", "--main_process_port", "0",
        "-m", "execrl.training.train_job", "grpo", "--model", str(model), "--settings", json.dumps(GRPO_SETTINGS),
        "--problems", str(problems), "--eval-problems", str(problems), "--output", str(output / "trained"),
        "--metrics", str(output / "metrics.jsonl"), "--checkpoint-root", str(output / "checkpoints"),
        "--run-name", "grpo", "--threads", "1", "--sandbox-workers", "1",
    ]


def grpo_checkpoints(output):
    return sorted(p.parent.name for p in (output / "checkpoints").glob("grpo/*/checkpoint-*/trainer_state.json"))


@pytest.fixture(scope="module")
def uninterrupted_grpo(warm_tiny_model, tmp_path_factory):
    """The 2-process GRPO job run to its end: its folder, metrics (less the clock's) and weights."""
    root = tmp_path_factory.mktemp("uninterrupted_grpo")
    subprocess.run(grpo_job(warm_tiny_model, root, root / "job"), env={**os.environ, "PYTHONHASHSEED": "0"},
                   check=True, capture_output=True, timeout=900)
    metrics = training_metrics(root / "job" / "metrics.jsonl")
    assert sum(record.get("reward_std", 0) > 0 for record in metrics) >= 2, "no step had rewards to learn from"
    return root / "job", metrics, weights_digest(root / "job" / "trained")


def test_killed_two_process_grpo_job_resumes_to_the_same_result(warm_tiny_model, uninterrupted_grpo, tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    uninterrupted_dir, uninterrupted, uninterrupted_weights = uninterrupted_grpo
    resumed_dir = tmp_path / "resumed"

    command = grpo_job(warm_tiny_model, tmp_path, resumed_dir)
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def saved():
        return sorted((resumed_dir / "checkpoints").glob("grpo/*/checkpoint-*/trainer_state.json"))

    deadline = time.monotonic() + 600
    while not saved() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    assert saved() and first.poll() is None, "the job ended before its first checkpoint could be interrupted"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not (resumed_dir / "trained").exists()
    log = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=900).stderr
    assert "resuming from" in log

    resumed = training_metrics(resumed_dir / "metrics.jsonl")
    assert [r["step"] for r in resumed] == [r["step"] for r in uninterrupted] and resumed[-1]["step"] == 8
    differences = [
        (before["step"], key, before.get(key), after.get(key))
        for before, after in zip(uninterrupted, resumed, strict=True)
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    ]
    assert not differences, f"(step, metric, uninterrupted, resumed): {differences}"
    assert weights_digest(resumed_dir / "trained") == uninterrupted_weights


def test_a_two_process_grpo_job_trains_to_the_same_bits_whatever_it_saves_and_recomputes(
    warm_tiny_model, uninterrupted_grpo, tmp_path
):
    """Checkpointing changes no result (`execrl.config.RUNTIME_SETTINGS`): the settings save every 3
    steps and keep activations; the train job's options make it save every 1000 and recompute
    them. The same metrics at every step, the same adapter."""
    assert GRPO_SETTINGS["grpo"]["save_steps"] == 3 and not GRPO_SETTINGS["grpo"]["gradient_checkpointing"]
    settings_dir, settings_metrics, settings_weights = uninterrupted_grpo
    command = [*grpo_job(warm_tiny_model, tmp_path, tmp_path / "optioned"), "--save-steps", "1000",
               "--gradient-checkpointing", "1"]
    subprocess.run(command, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True, capture_output=True, timeout=900)
    # the last two of every third step's checkpoints and the last one, or the last one only
    assert grpo_checkpoints(settings_dir) == ["checkpoint-6", "checkpoint-8"]
    assert grpo_checkpoints(tmp_path / "optioned") == ["checkpoint-8"]
    assert training_metrics(tmp_path / "optioned" / "metrics.jsonl") == settings_metrics
    assert weights_digest(tmp_path / "optioned" / "trained") == settings_weights
