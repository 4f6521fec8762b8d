"""The pilot that chose the embedded default's demo settings: candidate overlays of the warm start
and GRPO, each run through the workflow up to GRPO's training metrics, then measured on what the
demo must show — GRPO's training pass rate rising from the first to the last fifth of its steps,
with a 95% interval that allows for the steps' autocorrelation — and on what it costs (the warm
start's and GRPO's wall time from their benchmark files).

    .venv/bin/python bench/demo_pilot.py --workdir /tmp/pilot [--candidates a b] [--seed 0]
        [--output docs/results/demo_pilot.json]
    .venv/bin/python bench/demo_pilot.py --measure RUN/results/training/.../grpo-*/*/metrics.jsonl
        [--output docs/results/demo_seeds.json]

`--measure` runs nothing: it measures the same rise on finished GRPO runs (a `make report` and its
`two-seeds` overlay's GRPO target, say), one line per metrics file.

Candidates share one working copy of the workflow, so those with the same warm-start settings
share its warm start (every result path carries a digest of its settings). Each candidate is laid
over the embedded default (.test/config/config.yaml) as it is in the checkout, so the pilot
measures the default's other settings as they ship.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
EMBEDDED = ".test/config/config.yaml"

# Only what GRPO's training curve needs: no interval evaluation, no checkpoints past the run.
PILOT = {"experiment": {"methods": ["base", "grpo"]}, "grpo": {"eval_every": 0, "save_steps": 1000}}

# Each candidate states every value the pilot varies, so it means the same laid over any version of
# the embedded default: the RL problems (n_train, train_problems), GRPO's learning rate, completion
# length and steps, and the reward. The warm start is the default's (1000 warmup tasks, 10 epochs).
FRACTION_REWARD = {"binary": 0.0, "fraction": 0.0, "fraction_perfect": 1.0, "perfect_bonus": 1.0}
CANDIDATES = {
    # All 1000 RL problems, each seen about once in 100 steps of 8 prompts.
    "p1000-lr2e-3-len48-fraction": {
        "datasets": {"builtin": {"options": {"n_train": 1000}}},
        "grpo": {"max_steps": 100, "learning_rate": 0.002, "max_completion_length": 48, "train_problems": None},
        "rewards": FRACTION_REWARD,
    },
    # 64 RL problems, each seen about 12 times: learning them shows within the run.
    "p64-lr2e-3-len48-fraction": {
        "datasets": {"builtin": {"options": {"n_train": 1000}}},
        "grpo": {"max_steps": 100, "learning_rate": 0.002, "max_completion_length": 48, "train_problems": 64},
        "rewards": FRACTION_REWARD,
    },
    "p64-lr5e-3-len48-fraction": {
        "datasets": {"builtin": {"options": {"n_train": 1000}}},
        "grpo": {"max_steps": 100, "learning_rate": 0.005, "max_completion_length": 48, "train_problems": 64},
        "rewards": FRACTION_REWARD,
    },
    # The embedded default as it ships (the p64 choice, its 64 problems as the whole train split).
    "default": {},
}


def deep_update(base: dict, overlay: dict) -> dict:
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = value
    return base


def grpo_paths(workdir: Path, config_file: str) -> dict[str, Path]:
    from execrl.config import merged_config
    from execrl.run_paths import RunSegments

    runs = RunSegments(merged_config([workdir / EMBEDDED, workdir / config_file], base=workdir / "config" / "config.yaml"))
    trained = runs.run("builtin", "tiny", "grpo", "trained")
    return {
        "metrics": workdir / f"results/training/{trained}/0/metrics.jsonl",
        "train_benchmark": workdir / f"benchmarks/train/{trained}/0.tsv",
        "warm_start_benchmark": workdir / f"benchmarks/sft_tiny_model/{runs.dataset['builtin']}/{runs.model['tiny']}.tsv",
    }


def wall_s(benchmark: Path) -> float | None:
    if not benchmark.exists():
        return None
    with benchmark.open() as handle:
        return float(next(csv.DictReader(handle, delimiter="\t"))["s"])


def run_candidate(workdir: Path, name: str, overlay: dict, seed: int) -> dict:
    config = deep_update(deep_update(json.loads(json.dumps(PILOT)), overlay), {"experiment": {"seeds": [seed]}})
    config_file = f"config/pilot-{name}.yaml"
    (workdir / config_file).write_text(yaml.safe_dump(config))
    paths = grpo_paths(workdir, config_file)
    target = str(paths["metrics"].relative_to(workdir)).replace("/0/metrics.jsonl", f"/{seed}/metrics.jsonl")
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.monotonic()
    subprocess.run(
        # --nolock: candidates run side by side in one working copy; each writes its own paths.
        [snakemake, "--profile", "profiles/local", "--nolock", target, "--configfile", EMBEDDED, config_file],
        cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL,
    )
    metrics = [json.loads(line) for line in (workdir / target).read_text().splitlines()]
    pass_rate = [row["execution/pass_rate"] for row in metrics if "execution/pass_rate" in row]
    return {
        "candidate": name,
        "overlay": overlay,
        "seed": seed,
        "pass_rate": pass_rate,
        "rise": window_rise(pass_rate),
        "grpo_wall_s": wall_s(workdir / str(paths["train_benchmark"].relative_to(workdir)).replace("/0.tsv", f"/{seed}.tsv")),
        "warm_start_wall_s": wall_s(paths["warm_start_benchmark"]),
        "snakemake_wall_s": round(time.monotonic() - started, 1),
    }


def measure_run(metrics: Path) -> dict:
    """The rise of one finished GRPO run's training pass rate, named by its path's last segments
    (method segment and seed)."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    pass_rate = [row["execution/pass_rate"] for row in rows if "execution/pass_rate" in row]
    return {"run": "/".join(metrics.parts[-3:-1]), "pass_rate": pass_rate, "rise": window_rise(pass_rate)}


