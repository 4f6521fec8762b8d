"""What the evaluated split shares with the splits training learned from, from the datasets'
manifests: for the builtin suite, no task (by construction) and, often, a program shape (a
template with other constants). Other adapters record nothing of the kind and get no row."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from execrl.run_paths import readable


def overlap_rows(manifest_paths: Iterable[str | Path]) -> list[dict]:
    """One row per manifest (`results/data/{dataset}/{split}.manifest.json`) that records its
    split's overlap with the others (the builtin adapter's `holdout`)."""
    rows = []
    for path in manifest_paths:
        path = Path(path)
        manifest = json.loads(path.read_text(encoding="utf-8"))
        holdout = manifest.get("holdout") or {}
        others = holdout.get("other_splits")
        if not others:
            continue
        n = manifest["n_problems"]
        shared_shape = holdout["n_sharing_template_with_other_splits"]
        rows.append({
            "dataset": readable(path.parent.name),
            "split": path.name.split(".")[0],
            "problems": n,
            "tasks": holdout["n_distinct_tasks"],
            "sharing_a_task": sum(counts["n_sharing_task"] for counts in others.values()),
            "sharing_a_shape": shared_shape,
            "share_sharing_a_shape": shared_shape / n if n else None,
            "other_splits": sorted(others),
            "templates_only_here": holdout.get("templates_only_here", []),
        })
    return rows


def sentence(row: dict) -> str:
    """The report's line for one row."""
    share = row["share_sharing_a_shape"]
    only = row["templates_only_here"]
    return (
        f"{row['dataset']} {row['split']} split: {row['problems']} problems of {row['tasks']} tasks; "
        f"{row['sharing_a_task']} of them a task of the {' or '.join(row['other_splits'])} split. "
        f"{row['sharing_a_shape']} ({share:.0%}) share a program shape with training (the same template, "
        f"other constants): what they measure is transfer to new constants of seen shapes"
        + (f"; templates found only here: {', '.join(only)}." if only else "; no template is found only here.")
    )
