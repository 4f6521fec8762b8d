"""Refinement examples in the report: how often a model's refinements (c2) pass where the first
attempt (c1) failed, read from the records `execrl.evaluation.refinement_samples` wrote."""

from __future__ import annotations

import pandas as pd

from execrl.sandbox.result import counted_tests_passed


HEADINGS = {"c2_samples": "c2 samples", "c2_pass_rate": "c2 pass rate, re-sampled", "prompts_fixed": "prompts with a passing c2",
            "c2_tests_passed_fraction": "c2 tests passed"}  # fmt: skip
"""The report's column headings of the refinement rates (the summary keeps the keys)."""


def refinement_summary(records: list[dict], run: dict) -> dict:
    """How often c2 passes where c1 failed: per sample and per prompt (any c2 passes)."""
    samples = [c2 for record in records for c2 in record["c2"]]
    return {
        **run,
        "prompts": len(records),
        "c2_samples": len(samples),
        "c2_pass_rate": sum(c2["status"] == "pass" for c2 in samples) / len(samples) if samples else float("nan"),
        "prompts_fixed": sum(any(c2["status"] == "pass" for c2 in record["c2"]) for record in records),
        "c2_tests_passed_fraction": (
            sum(counted_tests_passed(c2) / max(c2["tests_total"], 1) for c2 in samples) / len(samples) if samples else float("nan")
        ),
    }


def summary_table(runs: list[tuple[dict, list[dict]]]) -> pd.DataFrame:
    """One row per (dataset, model, method, seed) that sampled refinements."""
    columns = ["dataset", "model", "method", "seed", "prompts", "c2_samples", "c2_pass_rate", "prompts_fixed", "c2_tests_passed_fraction"]
    return pd.DataFrame([refinement_summary(records, run) for run, records in runs], columns=columns)