def window_rise(values: list[float]) -> dict:
    """First-vs-last-fifth change with its autocorrelation-aware 95% interval (the report's rule,
    `execrl.report.training.change_interval`)."""
    from execrl.report.training import WINDOW_FRACTION, change_interval

    size = max(1, len(values) // WINDOW_FRACTION)
    first, last = values[:size], values[-size:]
    interval = change_interval(first, last) or (float("nan"), float("nan"))
    return {
        "first": sum(first) / len(first),
        "last": sum(last) / len(last),
        "change": sum(last) / len(last) - sum(first) / len(first),
        "ci_low": float(interval[0]),
        "ci_high": float(interval[1]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="the working copy candidates run in (not with --measure)")
    parser.add_argument("--candidates", nargs="*", default=list(CANDIDATES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true", help="use the working copy as it is (another pilot runs in it)")
    parser.add_argument("--measure", nargs="+", type=Path, help="finished runs' metrics.jsonl: measure, run nothing")
    args = parser.parse_args(argv)
    if args.measure:
        measured = [measure_run(path) for path in args.measure]
        for result in measured:
            rise = result["rise"]
            print(f"{result['run']}: pass rate {rise['first']:.3f} -> {rise['last']:.3f}, change {rise['change']:+.3f}"
                  f" [{rise['ci_low']:+.3f}, {rise['ci_high']:+.3f}]")  # fmt: skip
        if args.output:
            args.output.write_text(json.dumps({"command": " ".join(sys.argv), "results": measured}, indent=1) + "\n")
        return
    if args.workdir is None:
        parser.error("--workdir is required to run candidates")
    args.workdir.mkdir(parents=True, exist_ok=True)
    for name in () if args.reuse else ("workflow", "config", "profiles", ".test"):
        shutil.rmtree(args.workdir / name, ignore_errors=True)
        shutil.copytree(REPO / name, args.workdir / name)
    results = []
    for name in args.candidates:
        result = run_candidate(args.workdir, name, CANDIDATES[name], args.seed)
        rise = result["rise"]
        print(
            f"{name}: pass rate {rise['first']:.3f} -> {rise['last']:.3f}, change {rise['change']:+.3f}"
            f" [{rise['ci_low']:+.3f}, {rise['ci_high']:+.3f}]; GRPO {result['grpo_wall_s']:.0f} s,"
            f" warm start {result['warm_start_wall_s']:.0f} s",
            flush=True,
        )
        results.append(result)
        if args.output:
            args.output.write_text(json.dumps({"command": " ".join(sys.argv), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
