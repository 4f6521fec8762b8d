"""How long `snakemake -n` takes to plan an experiment, against the shipped configs' plan times
and Snakemake's own start-up, measured in the same run.

The paper-sized grid: 2 data sets (MBPP, TACO-verified) x 2 hub models (Qwen2.5-3B and 7B) x
every method x 5 seeds, evaluated on both splits, with the Slurm profile (offline: nothing runs
and nothing is downloaded). The baseline is the same workflow planning one base-model run, so
`per job` is what each further job costs.

    PYTHONPATH=src .venv/bin/python bench/plan_time.py [--repeat 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

GRID = {
    "experiment": {
        "name": "paper-grid",
        "datasets": ["mbpp", "taco-verified"],
        "models": ["qwen2.5-3b-instruct", "qwen2.5-7b-instruct"],
        "methods": ["base", "dpo", "grpo", "srrl"],
        "seeds": [0, 1, 2, 3, 4],
        "eval_splits": ["train", "test"],
    },
    "datasets": {
        "taco-verified": {"adapter": "taco", "source": "likaixin/TACO-verified", "options": {"test_fraction": 0.1, "seed": 0}}
    },
    "models": {"qwen2.5-7b-instruct": {"source": "Qwen/Qwen2.5-7B-Instruct", "params_b": 7.6}},
    # 7B's weights and KV cache do not fit config.yaml's colocated share (0.3 of a GPU): the plan
    # refuses it, so the grid serves vLLM from GPUs of its own.
    "grpo": {"vllm_mode": "server"},
}
ONE_RUN = {"experiment": {"name": "one-run", "methods": ["base"], "seeds": [0]}}


def plan(workdir: Path, configfiles: list[str], quiet: bool) -> tuple[float, int]:
    extra = ["--configfile", *configfiles] if configfiles else []
    # Quiet leaves out the printing of each job (its resources, params and shell command).
    printing = ["--quiet", "rules"] if quiet else []
    start = time.perf_counter()
    result = subprocess.run(
        [SNAKEMAKE, "results/report.html", "--profile", "slurm", "-n", *printing, *extra],
        cwd=workdir, capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(result.stdout[-2000:] + result.stderr[-2000:])
    total = re.search(r"^total\s+(\d+)$", result.stdout, re.MULTILINE)
    return elapsed, int(total.group(1)) if total else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = {"repeat": args.repeat, "cpus": os.cpu_count(), "load_average_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for name in ("workflow", "config", "profiles", ".test"):
            shutil.copytree(REPO / name, workdir / name)
        (workdir / "slurm").symlink_to("profiles/slurm")
        (workdir / "config" / "grid.yaml").write_text(yaml.safe_dump(GRID))
        (workdir / "config" / "one-run.yaml").write_text(yaml.safe_dump(ONE_RUN))
        cases = {
            "one base-model run (baseline)": ["config/one-run.yaml"],
            "config/config.yaml": [],
            "config/mbpp-taco-dpo-grpo.yaml": ["config/mbpp-taco-dpo-grpo.yaml"],
            "config/scaling-binary-bonus.yaml": ["config/scaling-binary-bonus.yaml"],
            "paper grid": ["config/grid.yaml"],
        }
        for quiet in (False, True):
            figures["quiet" if quiet else "every_job_printed"] = report(workdir, cases, quiet, args.repeat)
    figures["load_average_after"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


def report(workdir: Path, cases: dict[str, list[str]], quiet: bool, repeat: int) -> dict[str, dict]:
    times: dict[str, list[float]] = {name: [] for name in cases}
    jobs: dict[str, int] = {}
    for _ in range(repeat):  # interleaved, so load on the machine hits every case alike
        for name, configfiles in cases.items():
            elapsed, jobs[name] = plan(workdir, configfiles, quiet)
            times[name].append(elapsed)
    baseline = statistics.median(times["one base-model run (baseline)"])
    base_jobs = jobs["one base-model run (baseline)"]
    print("snakemake -n --quiet rules" if quiet else "snakemake -n (every job printed)")
    print(f"  {'experiment':36} {'jobs':>5} {'median s':>9} {'min s':>6} {'max s':>6} {'ms/job beyond baseline':>23}")
    for name, values in times.items():
        median = statistics.median(values)
        extra = (median - baseline) / (jobs[name] - base_jobs) * 1000 if jobs[name] > base_jobs else float("nan")
        print(f"  {name:36} {jobs[name]:>5} {median:>9.2f} {min(values):>6.2f} {max(values):>6.2f} {extra:>23.2f}")
    return {name: {"jobs": jobs[name], "seconds": values} for name, values in times.items()}


if __name__ == "__main__":
    main()
