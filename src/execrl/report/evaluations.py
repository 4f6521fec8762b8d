"""Tables the report reads from the evaluation files: per-problem counts and outcome counts."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from execrl.evaluation.scores import STATUSES
from execrl.run_paths import readable

RUN_KEYS = ["dataset", "model", "method", "seed", "split"]
GROUP_KEYS = ["dataset", "model", "split", "method"]
"""A method's runs over seeds."""

OUTCOME_LABELS = {
    "syntax_error": "syntax error",
    "error": "runtime error",
    "fail": "wrong answer",
    "timeout": "timeout",
    "pass": "pass",
}
"""Executor statuses in the report's words, from worst to best."""


def _read(path: str | Path) -> dict:
    evaluation = json.loads(Path(path).read_text(encoding="utf-8"))
    if "run" not in evaluation:
        raise ValueError(f"{path}: evaluation has no `run` record (dataset, model, method, seed, split)")
    return evaluation


def per_problem_table(evaluation_paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per run and problem: n samples, c passing, mean share of tests passed, and the
    problem's task where its data set names one (empty otherwise)."""
    rows = []
    for path in evaluation_paths:
        evaluation = _read(path)
        run = {key: evaluation["run"][key] for key in RUN_KEYS}
        for row in evaluation["per_problem"]:
            rows.append(
                {
                    **run,
                    "problem_id": row["problem_id"],
                    "n": int(row["n"]),
                    "c": int(row["c"]),
                    "mean_tests_passed_fraction": row.get("mean_tests_passed_fraction"),
                    "task": row.get("task"),
                }
            )
    frame = pd.DataFrame(rows, columns=[*RUN_KEYS, "problem_id", "n", "c", "mean_tests_passed_fraction", "task"])
    frame["seed"] = frame["seed"].astype(int)
    return frame.sort_values([*RUN_KEYS, "problem_id"]).reset_index(drop=True)


def outcome_table(evaluation_paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per run and status: how many candidates ended that way."""
    rows = []
    for path in evaluation_paths:
        evaluation = _read(path)
        run = {key: evaluation["run"][key] for key in RUN_KEYS}
        counts = evaluation["status_counts"]
        for status in STATUSES:
            rows.append({**run, "status": status, "count": int(counts.get(status, 0))})
    frame = pd.DataFrame(rows, columns=[*RUN_KEYS, "status", "count"])
    frame["seed"] = frame["seed"].astype(int)
    return frame.sort_values(RUN_KEYS, kind="stable").reset_index(drop=True)


TEXT_COLUMNS = ("dataset", "model", "method", "baseline", "split", "problem_id", "task", "status")
"""Columns of names and ids: read as the text they are."""


def read_tsv(path: str | Path) -> pd.DataFrame:
    """A report table, with names and ids kept as text: a problem id `01` stays `01` (not the
    number 1, which `1` also reads as) and `NA`, `nan` or `None` stay ids (pandas reads them as
    missing by default, and a missing id drops out of every pivot). Only an empty cell is missing:
    it is what `to_csv` writes for one."""
    columns = pd.read_csv(path, sep="\t", nrows=0).columns
    text = {column: str for column in columns if column in TEXT_COLUMNS}
    frame = pd.read_csv(path, sep="\t", dtype=text, keep_default_na=False, na_values=dict.fromkeys(columns, [""]))
    if "seed" in frame:
        frame["seed"] = frame["seed"].astype(int)
    return frame


def held_out_table(base_paths: Iterable[str | Path], plus_paths: Iterable[str | Path]) -> pd.DataFrame:
    """pass@k of each run on its base tests and on base + held-out tests, side by side.

    The gap (base − plus) is the share of pass@k that the held-out tests take away: programs
    that pass the tests the prompt showed but not new inputs of the same shape."""
    columns = RUN_KEYS + ["k", "pass_at_k_base", "pass_at_k_plus", "gap"]
    base = {tuple(e["run"][key] for key in RUN_KEYS): e for e in map(_read, base_paths)}
    rows = []
    for plus in map(_read, plus_paths):
        run = tuple(plus["run"][key] for key in RUN_KEYS)
        if run not in base:
            raise ValueError(f"held-out evaluation of {dict(zip(RUN_KEYS, run))} has no base evaluation")
        for k, value in plus["pass_at_k"].items():
            base_value = base[run]["pass_at_k"][k]
            rows.append({**dict(zip(RUN_KEYS, run)), "k": int(k), "pass_at_k_base": base_value,
                         "pass_at_k_plus": value, "gap": base_value - value})  # fmt: skip
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values(RUN_KEYS[:3] + ["split", "seed", "k"]).reset_index(drop=True)


def plus_test_manifests(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per data set and split: how many problems got how many held-out tests, and the
    false-positive floor (the share of alternative correct solutions failing one) before and after
    the alternatives' filter."""
    rows = []
    for path in paths:
        path = Path(path)
        manifest = json.loads(path.read_text(encoding="utf-8"))
        # results/data/{dataset}/{plus}/{split}.manifest.json (execrl.run_paths)
        dataset, split = readable(path.parent.parent.name), path.name.split(".")[0]
        rows.append({"dataset": dataset, "split": split, **{k: manifest[k] for k in
                     ("problems", "problems_with_plus_tests", "plus_tests")},
                     "tests_per_problem": json.dumps(manifest["tests_per_problem"]),
                     "skipped": json.dumps(manifest["skipped"]),
                     # Manifests made before the alternatives' check have no floor (NaN).
                     **{k: manifest.get(k) for k in ("alternatives_checked", "false_positive_floor_before",
                                                     "false_positive_floor_after")}})  # fmt: skip
    return pd.DataFrame(rows)
