"""Annotate candidate records with the executor's verdicts."""

from __future__ import annotations

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
    return [{**cand, **res.to_dict()} for cand, res in zip(candidates, results)]
