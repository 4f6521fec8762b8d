"""Alternative correct solutions of a data set's problems: what held-out tests must not accuse.

A held-out test records what the reference returns on a mutated input, also where the input lies
outside the task's domain and any answer would do. Another solution of the same task that passes
the visible tests is correct as far as the task says; an input on which it and the reference
disagree is not a fair test (``execrl.watch.plus_tests`` drops it), and the share of such
solutions that a held-out test fails is the watch's false-positive floor.

Where a data set has them:

- ``mbpp``: the two upstream files are two solutions of each task: ``mbpp.jsonl`` (``full``) and
  the hand-checked ``sanitized-mbpp.json`` (``sanitized``, 427 of the 974 tasks). A problem of
  one subset gets the other's code for the same task id, where it differs.
- ``builtin``: the reference with its arguments and local names renamed and the code
  reformatted. That is equivalent by construction, so it can only show an input whose output
  depends on more than the program's meaning (object ids, hashing); it is no check of the
  task's domain.
- any other adapter: none (the floor is not measured there; the manifest says 0 checked).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

from execrl.problems import Problem

OTHER_SUBSET = {"mbpp": {None: "sanitized", "full": "sanitized", "sanitized": "full"}}
"""For each adapter with two files of solutions, the subset whose code is the alternative."""


def renamed(reference: str, keep: Iterable[str] = ()) -> str:
    """`reference` with every argument and name it binds inside its functions renamed
    (``name`` → ``name_1``), reformatted by ``ast.unparse``; module-level names and `keep` stay."""
    tree = ast.parse(reference)
    keep = set(keep) | {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Assign):
            keep |= {n.id for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    bound = set()
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))):
        for node in ast.walk(function):
            if isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
    bound -= keep
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | bound | keep
    new: dict[str, str] = {}
    for name in sorted(bound):
        suffix = 1
        while f"{name}_{suffix}" in taken:
            suffix += 1
        new[name] = f"{name}_{suffix}"
        taken.add(new[name])
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg in new:
            node.arg = new[node.arg]
        elif isinstance(node, ast.Name) and node.id in new:
            node.id = new[node.id]
    return ast.unparse(tree) + "\n"


def alternative_solutions(
    adapter: str,
    problems: list[Problem],
    *,
    split: str,
    source: str | None = None,
    subset: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, list[str]]:
    """Problem id → alternative solutions, for the problems of one split of a data set."""
    if adapter == "builtin":
        return {p.id: [renamed(p.reference, [p.entry_point or ""])] for p in problems if p.reference}
    other = OTHER_SUBSET.get(adapter, {}).get(subset)
    if other is None:
        return {}
    from execrl.datasets import load_split

    wanted = {p.id: p for p in problems}
    loaded = load_split(adapter, split, source=source, subset=other, options=options, on_malformed="skip")
    return {p.id: [p.reference] for p in loaded.problems if p.id in wanted and p.reference}
