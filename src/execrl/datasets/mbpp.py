"""MBPP (Austin et al. 2021): hub dataset ``google-research-datasets/mbpp`` or local copies.

Sources:

- ``None`` or a hub id: ``datasets.load_dataset(hub_id, subset, split=split)`` (official splits);
- a folder written by ``DatasetDict.save_to_disk`` (its splits) or ``Dataset.save_to_disk``
  (split by task id);
- a folder holding the upstream files ``mbpp.jsonl`` / ``sanitized-mbpp.json`` (``subset``
  picks the file, default ``full``);
- one file: upstream ``mbpp.jsonl`` (full), ``sanitized-mbpp.json`` (sanitized), or a parquet /
  JSONL / JSON file with the hub's columns. The subset is read from the columns (``text`` =
  full, ``prompt`` = sanitized).

For everything but the hub and a saved ``DatasetDict``, the split comes from the task id with
the upstream ranges in :data:`SPLIT_RANGES`.
"""

from __future__ import annotations

import ast
import builtins
import warnings
from pathlib import Path
from typing import Any

from execrl.datasets._common import (
    Collector,
    DatasetError,
    LoadResult,
    RawSource,
    RowError,
    as_text,
    check_optional_str,
    is_saved_dataset,
    looks_like_hub_id,
    path_digest,
    read_hub,
    read_local_file,
    read_saved_dataset,
)
from execrl.problems import Problem

HUB_ID = "google-research-datasets/mbpp"
SUBSETS = ("full", "sanitized")
SPLITS = ("train", "test", "validation", "prompt")
# Inclusive task-id ranges (upstream README): full 374 / 500 / 90 / 10, sanitized 120 / 257 / 43 / 7.
SPLIT_RANGES = {
    "train": (601, 974),
    "test": (11, 510),
    "validation": (511, 600),
    "prompt": (1, 10),
}
UPSTREAM_FILES = {"full": "mbpp.jsonl", "sanitized": "sanitized-mbpp.json"}
OPTIONS = {
    # Hub revision (branch, tag or commit) to pin; only used for hub sources.
    "revision": (None, check_optional_str("revision")),
}


def load(*, split: str, source: str | None, subset: str | None, options: dict, on_malformed: str) -> LoadResult:
    raw = _read_source(split, source, subset, options)
    detected = _detect_subset(raw)
    if subset is not None and detected is not None and detected != subset:
        raise DatasetError(f"{raw.origin}: rows are in the {detected!r} layout, but subset {subset!r} was asked for")
    subset = subset or detected or "full"

    collector = Collector(raw.origin, on_malformed)
    low, high = SPLIT_RANGES[split]
    n_in_split = 0
    for row in raw.rows:
        if row.error is not None:
            collector.malformed(row.label, row.error)
            continue
        try:
            task_id = _task_id(row.data)
        except RowError as error:
            collector.malformed(row.label, str(error), error)
            continue
        if not raw.split_from_source and not low <= task_id <= high:
            continue
        n_in_split += 1
        collector.add(f"{row.label} (task_id {task_id})", lambda data=row.data, tid=task_id: convert_row(data, tid))

    return LoadResult(
        problems=collector.finished(),
        manifest={
            "source": source or HUB_ID,
            "subset": subset,
            "source_path": None if raw.path is None else str(raw.path),
            "source_digest": raw.digest,
            "n_rows_read": len(raw.rows),
            "n_rows_in_split": n_in_split,
            "skipped": collector.skipped,
        },
    )


def _read_source(split: str, source: str | None, subset: str | None, options: dict) -> RawSource:
    if source is None:
        source = HUB_ID
    path = Path(source)
    if not path.exists():
        if looks_like_hub_id(source):
            config = subset or "full"
            rows = read_hub(source, config, split, options["revision"])
            return RawSource(rows, origin=f"{source} ({config}/{split})", split_from_source=True)
        raise DatasetError(f"mbpp source {source!r} is neither an existing path nor a hub dataset id")
    if path.is_dir() and not is_saved_dataset(path):
        name = UPSTREAM_FILES[subset or "full"]
        if not (path / name).is_file():
            raise DatasetError(f"{path}: no {name} here (expected the upstream MBPP files or a save_to_disk folder)")
        path = path / name
    if is_saved_dataset(path):
        rows, split_from_source = read_saved_dataset(path, split)
        origin = f"{path} ({split})" if split_from_source else str(path)
        return RawSource(rows, origin=origin, path=path, split_from_source=split_from_source, digest=path_digest(path))
    return RawSource(read_local_file(path), origin=str(path), path=path, digest=path_digest(path))


