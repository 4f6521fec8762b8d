"""The normalized problem format every dataset adapter produces.

One JSON object per line (see ``docs/formats.md``)::

    {"id": "mbpp/11", "prompt": "...", "test_type": "assert",
     "tests": ["assert f(1) == 2", ...], "entry_point": "f",
     "setup_code": "", "reference": "def f(x): ...", "metadata": {...}}

``test_type`` decides the shape of ``tests``:

- ``assert``: a list of Python statements, each counted as one test;
- ``stdio``: a list of ``{"input": str, "output": str}``; the program reads stdin;
- ``call``: a list of ``{"args": [...], "expected": value}``; ``entry_point`` names the
  function (a method of a ``Solution`` class when the program defines one).
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from execrl.jsonl import write_jsonl

TEST_TYPES = ("assert", "stdio", "call")


class MalformedProblemError(ValueError):
    """A problem record that cannot be used; the message names its file and row."""


@dataclass
class Problem:
    id: str
    prompt: str
    test_type: str
    tests: list[Any]
    entry_point: str | None = None
    setup_code: str = ""
    reference: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    plus_tests: list[Any] = field(default_factory=list)
    """Held-out tests of the same shape as ``tests``, made from the reference
    (``execrl.watch.plus_tests``); never shown in a prompt, never run by a reward unless the
    config says so."""

    def __post_init__(self) -> None:
        problems = validation_errors(self)
        if problems:
            raise MalformedProblemError(f"problem {_shown(self.id)}: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        if not record["plus_tests"]:
            del record["plus_tests"]  # problems files without held-out tests keep their shape
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Problem:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(record) - known
        if unknown:
            raise MalformedProblemError(f"unknown field(s) {sorted(unknown)}")
        missing = {"id", "prompt", "test_type", "tests"} - set(record)
        if missing:
            raise MalformedProblemError(f"missing field(s) {sorted(missing)}")
        return cls(**record)


def validation_errors(problem: Problem) -> list[str]:
    errors = []
    if not isinstance(problem.id, str) or not problem.id:
        errors.append("id must be a non-empty string")
    if not isinstance(problem.prompt, str) or not problem.prompt.strip():
        errors.append("prompt must be a non-empty string")
    if problem.test_type not in TEST_TYPES:
        errors.append(f"test_type must be one of {TEST_TYPES}, got {problem.test_type!r}")
    if not isinstance(problem.tests, list) or not problem.tests:
        errors.append("tests must be a non-empty list")
        return errors
    if problem.test_type == "assert":
        if not all(isinstance(t, str) and t.strip() for t in problem.tests):
            errors.append("assert tests must be non-empty strings")
    elif problem.test_type == "stdio":
        for i, t in enumerate(problem.tests):
            if not (isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str)):
                errors.append(f"stdio test {i} must be {{'input': str, 'output': str}}")
                break
    elif problem.test_type == "call":
        if not problem.entry_point:
            errors.append("call tests need entry_point (the function name)")
        for i, t in enumerate(problem.tests):
            if not (isinstance(t, dict) and isinstance(t.get("args"), list) and "expected" in t):
                errors.append(f"call test {i} must be {{'args': list, 'expected': value}}")
                break
    if not isinstance(problem.plus_tests, list):
        errors.append("plus_tests must be a list")
    elif problem.plus_tests:
        shadow = Problem.__new__(Problem)
        shadow.__dict__.update(problem.__dict__, tests=problem.plus_tests, plus_tests=[])
        errors.extend(f"plus_tests: {e}" for e in validation_errors(shadow) if "tests" in e)
    if not isinstance(problem.setup_code, str):
        errors.append("setup_code must be a string")
    for name in ("entry_point", "reference"):
        value = getattr(problem, name)
        if value is not None and not isinstance(value, str):
            errors.append(f"{name} must be a string or null, got {_shown(value)}")
    if not isinstance(problem.metadata, dict):
        errors.append(f"metadata must be an object, got {_shown(problem.metadata)}")
    return errors


def _shown(value: Any) -> str:
    """A value in a message, cut short (`reprlib`: long strings, long containers and deep ones
    abbreviated with `...`): a malformed row's field can be megabytes."""
    return _SHORT_REPR.repr(value)


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = _SHORT_REPR.maxlong = 80


def uncompilable_test(problem: Problem) -> str | None:
    """Why one of `problem`'s assert tests does not compile, or None. Such a test fails every
    candidate, so the problem could never be solved. Checked where data sets are read, not in
    every Problem made (rewards and the watch make them per completion)."""
    if problem.test_type != "assert":
        return None
    for i, test in enumerate(problem.tests):
        try:
            compile(test, f"<test {i}>", "exec")
        except (SyntaxError, ValueError) as error:
            return f"assert test {i} is not valid Python ({getattr(error, 'msg', error)})"
        except (MemoryError, RecursionError):  # CPython's parser on deep nesting (`not not ... x`)
            return f"assert test {i} is nested too deeply to compile"
    return None


MAX_NESTING = 300
"""The deepest a problem's values nest (the sandbox's limit for values it sends, too): deeper ones
cannot be written (`dataclasses.asdict` and `json.dumps` recurse) nor sent to a run."""


def unwritable_field(problem: Problem) -> str | None:
    """Why a field of `problem` cannot be written to the problems file, or None: a string UTF-8
    cannot encode (a lone surrogate, which JSON's `\\ud800` escape makes; the file and every prompt
    are UTF-8), or values nested deeper than `MAX_NESTING`."""
    stack = [(name, getattr(problem, name), 0) for name in reversed(Problem.__dataclass_fields__)]
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                return f"{where} holds a character UTF-8 cannot encode ({value[error.start]!r} at {error.start})"
        elif isinstance(value, (dict, list, tuple)):
            if depth >= MAX_NESTING:
                return f"{where} nests deeper than {MAX_NESTING} levels"
            # `where` stays the field's name: a test's list can hold many thousands of values
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            stack.extend((where, item, depth + 1) for item in reversed(items))
    return None


def read_problems(path: str | Path) -> list[Problem]:
    """Read a normalized problems JSONL; a bad row raises with the file and line."""
    return list(iter_problems(path))


def iter_problems(path: str | Path) -> Iterator[Problem]:
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield Problem.from_dict(json.loads(line))
            except (ValueError, TypeError, RecursionError) as error:
                raise MalformedProblemError(f"{path}:{line_number}: {str(error)[:400]}") from error


def write_problems(problems: Iterable[Problem], path: str | Path) -> int:
    return write_jsonl((problem.to_dict() for problem in problems), path)
