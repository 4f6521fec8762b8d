"""pass@k per problem and per run, from execution annotations."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from execrl.evaluation.passk import feasible_ks, pass_at_k
from execrl.problems import Problem
from execrl.sandbox.result import counted_tests_passed

STATUSES = ("pass", "fail", "error", "timeout", "syntax_error")


def evaluate_annotations(problems: list[Problem], annotations: list[dict], ks: list[int]) -> dict:
    """Per-problem (n, c, pass@k) and their means; every problem must have the same n samples."""
    by_problem: dict[str, list[dict]] = defaultdict(list)
    for record in annotations:
        by_problem[record["problem_id"]].append(record)
    missing = [p.id for p in problems if p.id not in by_problem]
    if missing:
        raise ValueError(f"{len(missing)} problem(s) have no annotated candidates, e.g. {missing[:3]}")
    sample_counts = {len(records) for records in by_problem.values()}
    if len(sample_counts) != 1:
        raise ValueError(f"problems have different numbers of samples: {sorted(sample_counts)}")
    n = sample_counts.pop()
    usable_ks = feasible_ks(sorted(ks), n)
    per_problem = []
    for problem in problems:
        records = by_problem[problem.id]
        c = sum(record["status"] == "pass" for record in records)
        per_problem.append(
            {
                "problem_id": problem.id,
                "n": n,
                "c": c,
                "mean_tests_passed_fraction": sum(counted_tests_passed(r) / max(r["tests_total"], 1) for r in records) / n,
                "pass_at_k": {str(k): pass_at_k(n, c, k) for k in usable_ks},
                # Problems of one task (metadata.task) are resampled together by the report's intervals.
                **({"task": str(problem.metadata["task"])} if problem.metadata.get("task") is not None else {}),
            }
        )
    status_counts = Counter(record["status"] for record in annotations)
    return {
        "n_problems": len(problems),
        "n_samples": n,
        "pass_at_k": {
            str(k): sum(row["pass_at_k"][str(k)] for row in per_problem) / len(per_problem) for k in usable_ks
        },
        "status_counts": {status: status_counts.get(status, 0) for status in STATUSES},
        "per_problem": per_problem,
    }


def summary_table(evaluation_paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per run and k: dataset, model, method, seed, split, k, pass_at_k, counts."""
    rows = []
    for path in evaluation_paths:
        evaluation = json.loads(Path(path).read_text(encoding="utf-8"))
        for k, value in evaluation["pass_at_k"].items():
            rows.append(
                {
                    **evaluation["run"],
                    "k": int(k),
                    "pass_at_k": value,
                    "n_problems": evaluation["n_problems"],
                    "n_samples": evaluation["n_samples"],
                }
            )
    return pd.DataFrame(rows).sort_values(["dataset", "model", "split", "method", "seed", "k"]).reset_index(drop=True)
