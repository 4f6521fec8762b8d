"""Held-out tests from the reference: shapes, mutation, expected values from the sandbox, and the
hard-coding program they catch."""

from __future__ import annotations

import ast
import json
import random
import sys

import pytest

from execrl.datasets import builtin, load_split
from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.alternatives import alternative_solutions, renamed
from execrl.watch.plus_tests import (
    MARKER,
    REFERENCE_FAILS,
    PlusTestSettings,
    call_shape,
    expected_output,
    json_exact,
    make_plus_tests,
    mutate,
    mutated_inputs,
    read_alternatives,
    with_plus_tests,
    write_alternatives,
)

# The upstream MBPP files, beside the repository (never inside it).
from conftest import MBPP_DIR
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


def test_the_size_and_integer_bounds_cap_what_mutation_makes():
    """`plus_tests.max_collection_size` and `max_abs_int`: a list at 6 items and the integer 40 grow
    past 6 items and 50 under the defaults, and never under bounds of 6 and 50."""
    def outcomes(value, settings):
        return [mutate(value, random.Random(seed), settings) for seed in range(300)]

    lists = {size: max(map(len, outcomes(list(range(6)), PlusTestSettings(max_collection_size=size)))) for size in (6, 20)}
    assert lists == {6: 6, 20: 7}
    ints = {bound: max(map(abs, outcomes(40, PlusTestSettings(max_abs_int=bound)))) for bound in (50, 1000)}
    assert ints == {50: 50, 1000: 80}  # 40 doubled, cut at the bound


def test_candidates_per_test_sets_how_many_inputs_are_drawn():
    """`plus_tests.candidates_per_test`: inputs drawn per held-out test wanted (the spare ones cover
    references that fail, disagree or split correct solutions on some)."""
    shape = call_shape(Problem(id="p", prompt="x", test_type="assert", tests=["assert f([1, 2, 3], 7) == 3"]))
    counts = {n: len(mutated_inputs(shape, PlusTestSettings(tests_per_problem=4, candidates_per_test=n), random.Random(0)))
              for n in (1, 3)}
    assert counts == {1: 4, 3: 12}


def test_max_output_chars_drops_longer_expected_outputs():
    """`plus_tests.max_output_chars`: a reference's printed result longer than it keeps no test."""
    stdout = [MARKER + repr(list(range(30)))] * 2
    assert expected_output(stdout, PlusTestSettings()) == repr(list(range(30)))
    assert expected_output(stdout, PlusTestSettings(max_output_chars=50)) is None


@linux_only
def test_builtin_problems_get_plus_tests_the_reference_passes_and_hard_coding_fails(executor):
    problems = builtin.generate("test", seed=0, n=12)
    settings = PlusTestSettings(tests_per_problem=5)
    alternatives = alternative_solutions("builtin", problems, split="test")
    out, report = make_plus_tests(problems, executor, settings, alternatives=alternatives)
    counts = report.to_dict(len(problems))
    assert counts["problems_with_plus_tests"] >= 10, counts
    # Every renamed reference is correct, so each is checked, and none is accused.
    assert counts["alternatives_given"] == counts["alternatives_checked"] == 12, counts
    assert counts["false_positive_floor_before"] == counts["false_positive_floor_after"] == 0.0
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
@linux_only
def test_call_problems_get_only_tests_json_holds_as_they_are(executor):
    """A call problem's tests are JSON: a reference returning a set on some inputs (or a tuple) gives
    those inputs no held-out test, and the other problems still get theirs."""
    sets = Problem(id="s", prompt="x", test_type="call", entry_point="f",
                   reference="def f(x):\n    if x > 3:\n        return set(range(x - 3))\n    return [x]\n",
                   tests=[{"args": [3], "expected": [3]}, {"args": [2], "expected": [2]}])
    doubles = Problem(id="d", prompt="x", test_type="call", entry_point="g", reference="def g(x):\n    return x * 2\n",
                      tests=[{"args": [3], "expected": 6}])
    (out_sets, out_doubles), _ = make_plus_tests([sets, doubles], executor, PlusTestSettings(tests_per_problem=5))
    assert out_doubles.plus_tests and all(t["expected"] == 2 * t["args"][0] for t in out_doubles.plus_tests)
    assert all(json_exact(t) and t["expected"] == [t["args"][0]] for t in out_sets.plus_tests)
    assert json_exact({"a": [1, 2.5, None, True]}) and not json_exact((1,)) and not json_exact({1: 2})
    assert not json_exact({1}) and not json_exact(b"x") and not json_exact(float("nan"))


