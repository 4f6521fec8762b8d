"""Held-out tests from the reference: shapes, mutation, expected values from the sandbox, and the
hard-coding program they catch."""

from __future__ import annotations

import ast
import json
import os
import random
import sys
from pathlib import Path

import pytest

from execrl.datasets import builtin
from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.plus_tests import PlusTestSettings, call_shape, make_plus_tests, mutate, mutated_inputs

MBPP_DIR = Path(os.environ.get("EXECRL_MBPP_DIR", "/work/shared/data/mbpp"))
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=2, memory_mb=512)) as ex:
        yield ex


def hard_coded(problem: Problem) -> str:
    """A program that answers the visible tests from a table and nothing else."""
    shape = call_shape(problem)
    expected = [ast.literal_eval(ast.parse(t).body[0].test.comparators[0]) for t in problem.tests]
    table = {repr(args): value for args, value in zip(shape.calls, expected)}
    return f"def {shape.entry_point}(*args):\n    return {table!r}.get(repr(args))\n"


def test_call_shape_reads_mbpp_style_asserts_and_refuses_others():
    plain = Problem(id="p", prompt="x", test_type="assert", tests=["assert f(1, [2]) == 3", "assert f(0, []) == 0"])
    assert call_shape(plain).entry_point == "f" and call_shape(plain).calls == ((1, [2]), (0, []))
    wrapped = Problem(id="p", prompt="x", test_type="assert", tests=["assert set(f(1)) == {1}"])
    assert isinstance(call_shape(wrapped), str)
    two = Problem(id="p", prompt="x", test_type="assert", tests=["assert f(1) == 1", "assert g(1) == 1"])
    assert call_shape(two) == "tests call 2 different functions"
    stdio = Problem(id="p", prompt="x", test_type="stdio", tests=[{"input": "1", "output": "1"}])
    assert isinstance(call_shape(stdio), str)
    call = Problem(id="p", prompt="x", test_type="call", entry_point="h", tests=[{"args": [1, "a"], "expected": 2}])
    assert call_shape(call).calls == ((1, "a"),)


def test_mutation_keeps_types_and_bounds_and_is_seeded():
    settings = PlusTestSettings(max_collection_size=6, max_abs_int=50)
    value = ([1, 2, 3], "abc", {"k": 1.5}, (True, None), {4, 5})
    for seed in range(200):
        new = mutate(value, random.Random(seed), settings)
        assert type(new) is tuple and len(new) <= 6
        for item in new:
            if isinstance(item, list):
                assert len(item) <= 6 and all(isinstance(x, int) and abs(x) <= 50 for x in item)
    first = [mutate(value, random.Random(7), settings) for _ in range(3)]
    assert first == [mutate(value, random.Random(7), settings) for _ in range(3)]
    shape = call_shape(Problem(id="p", prompt="x", test_type="assert", tests=["assert f([1, 2], 'ab') == 3"]))
    inputs = mutated_inputs(shape, PlusTestSettings(), random.Random(0))
    assert inputs and ([1, 2], "ab") not in inputs and len(set(map(repr, inputs))) == len(inputs)


@linux_only
def test_builtin_problems_get_plus_tests_the_reference_passes_and_hard_coding_fails(executor):
    problems = builtin.generate("test", seed=0, n=12)
    settings = PlusTestSettings(tests_per_problem=5)
    out, report = make_plus_tests(problems, executor, settings)
    counts = report.to_dict(len(problems))
    assert counts["problems_with_plus_tests"] >= 10, counts
    for problem in out:
        assert all(t not in problem.tests for t in problem.plus_tests)
        assert len(problem.plus_tests) <= 5
    with_plus = [p for p in out if p.plus_tests]
    base = executor.run_batch([(p, hard_coded(p)) for p in with_plus])
    plus = executor.run_batch([(Problem(**{**p.to_dict(), "tests": p.plus_tests, "plus_tests": []}), hard_coded(p))
                               for p in with_plus])
    reference = executor.run_batch([(Problem(**{**p.to_dict(), "tests": p.plus_tests, "plus_tests": []}), p.reference)
                                    for p in with_plus])
    assert all(r.status == "pass" for r in base), "the table answers every visible test"
    assert all(r.status == "pass" for r in reference), "the reference passes its held-out tests"
    assert sum(r.status != "pass" for r in plus) == len(with_plus), "hard-coding fails the held-out tests"
    again, _ = make_plus_tests(problems, executor, settings)
    assert [p.plus_tests for p in again] == [p.plus_tests for p in out], "same seed, same tests"
    other, _ = make_plus_tests(problems, executor, PlusTestSettings(tests_per_problem=5, seed=1))
    assert [p.plus_tests for p in other] != [p.plus_tests for p in out]


@linux_only
def test_unusable_references_keep_no_tests(executor):
    tests = ["assert f(3) == 3", "assert f(5) == 5"]
    random_reference = Problem(id="r", prompt="x", test_type="assert", tests=tests,
                               reference="import random\ndef f(x):\n    return x + random.random()\n")
    hangs = Problem(id="h", prompt="x", test_type="assert", tests=tests,
                    reference="def f(x):\n    while x not in (3, 5):\n        pass\n    return x\n")
    none = Problem(id="n", prompt="x", test_type="assert", tests=tests)
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=0.3, memory_mb=512)) as quick:
        out, report = make_plus_tests([random_reference, hangs, none], quick, PlusTestSettings(tests_per_problem=2))
    assert [p.plus_tests for p in out] == [[], [], []]
    assert report.skipped == {"no reference solution": 1}
    assert report.tests_per_problem[0] == 2


@linux_only
@pytest.mark.skipif(not (MBPP_DIR / "mbpp.jsonl").exists(), reason="MBPP data not available")
def test_mbpp_problems_get_plus_tests(executor):
    rows = [json.loads(line) for line in (MBPP_DIR / "mbpp.jsonl").read_text().splitlines()[:20]]
    problems = [Problem(id=f"mbpp/{r['task_id']}", prompt=r["text"], test_type="assert", tests=r["test_list"],
                        setup_code=r["test_setup_code"], reference=r["code"]) for r in rows]
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=0.5, memory_mb=512)) as quick:
        out, report = make_plus_tests(problems, quick, PlusTestSettings(tests_per_problem=4))
    counts = report.to_dict(len(problems))
    assert counts["problems_with_plus_tests"] >= 15, counts
    record = next(p for p in out if p.plus_tests).to_dict()
    assert Problem.from_dict(json.loads(json.dumps(record))).plus_tests == record["plus_tests"]
