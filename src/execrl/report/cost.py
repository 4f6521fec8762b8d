"""What the run cost, from Snakemake's benchmark files (`benchmark:` of every rule).

Wall time and CPU time are measured by Snakemake. GPU hours are not measured: they are wall
time × the GPUs the workflow requests for the job (`execrl.planning.resources`; for training, the memory
plan's, `execrl.planning.memory_plan`), which is what a cluster bills. Jobs still running, or never run, have no benchmark file and are not counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from execrl.methods import METHODS, rule_info
from execrl.planning.resources import GPU_STAGES, gpus_for
from execrl.run_paths import readable

JOB_COLUMNS = [
    "rule", "phase", "job", "dataset", "model", "method", "wall_s", "cpu_s", "max_rss_mb", "gpus", "gpu_h",
]


def read_benchmark(path: str | Path) -> dict:
    """Mean wall time, CPU time and peak memory over a benchmark file's repeats."""
    frame = pd.read_csv(path, sep="\t", na_values=["-", "NA", "nan"])
    numeric = lambda column: float(pd.to_numeric(frame[column], errors="coerce").mean()) if column in frame else float("nan")  # noqa: E731
    return {"wall_s": numeric("s"), "cpu_s": numeric("cpu_time"), "max_rss_mb": numeric("max_rss")}


def job_table(
    root: str | Path,
    model_sizes: dict[str, float],
    training_gpus: dict[str, dict[str, int]] | None = None,
    segments: set[str] | None = None,
) -> pd.DataFrame:
    """One row per finished job under `root` that computes results (every phase but the report's):
    benchmarks/{rule}/{wildcards}.tsv, the wildcards named by the rule's row in `execrl.methods.RULES`. `training_gpus[model][method]`: the GPUs
    the memory plan gave a training job (its vLLM server's included), billed instead of the
    model's size-based count. With `segments` (the experiment's path segments, execrl.run_paths),
    a job under another experiment's segment is not this run's cost."""
    training_gpus = training_gpus or {}
    root = Path(root)
    rows = []
    for path in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        rule, *values = path.relative_to(root).with_suffix("").parts
        info = rule_info(rule)
        if len(values) != len(info.wildcards):
            # A rule this workflow no longer has, or had with other wildcards: not this run's cost.
            print(f"{path}: not benchmarks/{rule}/{'/'.join(info.wildcards)}.tsv; left out", file=sys.stderr)
            continue
        if segments is not None and any(readable(v) != v and v not in segments for v in values):
            continue  # another experiment's job (experiments' results coexist, execrl.run_paths)
        if info.phase == "report":
            # The report's own jobs run beside or after the cost table, as the scheduler orders
            # them: counting those that happened to finish first would change the total from run to run.
            continue
        # Path segments carry a digest of their settings (execrl.run_paths): the report names them.
        wildcards = {key: readable(value) for key, value in zip(info.wildcards, values)}
        model = wildcards.get("model")
        gpus = gpus_for(info.stage, model_sizes[model]) if info.stage in GPU_STAGES and model in model_sizes else 0
        planned = training_gpus.get(model, {}).get(wildcards.get("method"))
        if rule == "train" and planned is not None:
            gpus = planned
        measured = read_benchmark(path)
        rows.append(
            {
                "rule": rule,
                "phase": info.phase,
                "job": "/".join(values),
                "dataset": wildcards.get("dataset"),
                "model": model,
                "method": info.method or wildcards.get("method"),
                **measured,
                "gpus": gpus,
                "gpu_h": gpus * measured["wall_s"] / 3600 if measured["wall_s"] == measured["wall_s"] else 0.0,
            }
        )
    return pd.DataFrame(rows, columns=JOB_COLUMNS)