def test_unusable_references_keep_no_tests(executor):
    tests = ["assert f(3) == 3", "assert f(5) == 5"]
    random_reference = Problem(id="r", prompt="x", test_type="assert", tests=tests,
                               reference="import random\ndef f(x):\n    return x if x in (3, 5) else x + random.random()\n")
    hangs = Problem(id="h", prompt="x", test_type="assert", tests=tests,
                    reference="def f(x):\n    while x not in (3, 5):\n        pass\n    return x\n")
    none = Problem(id="n", prompt="x", test_type="assert", tests=tests)
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=0.3, memory_mb=512)) as quick:
        out, report = make_plus_tests([random_reference, hangs, none], quick, PlusTestSettings(tests_per_problem=2))
    assert [p.plus_tests for p in out] == [[], [], []]
    assert report.skipped == {"no reference solution": 1}
    assert report.tests_per_problem[0] == 2


def test_values_past_pythons_limits_skip_their_problem_not_the_data_set(executor):
    """A hex literal of more than 4300 decimal digits compiles and evaluates, but cannot be written
    back as source; a reference nested too deep for `ast.parse`. Each ended `make_plus_tests` for
    every problem, naming none; now the first problem is skipped with its reason and the rest go on."""
    huge = Problem(id="huge", prompt="x", test_type="assert", reference="def f(x, y):\n    return 1\n",
                   tests=[f"assert f(0x{'f' * 4000}, 3) == 1", "assert f(2, 3) == 1"])
    deep = Problem(id="deep", prompt="x", test_type="assert", tests=["assert g(1) == 1", "assert g(2) == 2"],
                   reference="def g(x):\n    return x\ny = " + "-" * 100_000 + "1\n")
    ok = Problem(id="ok", prompt="x", test_type="assert", tests=["assert h(1) == 2", "assert h(5) == 6"],
                 reference="def h(x):\n    return x + 1\n")
    out, report = make_plus_tests([huge, deep, ok], executor, PlusTestSettings(tests_per_problem=2),
                                  alternatives={"deep": ["def g(x):\n    return x * 1\n"]})
    assert report.skipped_problems["huge"] == "a test's arguments or expected value cannot be written back as source"
    assert out[0].plus_tests == [] and len(out[2].plus_tests) == 2
    assert report.skipped_problems["deep"] == REFERENCE_FAILS  # the sandbox cannot compile it either


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


def mbpp(split: str, *ids: int) -> list[Problem]:
    """MBPP problems by task id, through the adapter, from the upstream full file."""
    wanted = {f"mbpp/{i}" for i in ids}
    problems = [p for p in load_split("mbpp", split, source=str(MBPP_DIR), subset="full").problems if p.id in wanted]
    assert {p.id for p in problems} == wanted, f"{MBPP_DIR}: tasks {sorted(wanted)} not found"
    return problems


@linux_only
def test_references_that_fail_their_visible_tests_get_no_held_out_tests(executor):
    # 341 (test split) sorts a set by iterating it; 642 (train split, one of config/config.yaml's
    # training problems) compares sets of tuples built from sets. Their references fail their own tests.
    problems = mbpp("test", 11, 341) + mbpp("train", 642)
    out, report = make_plus_tests(problems, executor, PlusTestSettings(tests_per_problem=10))
    by_id = {p.id: p for p in out}
    assert by_id["mbpp/341"].plus_tests == [] and by_id["mbpp/642"].plus_tests == []
    assert by_id["mbpp/11"].plus_tests, "a reference that passes its tests still gets held-out tests"
    manifest = report.to_dict(len(problems))
    assert manifest["skipped_problems"] == {"mbpp/341": REFERENCE_FAILS, "mbpp/642": REFERENCE_FAILS}
    assert manifest["skipped"] == {REFERENCE_FAILS: 2}
    # A correct program for 341 passes the visible tests and is not accused by held-out ones.
    correct = "def set_to_tuple(s):\n    return tuple(sorted(s))\n"
    assert executor.run(by_id["mbpp/341"], correct).status == "pass"
    assert executor.run(with_plus_tests(by_id["mbpp/341"]), correct).status == "pass"


@linux_only
def test_outputs_that_depend_on_the_hash_seed_are_dropped(executor):
    # Strings hash differently under each PYTHONHASHSEED, so a set of two or more comes out in
    # another order; the visible tests hold one distinct string each and pass under any seed.
    dedupe = Problem(id="dedupe", prompt="Remove duplicate words.", test_type="assert", entry_point="dedupe",
                     tests=["assert dedupe(['ab', 'ab']) == ['ab']", "assert dedupe(['cd']) == ['cd']"],
                     reference="def dedupe(words):\n    return list(set(words))\n")  # fmt: skip
    out, report = make_plus_tests([dedupe], executor, PlusTestSettings(tests_per_problem=10))
    assert report.unstable_inputs > 0
    assert out[0].plus_tests
    held_out = Problem(**{**out[0].to_dict(), "tests": out[0].plus_tests, "plus_tests": []})
    for seed in (0, 1, 5, 6):  # the judge's, one rechecked, two never tried
        with Executor(workers=1, limits=ExecutionLimits(timeout_s=2, memory_mb=512), hash_seed=seed) as other:
            verdict = other.run(held_out, dedupe.reference)
        assert verdict.status == "pass", (seed, verdict.test_outcomes)


