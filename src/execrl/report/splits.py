"""What the evaluated split shares with the splits training learned from. For the builtin suite,
from its manifests: no task (by construction) and, often, a program shape (a template with other
constants). For every other adapter, from the prepared problems: problems sharing an id or a
prompt with another split the experiment prepares (a user's JSONL with a problem copied into two
files, say). And which rows of a prepared split were left out as malformed (`on_malformed: skip`)."""

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


def shared_problem_rows(problem_paths: Iterable[str | Path], eval_splits: Iterable[str],
                        covered: Iterable[str] = ()) -> list[dict]:
    """One row per dataset (other than those in `covered`, already described by their manifests)
    and evaluated split: how many of its problems share an id, or a prompt (whitespace stripped),
    with each other split prepared for the experiment (`results/data/{dataset}/{split}.jsonl`)."""
    from execrl.jsonl import read_jsonl

    by_dataset: dict[str, dict[str, list[dict]]] = {}
    for path in problem_paths:
        path = Path(path)
        by_dataset.setdefault(readable(path.parent.name), {})[path.stem] = read_jsonl(path)
    covered = set(covered)
    rows = []
    for dataset, problems in sorted(by_dataset.items()):
        if dataset in covered:
            continue
        for split in [s for s in eval_splits if s in problems]:
            others = sorted(s for s in problems if s != split)
            if not others:
                continue
            other_ids = {row["id"] for s in others for row in problems[s]}
            other_prompts = {row["prompt"].strip() for s in others for row in problems[s]}
            mine = problems[split]
            by_id = [row["id"] for row in mine if row["id"] in other_ids]
            by_prompt = [row["id"] for row in mine if row["prompt"].strip() in other_prompts]
            rows.append({
                "kind": "shared_problems", "dataset": dataset, "split": split, "problems": len(mine),
                "other_splits": others, "sharing_an_id": len(by_id), "sharing_a_prompt": len(by_prompt),
                "examples": list(dict.fromkeys(by_id + by_prompt))[:3],
            })
    return rows


def sentence(row: dict, quote=str) -> str:
    """The report's line for one row; `quote` writes a problem id (the data set's text)."""
    if row.get("kind") == "shared_problems":
        others = " or ".join(row["other_splits"])
        head = f"{row['dataset']} {row['split']} split: {row['problems']} problems; "
        if not row["sharing_an_id"] and not row["sharing_a_prompt"]:
            return head + f"none shares an id or a prompt with the {others} split."
        return head + (
            f"{row['sharing_an_id']} share an id and {row['sharing_a_prompt']} a prompt with the {others} split "
            f"(e.g. {', '.join(map(quote, row['examples']))}): where that split is trained on, they measure problems training saw."
        )
    share = row["share_sharing_a_shape"]
    only = row["templates_only_here"]
    return (
        f"{row['dataset']} {row['split']} split: {row['problems']} problems of {row['tasks']} tasks; "
        f"{row['sharing_a_task']} of them a task of the {' or '.join(row['other_splits'])} split. "
        f"{row['sharing_a_shape']} ({share:.0%}) share a program shape with the {' or '.join(row['other_splits'])} "
        "split (the same template, "
        f"other constants): what they measure is transfer to new constants of seen shapes"
        + (f"; templates found only here: {', '.join(only)}." if only else "; no template is found only here.")
    )


def skipped_rows(manifest_paths: Iterable[str | Path], examples: int = 3) -> list[dict]:
    """One row per prepared split whose data set left malformed rows out (`on_malformed: skip`),
    from its manifest (`results/data/{dataset}/{split}.manifest.json`): how many, of how many
    problems kept, and the first `examples` with the reason each was left out."""
    rows = []
    for path in manifest_paths:
        path = Path(path)
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not manifest.get("n_skipped"):
            continue
        rows.append({
            "dataset": readable(path.parent.name),
            "split": path.name.split(".")[0],
            "problems": manifest["n_problems"],
            "skipped": manifest["n_skipped"],
            "examples": manifest["skipped"][:examples],
        })
    return rows


def skipped_sentence(row: dict, quote=str) -> str:
    """The report's line for one split that left malformed rows out; `quote` writes a row's label
    and message (they quote the data set's text)."""
    shown = "; ".join(f"{quote(example['row'])}: {quote(example['error'])}" for example in row["examples"])
    more = f"; and {row['skipped'] - len(row['examples'])} more" if row["skipped"] > len(row["examples"]) else ""
    return (
        f"{row['dataset']} {row['split']} split: {row['skipped']} malformed row(s) left out (on_malformed: skip), "
        f"{row['problems']} problems kept ({shown}{more}); the manifest lists every one."
    )