def _detect_subset(raw: RawSource) -> str | None:
    for row in raw.rows:
        if isinstance(row.data, dict):
            if "text" in row.data:
                return "full"
            if "prompt" in row.data:
                return "sanitized"
    return None


def _task_id(row: Any) -> int:
    if not isinstance(row, dict):
        raise RowError(f"row is not an object (got {type(row).__name__})")
    task_id = row.get("task_id")
    if isinstance(task_id, str) and task_id.strip().isdigit():
        task_id = int(task_id)
    if isinstance(task_id, bool) or not isinstance(task_id, int):
        raise RowError(f"task_id must be an integer, got {task_id!r}")
    return task_id


def convert_row(row: dict[str, Any], task_id: int) -> Problem:
    """One MBPP row (full or sanitized layout) as a normalized Problem."""
    if "text" in row:
        text = as_text(row["text"], "text")
    elif "prompt" in row:
        text = as_text(row["prompt"], "prompt")
    else:
        raise RowError("no task description (neither 'text' nor 'prompt')")
    code = _normalize(as_text(row.get("code"), "code"))
    tests = row.get("test_list")
    if not isinstance(tests, list) or not tests:
        raise RowError(f"test_list must be a non-empty list, got {tests!r}")
    if not all(isinstance(t, str) and t.strip() for t in tests):
        raise RowError("test_list entries must be non-empty strings")
    tests = [_normalize(t).strip() for t in tests]

    setup_parts = []
    imports = row.get("test_imports") or []
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise RowError(f"test_imports must be a list of strings, got {imports!r}")
    setup_parts.extend(i.strip() for i in imports if i.strip())
    setup_code = row.get("test_setup_code") or ""
    if not isinstance(setup_code, str):
        raise RowError(f"test_setup_code must be a string, got {setup_code!r}")
    if setup_code.strip():
        setup_parts.append(_normalize(setup_code).strip())

    challenge = row.get("challenge_test_list") or []
    if not isinstance(challenge, list):
        raise RowError(f"challenge_test_list must be a list, got {challenge!r}")

    return Problem(
        id=f"mbpp/{task_id}",
        prompt=_normalize(text).strip(),
        test_type="assert",
        tests=tests,
        entry_point=entry_point(tests[0], code),
        setup_code="\n".join(setup_parts),
        reference=code,
        metadata={"task_id": task_id, "challenge_test_list": challenge},
    )


def entry_point(test: str, reference: str | None = None) -> str:
    """The function a test calls: the first called name the reference defines, else the first
    called name that is not a builtin (``assert set(f(x)) == ...`` gives ``f``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(test)
    except SyntaxError as error:
        raise RowError(f"first test is not valid Python ({error.msg})") from error
    called = _called_names(tree)
    if not called:
        raise RowError(f"first test calls no function: {test!r}")
    defined = set()
    if reference:
        try:
            with warnings.catch_warnings():  # e.g. invalid escape sequences in old regex strings
                warnings.simplefilter("ignore")
                body = ast.parse(reference).body
        except SyntaxError:
            body = []
        defined = {
            node.name for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
    for name in called:
        if name in defined:
            return name
    for name in called:
        if not hasattr(builtins, name):
            return name
    return called[0]


def _called_names(tree: ast.AST) -> list[str]:
    """Names of plain-name calls in source order (outer call before its arguments)."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.append(node.func.id)
            else:
                visit(node.func)
            for arg in node.args:
                visit(arg)
            for keyword in node.keywords:
                visit(keyword.value)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n")
