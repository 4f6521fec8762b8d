"""Shared machinery for the dataset adapters: errors, row reading, malformed-row policy."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.jsonl import json_error_text
from execrl.problems import Problem, uncompilable_test, unwritable_field

ON_MALFORMED = ("error", "skip")

# Marker files written by ``datasets.Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``.
DATASET_DICT_MARKER = "dataset_dict.json"
DATASET_MARKER = "state.json"

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_FILE_SUFFIXES = (".json", ".jsonl", ".parquet")


class DatasetError(ValueError):
    """A dataset cannot be loaded as asked: bad arguments, a missing source, or a malformed row."""


class RowError(ValueError):
    """One source row cannot be turned into a Problem (the reason, without the location)."""


@dataclass
class LoadResult:
    problems: list[Problem]
    manifest: dict[str, Any]


@dataclass
class RawRow:
    """One row of a source, with a human-readable location (``line 12`` or ``index 5``)."""

    label: str
    data: Any = None
    error: str | None = None  # set when the row could not even be parsed (bad JSON)


@dataclass
class RawSource:
    """Rows read from one source, plus what the manifest needs to say about it."""

    rows: list[RawRow]
    origin: str  # file path or hub id, used to prefix error messages
    path: Path | None = None  # the local file or folder actually read
    split_from_source: bool = False  # rows already belong to the requested split
    digest: str | None = None


LISTED_ROWS = 10
"""Malformed rows a DatasetError lists beyond the first (``Collector.finished``)."""
LABEL_CHARS, REASON_CHARS = 200, 400
"""The longest row label and reason a malformed row is recorded with (the rest cut, `...`)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Collector:
    """Turns rows into problems, applying the ``on_malformed`` policy."""

    origin: str
    on_malformed: str
    problems: list[Problem] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    _ids: set[str] = field(default_factory=set)
    _first_cause: BaseException | None = None

    def malformed(self, label: str, reason: str, cause: BaseException | None = None) -> None:
        if not self.skipped:
            self._first_cause = cause
        # a row's id and values are quoted: cut, since a field can be megabytes
        self.skipped.append({"row": _cut(label, LABEL_CHARS), "error": _cut(reason, REASON_CHARS)})

    def finished(self) -> list[Problem]:
        """The problems; with ``on_malformed="error"``, a DatasetError naming every malformed row
        (the first in full, up to ``LISTED_ROWS`` more), so that one run shows what to fix."""
        if self.on_malformed == "error" and self.skipped:
            first, *rest = self.skipped
            message = f"{self.origin}: {first['row']}: {first['error']}"
            if rest:
                listed = "; ".join(f"{row['row']}: {row['error']}" for row in rest[:LISTED_ROWS])
                more = f"; and {len(rest) - LISTED_ROWS} more" if len(rest) > LISTED_ROWS else ""
                message += f" (and {len(rest)} more malformed row(s): {listed}{more})"
            raise DatasetError(message) from self._first_cause
        return self.problems

    def add(self, label: str, convert: Callable[[], Problem]) -> None:
        try:
            problem = convert()
        except RowError as error:
            self.malformed(label, str(error), error)
        except Exception as error:  # noqa: BLE001 - any failure on untrusted row data
            self.malformed(label, f"{type(error).__name__}: {error}", error)
        else:
            if problem.id in self._ids:
                self.malformed(label, f"duplicate problem id {problem.id!r}")
                return
            if reason := uncompilable_test(problem) or unwritable_field(problem):
                self.malformed(label, f"problem {problem.id!r}: {reason}")
                return
            self._ids.add(problem.id)
            self.problems.append(problem)


# ---------------------------------------------------------------------------------- options


