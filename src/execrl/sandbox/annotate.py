"""Annotate candidate records with the executor's verdicts."""

from __future__ import annotations

import json
from typing import Any

from execrl.problems import Problem


def annotate_candidates(problems: dict[str, Problem], candidates: list[dict[str, Any]], executor: Any,
                        progress: bool = False) -> list[dict[str, Any]]:
    """Return each candidate record merged with its result (``ExecutionResult.to_dict``).

    ``problems`` maps ``Problem.id`` to the problem; each candidate needs ``problem_id`` and
    ``code`` (``docs/formats.md``). Order is preserved.
    """
    items = []
    for k, cand in enumerate(candidates):
        pid = cand.get("problem_id")
        if pid not in problems:
            raise KeyError(f"candidate {k}: unknown problem_id {pid!r}")
        code = cand.get("code")
        items.append((problems[pid], code if isinstance(code, str) else ""))
    results = executor.run_batch(items, progress=progress)
    return [_writable({**cand, **res.to_dict()}) for cand, res in zip(candidates, results)]


def _writable(record: dict[str, Any]) -> dict[str, Any]:
    """The record, with lone surrogates escaped wherever a string holds one (a candidate's
    own fields may, e.g. code read from JSON with ``"\\ud800"``): one bad candidate must
    not make the annotations file unwritable."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
        return record
    except UnicodeEncodeError:
        return _escape(record)


def _escape(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escape(k): _escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape(v) for v in value]
    return value
