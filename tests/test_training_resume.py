"""A 2-process training job, run by the workflow's `train` rule (its own `accelerate launch`
command, gloo on CPU), killed after its first checkpoint, resumes from it when the rule runs
again; each rank trains on its own shard, and one adapter is written. The resumed job is the job
never interrupted, to the bit: every metric of every logged step, and the trained weights."""

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
