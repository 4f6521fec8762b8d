"""`python -m execrl.training.train_job` under `accelerate launch` with 2 CPU processes (gloo), as the `train` rule runs it.

What each rank did is observed, not assumed: the data each rank's loader loads comes from the
job's log (`rank R/N loads ...`), and which process writes the output folder and the metrics
file comes from a Python audit hook that a `sitecustomize` on PYTHONPATH installs in every
process of the job.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from execrl.planning.launch import DEFAULT_CONFIG_DIR
from execrl.models.tiny_model import TinyModelConfig, init_model, train_tokenizer

pytestmark = pytest.mark.slow

ACCELERATE = str(Path(sys.executable).with_name("accelerate"))
LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
PROBLEMS = [
    {"id": f"t/{i}", "prompt": f"Write f(x) returning x + {i}.", "test_type": "assert",
     "tests": [f"assert f(1) == {1 + i}", f"assert f(2) == {2 + i}"], "entry_point": "f",
     "reference": f"def f(x):\n    return x + {i}\n"}
    for i in range(8)
]

# Installed in every process of the job: records each file opened for writing, with the rank.
WRITE_RECORDER = '''
import os, sys
_log = os.environ["WRITES_LOG"]
_rank = os.environ.get("RANK", "launcher")
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT

def _hook(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path, mode, flags = args
    if (mode and any(c in mode for c in "wax+")) or (mode is None and flags & _WRITE):
        path = os.path.abspath(os.fsdecode(path))
        if path != _log:
            with open(_log, "a") as handle:
                handle.write(f"{_rank}\\t{path}\\n")

sys.addaudithook(_hook)
'''


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def build_tiny(root, config=TinyModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                            num_key_value_heads=1, intermediate_size=64)):
    """A tiny model in root/model, and the write recorder in root/hook."""
    texts = [p["prompt"] + "\n" + p["reference"] for p in PROBLEMS] * 20
    train_tokenizer(texts, 300, root / "tokenizer")
    init_model(root / "tokenizer", config, seed=0, out_dir=root / "model")
    (root / "hook").mkdir()
    (root / "hook" / "sitecustomize.py").write_text(WRITE_RECORDER)
    return root


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("tiny"))


def pairs(n):
    return [
        {"problem_id": f"t/{i % 8}", "prompt": f"Write f(x) returning x + {i}.\n",
         "chosen": f"def f(x):\n    return x + {i}\n", "rejected": f"def f(x):\n    return x - {i}\n"}
        for i in range(n)
    ]


def dpo_settings(batch=2, save_steps=2, lora=LORA):
    """Without the interval evaluation (tests/test_interval_eval.py runs DPO's), so a step is one record."""
    return {
        "dpo": {"per_device_train_batch_size": batch, "num_train_epochs": 1, "save_steps": save_steps,
                "max_length": 64, "gradient_checkpointing": False, "learning_rate": 1e-3, "seed": 0, "eval_every": 0},
        "lora": lora,
        "prompt": {"template": "{prompt}\nTest: {tests}\n", "num_tests_shown": 1},
        "execution": {"timeout_s": 2, "memory_mb": 512},
    }


def grpo_settings():
    return {
        "grpo": {"num_generations": 2, "prompts_per_step": 4, "max_steps": 2, "max_completion_length": 8,
                 "save_steps": 1, "gradient_checkpointing": False, "learning_rate": 1e-3, "eval_every": 1,
                 "eval_problems": 3, "use_vllm": False, "temperature": 1.0, "seed": 0},
        "rewards": {"binary": 1.0},
        "lora": LORA,
        "prompt": {"template": "{prompt}\nTest: {tests}\n", "num_tests_shown": 1},
        "execution": {"timeout_s": 2, "memory_mb": 512},
        "watch": {"sample_size": 4},
    }


def job(tiny, workdir, method, settings, data, processes=2, extra=(), config="cpu.yaml", prefix=()):
    """The `train` rule's command line, and an environment that records every process's writes."""
    command = [
        *prefix, ACCELERATE, "launch", "--config_file", str(DEFAULT_CONFIG_DIR / config),
        "--num_processes", str(processes), "--num_machines", "1", "--main_process_port", "0",
        "-m", "execrl.training.train_job", method, "--model", str(tiny / "model"), "--settings", json.dumps(settings),
        "--pairs" if method == "dpo" else "--problems", str(data),
        "--output", str(workdir / "trained"), "--metrics", str(workdir / "metrics.jsonl"),
        "--checkpoint-root", str(workdir / "checkpoints"), "--run-name", f"{method}/run", "--threads", "1",
        *extra,
    ]
    python_path = os.pathsep.join(filter(None, [str(tiny / "hook"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": python_path, "WRITES_LOG": str(workdir / "writes.tsv"), "OMP_NUM_THREADS": "1"}
    return command, env


def run(command, env, workdir):
    result = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=600)
    (workdir / "job.log").write_text(result.stderr)
    assert result.returncode == 0, result.stderr[-6000:]
    return result.stderr


def loaded_by_rank(log):
    """Each rank's batches, in order, as its log lines name them."""
    batches = {}
    # Not anchored: a progress bar's carriage-return line may precede a rank's line.
    for rank, ids in re.findall(r"rank (\d+)/2 loads ([^\n]+)", log):
        batches.setdefault(int(rank), []).append(ids.split())
    return batches


def writers(workdir, *paths):
    """Ranks that opened a file under any of `paths` for writing."""
    found = set()
    for line in (workdir / "writes.tsv").read_text().splitlines():
        rank, path = line.split("\t")
        if any(path.startswith(str(p)) for p in paths):
            found.add(rank)
    return found


def step_records(workdir):
    """The step of every per-step record (the run's closing summary aside)."""
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in records if "train_runtime" not in r]


def test_dpo_on_two_processes(tiny, tmp_path):
    data = write_jsonl(tmp_path / "pairs.jsonl", pairs(16))
    log = run(*job(tiny, tmp_path, "dpo", dpo_settings(), data), tmp_path)

    batches = loaded_by_rank(log)
    assert set(batches) == {0, 1}
    shards = {rank: [pair for batch in rank_batches for pair in batch] for rank, rank_batches in batches.items()}
    # 16 pairs, 2 per process and step, one epoch: each rank trains on its own 8, together on all.
    assert len(shards[0]) == len(shards[1]) == 8
    assert sorted(map(int, shards[0] + shards[1])) == list(range(16))

    assert (tmp_path / "trained" / "adapter_config.json").is_file()
    assert (tmp_path / "trained" / "tokenizer.json").is_file()
    assert writers(tmp_path, tmp_path / "trained", tmp_path / "metrics.jsonl", tmp_path / "checkpoints") == {"0"}
    assert step_records(tmp_path) == [1, 2, 3, 4]  # rank 0's records only, one per step


def test_grpo_on_two_processes(tiny, tmp_path):
    data = write_jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    command, env = job(tiny, tmp_path, "grpo", grpo_settings(), data,
                       extra=("--eval-problems", str(data), "--sandbox-workers", "1"))
    log = run(command, env, tmp_path)

    batches = loaded_by_rank(log)
    assert set(batches) == {0, 1} and len(batches[0]) == len(batches[1]) >= 2
    # 4 prompts a step over 2 processes: each rank samples 2 of every step's problems, the other rank the other 2.
    for mine, theirs in zip(batches[0], batches[1], strict=True):
        assert len(mine) == len(theirs) == 2 and not set(mine) & set(theirs)

    assert (tmp_path / "trained" / "adapter_config.json").is_file()
    assert writers(tmp_path, tmp_path / "trained", tmp_path / "metrics.jsonl", tmp_path / "checkpoints") == {"0"}
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sorted(set(step_records(tmp_path))) == [0, 1, 2]  # the evaluation before the first step, then the steps
    # Every step's own record (its loss) is written once, beside the interval evaluation's: rank 0 alone writes.
    assert [r["step"] for r in records if "loss" in r] == [1, 2]
    # The reward-hacking watch logs its shares every step (these problems have no held-out tests).
    stepped = [r for r in records if "reward" in r]
    assert [r["step"] for r in stepped] == [1, 2]
    assert all(0.0 <= r["watch/tamper/any"] <= 1.0 and r["watch/hard_coding_checked"] == 0 for r in stepped)
    # Generated tokens are summed over both processes: each step adds its 8 completions' tokens (TRL's
    # mean length is over all 8), and each checkpoint keeps the count for a resumed run.
    generated = [0.0] + [r["num_generated_tokens"] for r in stepped]
    for before, after, record in zip(generated, generated[1:], stepped):
        assert after - before == pytest.approx(record["completions/mean_length"] * 8)
        assert record["num_tokens"] > after  # prompt tokens besides
    states = sorted(tmp_path.glob("checkpoints/grpo/run/*/checkpoint-*/trainer_state.json"))
    assert states
    for state in states:
        saved = json.loads(state.read_text())
        kept = saved["stateful_callbacks"]["GeneratedTokenCount"]["attributes"]["count"]
        assert kept == generated[saved["global_step"]]
    # The interval evaluation's 3 problems are shared out over the ranks and summed: a pass rate in thirds.
    rates = [r["interval_eval/pass_at_1"] for r in records if "interval_eval/pass_at_1" in r]
    assert len(rates) == 3 and all(round(rate * 3, 6) == round(rate * 3) for rate in rates)


def training_processes(workdir):
    """Live processes of `execrl.training.train_job` writing under `workdir`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if b"execrl.training.train_job" in argv and str(workdir).encode() in b" ".join(argv) and state != "Z":
            found.append(int(proc.name))
    return found


def checkpoints(workdir):
    return sorted(workdir.glob("checkpoints/dpo/run/*/checkpoint-*/trainer_state.json"))


def test_killed_two_process_run_resumes_from_its_checkpoint(tiny, tmp_path):
    data = write_jsonl(tmp_path / "pairs.jsonl", pairs(120))
    command, env = job(tiny, tmp_path, "dpo", dpo_settings(batch=1, save_steps=5), data)
    first = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not checkpoints(tmp_path) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    assert first.poll() is None, "the run ended before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)  # the launcher's process group, as a local scheduler cancelling it would
    first.wait()
    # torchrun put each training process in a session of its own: they must die with the launcher.
    deadline = time.monotonic() + 30
    while training_processes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not training_processes(tmp_path), "training processes outlived their launcher"
    assert checkpoints(tmp_path), "no checkpoint appeared"
    assert not (tmp_path / "trained").exists()
    saved = max(json.loads(p.read_text())["global_step"] for p in checkpoints(tmp_path))
    assert saved < 60  # killed mid-run

    # Runtime options differ on the second attempt: the checkpoint folder is the same.
    log = run(command[:-2] + ["--threads", "2"], env, tmp_path)
    resumed = [int(step) for step in re.findall(r"resuming from \S+/checkpoint-(\d+)", log)]
    assert len(resumed) == 2 and resumed[0] == resumed[1] >= saved  # both ranks, from the newest checkpoint
    steps = step_records(tmp_path)
    assert steps == list(range(1, 61))  # 120 pairs, 1 per process and step: the run ends where it would have
    assert (tmp_path / "trained" / "adapter_config.json").is_file()


def test_full_weight_training_in_one_process_writes_a_loadable_model(tiny, tmp_path):
    """`"lora": null` trains every weight; `--num_processes 1` with the CPU config is the one-process path."""
    import torch
    from transformers import AutoModelForCausalLM

    data = write_jsonl(tmp_path / "pairs.jsonl", pairs(8))
    run(*job(tiny, tmp_path, "dpo", dpo_settings(lora=None), data, processes=1), tmp_path)
    assert not (tmp_path / "trained" / "adapter_config.json").exists()
    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "trained")
    base = AutoModelForCausalLM.from_pretrained(tiny / "model")
    changed = [name for name, weight in trained.state_dict().items() if not torch.equal(weight, base.state_dict()[name])]
    assert "model.layers.0.mlp.up_proj.weight" in changed  # not only attention: every weight trained
