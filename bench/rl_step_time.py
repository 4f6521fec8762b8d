"""Seconds per GRPO / SRRL step, with the batch scored in length-sorted chunks and as TRL does.

`LengthChunkedGRPOTrainer` with `score_chunks = 1` scores the whole batch on one width, which
is TRL's own behaviour (the baseline); the default (4) cuts each chunk to its own width. Both
run the same seeded steps from the same model, one after the other in this process, in
`--rounds` rounds that alternate which runs first; the script prints each round's mean step
time (TRL's `step_time`, first step left out) and ratio, and the ratios' mean and standard error.

Needs a warm-started tiny model and the builtin data, i.e. a finished `make report`:

    PYTHONPATH=src .venv/bin/python bench/rl_step_time.py [--method srrl] [--steps 12] [--rounds 3] [--threads 1]
        [--json docs/results/rl_step_time_srrl.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml

from execrl.compute import cpu_model, pin_cpu_kernels
from execrl.config import merged_config
from execrl.training.grpo import GRPOSettings, LengthChunkedGRPOTrainer, train_grpo
from execrl.training.lora import LoRASettings
from execrl.problems import read_problems
from execrl.prompting import PromptConfig
from execrl.training.rewards import RewardSettings
from execrl.run_paths import RunSegments
from execrl.sandbox import ExecutionLimits, Executor
from execrl.training.srrl import SRRLSettings


def run(method: str, steps: int, chunks: int, config: dict, model: str, data: Path) -> list[float]:
    LengthChunkedGRPOTrainer.score_chunks = chunks
    settings = GRPOSettings(**{**config["grpo"], "max_steps": steps, "eval_every": 0, "save_steps": steps + 1})
    execution = config["execution"]
    limits = ExecutionLimits(timeout_s=execution["timeout_s"], memory_mb=execution["memory_mb"])
    with tempfile.TemporaryDirectory() as out, Executor(workers=execution["workers"], limits=limits) as executor:
        out = Path(out)
        train_grpo(
            model_path=model,
            problems=read_problems(data / "train.jsonl"),
            eval_problems=[],
            prompt_config=PromptConfig(**config["prompt"]),
            settings=settings,
            reward_settings=RewardSettings(**config["rewards"]),
            lora=LoRASettings(**config["lora"]),
            executor=executor,
            checkpoint_dir=out / "checkpoints",
            adapter_dir=out / "adapter",
            metrics_path=out / "metrics.jsonl",
            srrl=SRRLSettings(**config["srrl"]) if method == "srrl" else None,
        )
        records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["step_time"] for r in records if "step_time" in r][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=("grpo", "srrl"), default="srrl")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=1, help="runs of both ways, alternated")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the local profile uses 1)")
    parser.add_argument("--config", default=".test/config/config.yaml")
    parser.add_argument("--model", help="default: the embedded default's built tiny model")
    parser.add_argument("--data", help="default: the embedded default's builtin data set folder")
    parser.add_argument("--json", type=Path, help="also write the figures, each step's time and the machine's load here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    merged = merged_config([args.config])
    # The embedded default's paths carry its settings' digests (execrl.run_paths).
    runs = RunSegments(merged)
    args.model = args.model or f"results/models/{runs.dataset['builtin']}/{runs.model['tiny']}/base"
    args.data = args.data or f"results/data/{runs.dataset['builtin']}"
    # The kernels the workflow's jobs run with (execrl.compute), set before torch computes anything.
    pinned = pin_cpu_kernels(merged["compute"]["cpu_kernels"])
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(Path(args.config).read_text())
    ways = (("one width (TRL)", 1), ("length-sorted chunks", 4))
    rounds = []
    for number in range(args.rounds):
        # Alternated, the order flipped every round: a drift of the machine's load reaches both ways.
        times = {}
        for label, chunks in ways if number % 2 == 0 else ways[::-1]:
            times[label] = run(args.method, args.steps, chunks, config, args.model, Path(args.data))
            print(f"round {number + 1} {args.method} {label:>22}: {statistics.mean(times[label]):.3f} s/step "
                  f"(median {statistics.median(times[label]):.3f}, {len(times[label])} steps)", flush=True)
        speedup = statistics.mean(times[ways[0][0]]) / statistics.mean(times[ways[1][0]])
        rounds.append({"step_times_s": times, "speedup": speedup})
        print(f"round {number + 1} speedup: {speedup:.2f}x", flush=True)
    speedups = [r["speedup"] for r in rounds]
    spread = statistics.stdev(speedups) / len(speedups) ** 0.5 if len(speedups) > 1 else None
    print(f"speedup: mean {statistics.mean(speedups):.2f}x over {len(speedups)} rounds"
          + (f" (standard error {spread:.2f})" if spread is not None else ""))
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        figures = {
            "command": " ".join(["bench/rl_step_time.py", *sys.argv[1:]]),
            "commit": commit,
            "method": args.method,
            "torch_threads": args.threads,
            "cpus": os.cpu_count(),
            "processor": cpu_model(),
            "cpu_kernels": merged["compute"]["cpu_kernels"],
            "pinned_environment": pinned,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "note": "per round: TRL's step_time of each step but the first, both ways, and the ratio of their "
                    "means (one width / chunks); the rounds alternate which way runs first",
            "rounds": rounds,
            "mean_s_per_step": {label: statistics.mean(statistics.mean(r["step_times_s"][label]) for r in rounds)
                                for label, _ in ways},
            "speedup_mean": statistics.mean(speedups),
            "speedup_standard_error": spread,
        }
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