def per_rule(jobs: pd.DataFrame) -> pd.DataFrame:
    """Jobs, wall hours, CPU hours, GPU hours and peak memory per rule, most expensive first."""
    if jobs.empty:
        return pd.DataFrame(columns=["rule", "phase", "jobs", "wall_h", "cpu_h", "gpu_h", "max_rss_mb"])
    grouped = jobs.groupby(["rule", "phase"], sort=False).agg(
        jobs=("job", "size"), wall_s=("wall_s", "sum"), cpu_s=("cpu_s", "sum"), gpu_h=("gpu_h", "sum"),
        max_rss_mb=("max_rss_mb", "max"),
    )
    grouped["wall_h"] = grouped.pop("wall_s") / 3600
    grouped["cpu_h"] = grouped.pop("cpu_s") / 3600
    table = grouped.reset_index()[["rule", "phase", "jobs", "wall_h", "cpu_h", "gpu_h", "max_rss_mb"]]
    return table.sort_values("wall_h", ascending=False).reset_index(drop=True)


def per_method(jobs: pd.DataFrame) -> pd.DataFrame:
    """Training and evaluation cost attributable to each method (shared stages left out)."""
    columns = ["method", "training_wall_h", "training_cpu_h", "training_gpu_h", "evaluation_wall_h", "evaluation_cpu_h"]
    attributed = jobs[jobs["method"].notna()]
    rows = []
    for method in [m for m in METHODS if m in set(attributed["method"])]:
        mine = attributed[attributed["method"] == method]
        training = mine[mine["phase"] == "training"]
        evaluation = mine[mine["phase"] == "evaluation"]
        # a method that trains nothing (base, its variants) has no training cost, not a cost of 0
        trained = 1.0 if not training.empty else float("nan")
        rows.append(
            {
                "method": method,
                "training_wall_h": trained * training["wall_s"].sum() / 3600,
                "training_cpu_h": trained * training["cpu_s"].sum() / 3600,
                "training_gpu_h": trained * training["gpu_h"].sum(),
                "evaluation_wall_h": evaluation["wall_s"].sum() / 3600,
                "evaluation_cpu_h": evaluation["cpu_s"].sum() / 3600,
            }
        )
    return pd.DataFrame(rows, columns=columns)


def totals(jobs: pd.DataFrame) -> dict:
    return {
        "jobs": int(len(jobs)),
        "wall_h": float(jobs["wall_s"].sum() / 3600) if len(jobs) else 0.0,
        "cpu_h": float(jobs["cpu_s"].sum() / 3600) if len(jobs) else 0.0,
        "gpu_h": float(jobs["gpu_h"].sum()) if len(jobs) else 0.0,
    }


TRAINING_RULES = ("sft_tiny_model", "train")
"""The training jobs whose wall time the summary lists one by one: a tiny model's warm start and every
method's training."""


def _seed_index(rule: str) -> int | None:
    wildcards = rule_info(rule).wildcards
    return wildcards.index("seed") if "seed" in wildcards else None


def training_jobs(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per warm-start and training job (TRAINING_RULES): rule, dataset, model, method and
    seed (none for a warm start), wall and CPU seconds, peak memory and GPU hours."""
    columns = ["rule", "dataset", "model", "method", "seed", "wall_s", "cpu_s", "max_rss_mb", "gpu_h"]
    if jobs.empty:
        return pd.DataFrame(columns=columns)
    chosen = jobs[jobs["rule"].isin(TRAINING_RULES)].copy()
    seed_index = {rule: _seed_index(rule) for rule in TRAINING_RULES}
    chosen["seed"] = pd.Series(
        [int(str(job).split("/")[seed_index[rule]]) if seed_index[rule] is not None else None
         for rule, job in zip(chosen["rule"], chosen["job"], strict=True)],
        index=chosen.index, dtype=object,
    )  # fmt: skip
    order = {rule: i for i, rule in enumerate(TRAINING_RULES)}
    chosen = chosen.assign(_order=chosen["rule"].map(order), _seed=[-1 if s is None else s for s in chosen["seed"]])
    chosen = chosen.sort_values(["_order", "dataset", "model", "method", "_seed"], na_position="first", kind="stable")
    return chosen[columns].reset_index(drop=True)