def check_int(name: str, minimum: int | None = None) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DatasetError(f"option {name!r} must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise DatasetError(f"option {name!r} must be >= {minimum}, got {value}")
        return value

    return check


def check_optional_str(name: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value is not None and not (isinstance(value, str) and value):
            raise DatasetError(f"option {name!r} must be a non-empty string or null, got {value!r}")
        return value

    return check


def resolve_options(
    adapter: str, spec: dict[str, tuple[Any, Callable[[Any], Any]]], options: dict | None
) -> dict[str, Any]:
    """Fill defaults and validate ``options`` against ``{name: (default, checker)}``."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise DatasetError(f"options for adapter {adapter!r} must be a mapping, got {type(options).__name__}")
    unknown = sorted(set(options) - set(spec))
    if unknown:
        allowed = ", ".join(sorted(spec)) or "none"
        raise DatasetError(f"unknown option(s) {unknown} for adapter {adapter!r} (allowed: {allowed})")
    resolved = {}
    for name, (default, check) in spec.items():
        resolved[name] = check(options[name]) if name in options else copy.deepcopy(default)
    return resolved


# ---------------------------------------------------------------------------------- sources


def looks_like_hub_id(source: str) -> bool:
    return bool(_HUB_ID.match(source)) and not source.endswith(_FILE_SUFFIXES)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def path_digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, sorted)."""
    if path.is_file():
        return file_digest(path)
    digest = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(child.relative_to(path).as_posix().encode() + b"\0")
        digest.update(file_digest(child).encode() + b"\n")
    return digest.hexdigest()


def is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and ((path / DATASET_DICT_MARKER).exists() or (path / DATASET_MARKER).exists())


def read_local_file(path: Path) -> list[RawRow]:
    """Rows of a JSONL, JSON array, or parquet file; unparseable JSONL lines become error rows."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        except Exception as error:  # noqa: BLE001
            raise DatasetError(f"{path}: cannot read parquet file ({error})") from error
        return [RawRow(f"index {i}", row) for i, row in enumerate(table.to_pylist())]
    if suffix not in (".json", ".jsonl"):
        raise DatasetError(f"{path}: unsupported file type {suffix!r} (expected .jsonl, .json or .parquet)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: cannot read ({error})") from error
    if suffix == ".json" and text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise DatasetError(f"{path}: not a valid JSON array ({json_error_text(error)})") from error
        return [RawRow(f"index {i}", record) for i, record in enumerate(records)]
    # JSON Lines (a .json file that is not an array is read as JSON Lines too).
    return json_lines_rows(text)


def json_lines_rows(text: str) -> list[RawRow]:
    """One row per non-blank line of JSON Lines text; a line that is not JSON is that row's error.
    Lines end at `\n` only (JSON Lines' separator): `str.splitlines` would also end them inside a
    string at U+2028 or U+0085, which JSON writers leave as they are."""
    rows = []
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(RawRow(f"line {line_number}", json.loads(line)))
        except (ValueError, RecursionError) as error:
            rows.append(RawRow(f"line {line_number}", error=f"not valid JSON ({json_error_text(error)})"))
    return rows


def read_saved_dataset(path: Path, split: str | None) -> tuple[list[RawRow], bool]:
    """Rows of a ``save_to_disk`` folder.

    For a saved ``DatasetDict`` the rows of ``split`` are returned with ``True`` (the folder
    already decides the split); for a saved single ``Dataset`` all rows with ``False``.
    """
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as error:  # noqa: BLE001
        raise DatasetError(f"{path}: cannot load saved dataset ({error})") from error
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DatasetError(f"{path}: saved DatasetDict has no split {split!r} (it has {sorted(loaded)})")
        return [RawRow(f"index {i}", row) for i, row in enumerate(loaded[split])], True
    return [RawRow(f"index {i}", row) for i, row in enumerate(loaded)], False


def read_hub(hub_id: str, config: str | None, split: str, revision: str | None) -> list[RawRow]:
    """Rows of one split of a Hugging Face hub dataset (needs network access to the hub)."""
    import datasets

    try:
        loaded = datasets.load_dataset(hub_id, config, split=split, revision=revision)
    except Exception as error:  # noqa: BLE001
        # A local folder that is not there reads like a hub id ("data/mbpp"): say how to write one.
        local_hint = (
            f"; a local folder is written as a path (./{hub_id} or an absolute path; nothing is at "
            f"{str(Path(hub_id).absolute())!r})"
        )
        raise DatasetError(
            f"cannot load {hub_id!r} (config {config!r}, split {split!r}) from the Hugging Face hub: {error}{local_hint}"
        ) from error
    return [RawRow(f"index {i}", row) for i, row in enumerate(loaded)]


def as_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"{what} must be a non-empty string, got {_short(value)}")
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
