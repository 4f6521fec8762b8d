"""What a worker receives for a problem, and what stays with the executor.

In ``assert`` and ``call`` mode the worker's judge process gets the whole test (setup code,
test statements, call arguments and expected values): it runs the tests itself, and the
program's process only ever receives what the tests pass to the program's functions
(``_judge_loop``). Nothing about a test is sent to a run. In ``stdio`` mode each run gets
its test's input; expected outputs stay here and are compared by ``judge.py``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from execrl.problems import Problem


@dataclass
class Prepared:
    key: str
    test_type: str
    child_spec: dict[str, Any]
    """Sent to the worker once per problem (its controller and judge process keep it)."""
    tests: list[Any]
    """What the executor keeps for messages: test sources, (args, expected), (input, output)."""
    entry_point: str | None = None

    @property
    def n_tests(self) -> int:
        return len(self.tests)


def problem_key(problem: Problem) -> str:
    payload = json.dumps([problem.test_type, problem.tests, problem.setup_code, problem.entry_point],
                         sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def prepare(problem: Problem) -> Prepared:
    """What the workers get for ``problem`` and what the executor keeps. Raises (``ValueError``,
    ``TypeError``) for tests the worker could not receive: a value JSON cannot hold (a set, bytes),
    a stdio input that is not text; the executor makes that each candidate's ``PrepareError``."""
    prepared = _prepare(problem)
    json.dumps(prepared.child_spec, ensure_ascii=False).encode("utf-8", "surrogatepass")  # as the worker gets it
    if prepared.test_type == "stdio":
        for i, (given, _) in enumerate(prepared.tests):  # text: `Problem` checks it
            try:
                given.encode("utf-8", "surrogateescape")  # as the run's stdin is written
            except UnicodeEncodeError as e:
                raise ValueError(f"test {i}: the input is not text ({e.reason} at {e.start})") from None
    return prepared


def _prepare(problem: Problem) -> Prepared:
    key = problem_key(problem)
    if problem.test_type == "assert":
        spec = {"mode": "assert", "tests": list(problem.tests), "setup": problem.setup_code or None}
        return Prepared(key, "assert", spec, list(problem.tests))
    if problem.test_type == "call":
        tests = [{"args": t["args"], "expected": t["expected"]} for t in problem.tests]
        spec = {"mode": "call", "entry_point": problem.entry_point, "tests": tests}
        return Prepared(key, "call", spec, [(t["args"], t["expected"]) for t in tests], problem.entry_point)
    if problem.test_type == "stdio":
        spec = {"mode": "stdio", "inputs": [t["input"] for t in problem.tests]}
        return Prepared(key, "stdio", spec, [(t["input"], t["output"]) for t in problem.tests])
    raise ValueError(f"unknown test_type {problem.test_type!r}")
