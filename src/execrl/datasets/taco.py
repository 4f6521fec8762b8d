"""TACO-style competitive-programming problems (hub ``likaixin/TACO-verified`` or local files).

Rows carry ``question``, ``solutions`` (a JSON string holding a list of programs, or a list),
``input_output`` (a JSON string, or an object, with ``inputs``, ``outputs`` and optionally
``fn_name``), ``starter_code``, ``difficulty`` and descriptive fields.

- With ``fn_name`` the problem is call-based (``test_type="call"``): ``args`` is each input list
  and ``expected`` the matching output. TACO wraps call outputs in a one-element list
  (``"outputs": [[3], [7]]``) and its checker accepts either the list or its single element.
  Here the wrapping is removed only when *every* output of the problem is a one-element list;
  otherwise outputs are kept as they are. ``metadata["outputs_unwrapped"]`` records which.
- Without it the problem reads stdin (``test_type="stdio"``): inputs and outputs are strings,
  or lists of lines joined with ``"\\n"``.

Splits: the hub has only ``train``. ``train`` / ``test`` here are a deterministic hashed holdout
of the source rows: a row is in ``test`` when ``sha256(f"{seed}\\n{question.strip()}")``, read as
a fraction of 2**64 from its first 8 bytes, is below ``test_fraction``. The split depends only on
the question text, the seed and the fraction, so it is stable under reordering and duplicates
of a question never straddle the two splits.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from execrl.datasets._common import (
    Collector,
    DatasetError,
    LoadResult,
    RawSource,
    RowError,
    as_text,
    check_int,
    check_optional_str,
    is_saved_dataset,
    looks_like_hub_id,
    path_digest,
    read_hub,
    read_local_file,
    read_saved_dataset,
)
from execrl.jsonl import json_error_text
from execrl.problems import Problem

HUB_ID = "likaixin/TACO-verified"
SUBSETS = ()
SPLITS = ("train", "test")
DIFFICULTIES = ("EASY", "MEDIUM", "MEDIUM_HARD", "HARD", "VERY_HARD", "UNKNOWN_DIFFICULTY")
_METADATA_FIELDS = ("difficulty", "source", "name", "url", "tags", "skill_types", "time_limit", "memory_limit")


def _check_fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise DatasetError(f"option 'test_fraction' must be a number in [0, 1], got {value!r}")
    return float(value)


def _check_difficulties(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"option 'difficulties' must be a non-empty list of strings or null, got {value!r}")
    upper = [v.upper() for v in value]
    unknown = sorted(set(upper) - set(DIFFICULTIES))
    if unknown:
        raise DatasetError(f"option 'difficulties': unknown {unknown} (known: {', '.join(DIFFICULTIES)})")
    return upper


def _check_source_split(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise DatasetError(f"option 'source_split' must be a non-empty string, got {value!r}")
    return value


OPTIONS = {
    "test_fraction": (0.1, _check_fraction),
    "seed": (0, check_int("seed")),
    # Keep only these TACO difficulty labels (null keeps all).
    "difficulties": (None, _check_difficulties),
    # The split of the hub dataset / saved DatasetDict to read before the holdout.
    "source_split": ("train", _check_source_split),
    "revision": (None, check_optional_str("revision")),
}


def load(*, split: str, source: str | None, subset: str | None, options: dict, on_malformed: str) -> LoadResult:
    raw = _read_source(source, options)
    collector = Collector(raw.origin, on_malformed)
    n_in_split = 0
    n_filtered = 0
    for index, row in enumerate(raw.rows):
        if row.error is not None:
            collector.malformed(row.label, row.error)
            continue
        data = row.data
        try:
            if not isinstance(data, dict):
                raise RowError(f"row is not an object (got {type(data).__name__})")
            question = as_text(data.get("question"), "question")
        except RowError as error:
            collector.malformed(row.label, str(error), error)
            continue
        if split_of(question, options["seed"], options["test_fraction"]) != split:
            continue
        n_in_split += 1
        wanted = options["difficulties"]
        if wanted is not None and str(data.get("difficulty", "")).upper() not in wanted:
            n_filtered += 1
            continue
        problem_key = _problem_key(data, index)
        collector.add(
            f"{row.label} (taco/{problem_key})",
            lambda data=data, key=problem_key, index=index: convert_row(data, key, index),
        )
    return LoadResult(
        problems=collector.finished(),
        manifest={
            "source": source or HUB_ID,
            "source_path": None if raw.path is None else str(raw.path),
            "source_digest": raw.digest,
            "n_rows_read": len(raw.rows),
            "n_rows_in_split": n_in_split,
            "n_filtered_by_difficulty": n_filtered,
            "skipped": collector.skipped,
        },
    )


def split_of(question: str, seed: int, test_fraction: float) -> str:
    """``"test"`` or ``"train"`` for a question under the hashed holdout."""
    digest = hashlib.sha256(f"{seed}\n{question.strip()}".encode("utf-8")).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if fraction < test_fraction else "train"


def _read_source(source: str | None, options: dict) -> RawSource:
    if source is None:
        source = HUB_ID
    path = Path(source)
    if not path.exists():
        if looks_like_hub_id(source):
            split = options["source_split"]
            rows = read_hub(source, None, split, options["revision"])
            return RawSource(rows, origin=f"{source} ({split})")
        raise DatasetError(f"taco source {source!r} is neither an existing path nor a hub dataset id")
    if path.is_dir():
        if not is_saved_dataset(path):
            raise DatasetError(f"{path}: a folder source must be written by datasets' save_to_disk")
        rows, from_dict = read_saved_dataset(path, options["source_split"])
        origin = f"{path} ({options['source_split']})" if from_dict else str(path)
        return RawSource(rows, origin=origin, path=path, digest=path_digest(path))
    return RawSource(read_local_file(path), origin=str(path), path=path, digest=path_digest(path))


def _problem_key(data: dict[str, Any], index: int) -> str:
    value = data.get("id")
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        return str(index)
    return str(value)


def _json_field(value: Any, name: str, kind: type) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as error:  # a syntax error, a long integer, deep nesting
            raise RowError(f"{name} is not valid JSON ({json_error_text(error)})") from error
    if not isinstance(value, kind):
        raise RowError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _as_stdio_text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise RowError(f"{what} must be a string or a list of strings, got {type(value).__name__}")


def convert_row(data: dict[str, Any], key: str, index: int) -> Problem:
    """One TACO row as a normalized Problem (``call`` with ``fn_name``, else ``stdio``)."""
    question = as_text(data.get("question"), "question").strip()
    io = _json_field(data.get("input_output"), "input_output", dict)
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise RowError("input_output needs 'inputs' and 'outputs' lists")
    if not inputs:
        raise RowError("input_output has no tests")
    if len(inputs) != len(outputs):
        raise RowError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")

    starter = data.get("starter_code") or ""
    if not isinstance(starter, str):
        raise RowError(f"starter_code must be a string, got {type(starter).__name__}")
    prompt = question
    if starter.strip():
        prompt = f"{question}\n\n{starter.rstrip()}"

    solutions = data.get("solutions")
    solutions = [] if solutions in (None, "") else _json_field(solutions, "solutions", list)
    reference = next((s for s in solutions if isinstance(s, str) and s.strip()), None)

    metadata: dict[str, Any] = {"row": index}
    if "id" in data:
        metadata["taco_id"] = data["id"]
    for name in _METADATA_FIELDS:
        if data.get(name) not in (None, ""):
            metadata[name] = _jsonable(data[name])
    metadata["n_solutions"] = len(solutions)

    fn_name = io.get("fn_name")
    if fn_name:
        if not isinstance(fn_name, str) or not fn_name.isidentifier():
            raise RowError(f"fn_name must be an identifier, got {fn_name!r}")
        unwrap = all(isinstance(o, list) and len(o) == 1 for o in outputs)
        tests = [
            {"args": inp if isinstance(inp, list) else [inp], "expected": out[0] if unwrap else out}
            for inp, out in zip(inputs, outputs)
        ]
        metadata["outputs_unwrapped"] = unwrap
        return Problem(
            id=f"taco/{key}",
            prompt=prompt,
            test_type="call",
            tests=tests,
            entry_point=fn_name,
            reference=reference,
            metadata=metadata,
        )
    tests = [
        {"input": _as_stdio_text(inp, f"input {i}"), "output": _as_stdio_text(out, f"output {i}")}
        for i, (inp, out) in enumerate(zip(inputs, outputs))
    ]
    return Problem(
        id=f"taco/{key}",
        prompt=prompt,
        test_type="stdio",
        tests=tests,
        reference=reference,
        metadata=metadata,
    )


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