def test_hash_seeds_are_the_reruns_of_every_reference_input(executor):
    """`plus_tests.hash_seeds`: each planned input of the reference runs once under the judge's seed
    and once more under each listed seed."""
    double = Problem(id="double", prompt="Double x.", test_type="assert", entry_point="f",
                     tests=["assert f(3) == 6"], reference="def f(x):\n    return 2 * x\n")  # fmt: skip
    runs = {}
    for seeds in ((1,), (1, 2, 3)):
        _, report = make_plus_tests([double], executor, PlusTestSettings(tests_per_problem=2, hash_seeds=seeds))
        runs[seeds] = report.reference_runs
    planned = runs[(1,)] // 2
    assert planned > 0 and runs == {(1,): 2 * planned, (1, 2, 3): 4 * planned}


def test_hash_seeds_leave_out_the_judges_seed():
    assert PlusTestSettings(hash_seeds=[4, 7]).hash_seeds == (4, 7)
    for bad in ([], [0, 1], [1, 1], [-1], [True]):
        with pytest.raises(ValueError, match="plus_tests.hash_seeds"):
            PlusTestSettings(hash_seeds=bad)


@linux_only
def test_inputs_that_split_correct_solutions_are_dropped(executor):
    # Halving is only asked of the visible tests' non-negative numbers: on a negative odd one, floor
    # division and truncation disagree, and either answer is correct as far as the task says.
    half = Problem(id="half", prompt="Halve a count.", test_type="assert", entry_point="half",
                   tests=["assert half(4) == 2", "assert half(10) == 5", "assert half(7) == 3"],
                   reference="def half(x):\n    return x // 2\n")  # fmt: skip
    truncating = "def half(x):\n    return int(x / 2)\n"
    wrong = "def half(x):\n    return x\n"
    settings = PlusTestSettings(tests_per_problem=10)
    alternatives = {"half": [truncating, wrong, "def half(x):\n    return x//2"]}  # the last is the reference
    out, report = make_plus_tests([half], executor, settings, alternatives=alternatives)
    manifest = report.to_dict(1)
    assert manifest["alternatives_given"] == 2 and manifest["alternatives_checked"] == 1, manifest
    assert manifest["split_inputs"] > 0
    assert manifest["failing_before"] == ["half"] and manifest["false_positive_floor_before"] == 1.0
    assert manifest["failing_after"] == [] and manifest["false_positive_floor_after"] == 0.0
    assert out[0].plus_tests
    assert executor.run(with_plus_tests(out[0]), truncating).status == "pass"
    assert executor.run(with_plus_tests(out[0]), wrong).status == "fail", "the held-out tests still catch wrong programs"
    unfiltered, _ = make_plus_tests([half], executor, settings)
    assert executor.run(with_plus_tests(unfiltered[0]), truncating).status == "fail"


@linux_only
def test_mbpp_sanitized_solutions_check_the_held_out_tests(executor, tmp_path):
    # Task 457's sanitized solution takes the shortest sublist; the full file's takes the smallest.
    problems = mbpp("test", 457, 12)
    alternatives = alternative_solutions("mbpp", problems, split="test", source=str(MBPP_DIR), subset="full")
    assert "min(lst, key=len)" in alternatives["mbpp/457"][0]
    write_alternatives(alternatives, tmp_path / "alternatives.json")
    assert read_alternatives(tmp_path / "alternatives.json") == alternatives
    out, report = make_plus_tests(problems, executor, PlusTestSettings(), alternatives=alternatives)
    manifest = report.to_dict(len(problems))
    assert manifest["failing_before"] == ["mbpp/457"] and manifest["failing_after"] == [], manifest
    found = next(p for p in out if p.id == "mbpp/457")
    assert found.plus_tests
    assert executor.run(with_plus_tests(found), alternatives["mbpp/457"][0]).status == "pass"


def test_renamed_reference_keeps_the_entry_point_and_module_names():
    code = "import math\nLIMIT = 3\ndef f(xs, k):\n    total = 0\n    for x in xs:\n        total += math.floor(x) * k\n    return min(total, LIMIT)\n"
    new = renamed(code, ["f"])
    assert "def f(xs_1, k_1):" in new and "for x_1 in xs_1" in new and "math.floor" in new and "LIMIT" in new
    scope: dict = {}
    exec(compile(new, "renamed", "exec"), scope)
    assert scope["f"]([1.5, 2.5], 1) == 3


def test_alternatives_file_errors_name_the_problem(tmp_path):
    path = tmp_path / "alternatives.json"
    path.write_text(json.dumps({"mbpp/1": "def f(): pass"}))
    with pytest.raises(ValueError, match="mbpp/1"):
        read_alternatives(path)
