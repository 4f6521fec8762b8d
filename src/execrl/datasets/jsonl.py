"""Problems already in the normalized format (``docs/formats.md``), one JSON object per line.

``source`` is a file (read as is; ``split`` only labels the manifest) or a folder, in which case
``{source}/{split}.jsonl`` is read. Every row is validated through :class:`Problem`.
"""

from __future__ import annotations

import re
from pathlib import Path

from execrl.datasets._common import Collector, DatasetError, LoadResult, RowError, path_digest, read_local_file
from execrl.problems import Problem

SUBSETS = ()
SPLITS = None  # any split name; for a folder it must name a file in it
OPTIONS: dict = {}

_SPLIT_NAME = re.compile(r"^[\w.-]+$")


def load(*, split: str, source: str | None, subset: str | None, options: dict, on_malformed: str) -> LoadResult:
    path = resolve_path(source, split)
    rows = read_local_file(path)
    collector = Collector(str(path), on_malformed)
    for row in rows:
        if row.error is not None:
            collector.malformed(row.label, row.error)
            continue
        collector.add(_labelled(row.label, row.data), lambda data=row.data: _to_problem(data))
    return LoadResult(
        problems=collector.finished(),
        manifest={
            "source_path": str(path),
            "source_digest": path_digest(path),
            "n_rows_read": len(rows),
            "n_rows_in_split": len(rows),
            "skipped": collector.skipped,
        },
    )


def resolve_path(source: str | None, split: str) -> Path:
    if not source:
        raise DatasetError("the jsonl adapter needs a source (a .jsonl file or a folder of {split}.jsonl files)")
    path = Path(source)
    if path.is_dir():
        if not _SPLIT_NAME.match(split):
            raise DatasetError(f"split {split!r} is not a valid file name")
        candidate = path / f"{split}.jsonl"
        if not candidate.is_file():
            available = sorted(p.stem for p in path.glob("*.jsonl"))
            raise DatasetError(f"{path}: no {split}.jsonl (splits here: {available})")
        return candidate
    if not path.is_file():
        raise DatasetError(f"jsonl source {source!r} does not exist")
    return path


def _labelled(label: str, data: object) -> str:
    """The row's place and, where it has one, its id: an error names the row the user wrote."""
    row_id = data.get("id") if isinstance(data, dict) else None
    return f"{label} (id {row_id!r})" if isinstance(row_id, str) and row_id else label


def _to_problem(data: object) -> Problem:
    if not isinstance(data, dict):
        raise RowError(f"row is not an object (got {type(data).__name__})")
    return Problem.from_dict(data)
