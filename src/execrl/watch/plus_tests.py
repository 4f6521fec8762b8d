"""Held-out tests made from a problem's reference solution (type-aware input mutation).

The prompt shows a problem's tests, so a program can special-case their inputs and pass every
test the reward runs. Held-out ("plus") tests catch that: the visible tests' arguments are
mutated by type, the reference runs on each new input *in the sandbox* to give the expected
output, and inputs where the reference is deterministic, finishes within limits and returns a
plain literal become new tests of the same shape. The mutation follows EvalPlus (Liu et al.,
2023): ints, floats, strings, lists, tuples, sets and dicts are mutated by type, recursively,
with sizes kept within bounds of the visible inputs.

A problem takes part when it has a reference that passes its own visible tests and
*call-shaped* tests: ``call`` tests, or ``assert`` tests that are all
``assert ENTRY(<literals>) == <literal>`` for one function. Anything else (stdio programs,
asserts around ``set(...)`` or ``math.isclose``, a reference the visible tests reject) keeps no
plus tests, and the manifest says why, problem by problem.

A held-out test must not accuse a correct program:

- the reference runs on every input under the judge's ``PYTHONHASHSEED`` (0) and again under
  each of ``hash_seeds``, so an output that depends on the iteration order of a set of strings
  is dropped with other nondeterminism (an order that happens to agree under every seed tried
  survives: with k seeds and two strings, about one input in 2**k);
- where a data set has *alternative correct solutions* (another solution of the same task that
  passes the visible tests: MBPP's other file, or a renamed builtin reference, see
  :mod:`execrl.watch.alternatives`), an input on which one of them disagrees with the reference
  is dropped. The manifest gives the *false-positive floor*, the share of those alternatives that
  fail some held-out test, before this filter and after it.
"""

from __future__ import annotations

import ast
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from execrl.jsonl import write_json
from execrl.problems import Problem
from execrl.sandbox.programs import run_programs

MARKER = "@@plus-result@@ "
"""Prefix of the line the driver prints; the reference's own output cannot be mistaken for it."""

JUDGE_HASH_SEED = 0
"""``PYTHONHASHSEED`` of the executor that judges candidates (``execrl.sandbox.Executor``'s default)."""

REFERENCE_FAILS = "reference fails its visible tests"


@dataclass(frozen=True)
class PlusTestSettings:
    """How many held-out tests to make per problem, and within which bounds."""

    tests_per_problem: int = 10
    """Held-out tests kept per problem at most (fewer when mutation finds fewer valid inputs)."""

    candidates_per_test: int = 3
    """Mutated inputs tried per kept test (the reference may fail or repeat on some)."""

    max_collection_size: int = 20
    """The largest list, tuple, set, dict or string a mutation makes."""

    max_abs_int: int = 10**6
    """Integers are kept within ±this bound, so the reference stays fast."""

    max_output_chars: int = 2000
    """A reference output whose literal is longer is not used as an expected value."""

    seed: int = 0
    """Seed of the mutations (with the problem's id, so each problem's tests are its own)."""

    timeout_s: float = 2.0
    """CPU seconds the reference may take on one input; slower inputs are dropped."""

    hash_seeds: tuple[int, ...] = (1, 2, 3)
    """``PYTHONHASHSEED`` values under which the reference runs every input again (the judge's
    own, 0, is the first run); an input whose output differs under any of them is dropped."""

    def __post_init__(self) -> None:
        for name in ("tests_per_problem", "candidates_per_test", "max_collection_size", "max_abs_int",
                     "max_output_chars"):  # fmt: skip
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"plus_tests.{name} must be positive, got {getattr(self, name)!r}")
        seeds = tuple(self.hash_seeds)
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
            raise ValueError(f"plus_tests.hash_seeds must be a non-empty list of integers >= 0, got {self.hash_seeds!r}")
        if JUDGE_HASH_SEED in seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"plus_tests.hash_seeds must be distinct and leave out the judge's seed "
                             f"{JUDGE_HASH_SEED}, got {list(seeds)}")  # fmt: skip
        object.__setattr__(self, "hash_seeds", seeds)


@dataclass(frozen=True)
class CallShape:
    """A problem's tests as calls of one function on literal arguments."""

    entry_point: str
    calls: tuple[tuple[Any, ...], ...]


def call_shape(problem: Problem) -> CallShape | str:
    """The problem's tests as calls, or the reason they are not call-shaped."""
    if problem.test_type == "call":
        calls = tuple(tuple(test["args"]) for test in problem.tests)
        return CallShape(problem.entry_point, calls)
    if problem.test_type != "assert":
        return f"{problem.test_type} tests are not calls"
    entry_points, calls = set(), []
    for test in problem.tests:
        parsed = _assert_call(test)
        if isinstance(parsed, str):
            return parsed
        entry_points.add(parsed[0])
        calls.append(parsed[1])
    if len(entry_points) != 1:
        return f"tests call {len(entry_points)} different functions"
    return CallShape(entry_points.pop(), tuple(calls))


def _assert_call(test: str) -> tuple[str, tuple[Any, ...]] | str:
    """``assert f(<literals>) == <literal>`` as (f, args), or why it is not of that shape."""
    try:
        module = ast.parse(test)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "a test does not parse"
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assert):
        return "a test is not one assert"
    compare = module.body[0].test
    if not (isinstance(compare, ast.Compare) and len(compare.ops) == 1 and isinstance(compare.ops[0], ast.Eq)):
        return "a test is not an equality"
    call = compare.left
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or call.keywords:
        return "a test's left side is not a plain call"
    try:
        args = tuple(ast.literal_eval(arg) for arg in call.args)
        expected = ast.literal_eval(compare.comparators[0])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return "a test's arguments or expected value are not literals"
    try:
        repr((args, expected))  # held-out tests are written as source: every value must be
    except ValueError:  # an integer past Python's limit on digits (a hex literal can be one)
        return "a test's arguments or expected value cannot be written back as source"
    return call.func.id, args


# --- Type-aware mutation -----------------------------------------------------------------------


def mutate(value: Any, rng: random.Random, settings: PlusTestSettings, depth: int = 0) -> Any:
    """A new value of `value`'s type near it (EvalPlus's type-aware mutation)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return _mutate_int(value, rng, settings)
    if isinstance(value, float):
        return _mutate_float(value, rng)
    if isinstance(value, str):
        return _mutate_str(value, rng, settings)
    if isinstance(value, (list, tuple)):
        return type(value)(_mutate_sequence(list(value), rng, settings, depth))
    if isinstance(value, (set, frozenset)):
        items = _mutate_sequence(sorted(value, key=repr), rng, settings, depth)
        return type(value)(items)
    if isinstance(value, dict):
        return _mutate_dict(value, rng, settings, depth)
    return value  # None, bytes, complex: kept


def _mutate_int(value: int, rng: random.Random, settings: PlusTestSettings) -> int:
    choice = rng.randrange(6)
    if choice == 0:
        new = value + rng.choice((-1, 1))
    elif choice == 1:
        new = -value
    elif choice == 2:
        new = value * 2
    elif choice == 3:
        new = value // 2
    elif choice == 4:
        new = rng.randint(-abs(value) - 10, abs(value) + 10)
    else:
        new = rng.choice((0, 1, -1, 2))
    return max(-settings.max_abs_int, min(settings.max_abs_int, new))


def _mutate_float(value: float, rng: random.Random) -> float:
    choice = rng.randrange(4)
    if choice == 0:
        return round(value + rng.uniform(-1, 1), 3)
    if choice == 1:
        return -value
    if choice == 2:
        return round(value * rng.uniform(0.5, 2.0), 3)
    return float(rng.randint(-10, 10))


def _mutate_str(value: str, rng: random.Random, settings: PlusTestSettings) -> str:
    alphabet = sorted(set(value)) or list("abc")
    chars = list(value)
    choice = rng.randrange(5)
    if choice == 0 and chars:
        del chars[rng.randrange(len(chars))]
    elif choice == 1 and len(chars) < settings.max_collection_size:
        chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet))
    elif choice == 2 and chars:
        chars[rng.randrange(len(chars))] = rng.choice(alphabet + list("xyz"))
    elif choice == 3 and len(chars) > 1:
        i, j = rng.randrange(len(chars)), rng.randrange(len(chars))
        chars[i], chars[j] = chars[j], chars[i]
    else:
        chars = chars[::-1] if rng.random() < 0.5 else chars[: rng.randint(0, len(chars))]
    return "".join(chars)


def _mutate_sequence(items: list, rng: random.Random, settings: PlusTestSettings, depth: int) -> list:
    items = list(items)
    choice = rng.randrange(5)
    if choice == 0 and items:
        i = rng.randrange(len(items))
        items[i] = mutate(items[i], rng, settings, depth + 1)
    elif choice == 1 and items and len(items) < settings.max_collection_size:
        items.insert(rng.randrange(len(items) + 1), mutate(rng.choice(items), rng, settings, depth + 1))
    elif choice == 2 and items:
        del items[rng.randrange(len(items))]
    elif choice == 3 and len(items) > 1:
        rng.shuffle(items)
    elif items:
        items = [mutate(item, rng, settings, depth + 1) if rng.random() < 0.5 else item for item in items]
    return items[: settings.max_collection_size]


def _mutate_dict(value: dict, rng: random.Random, settings: PlusTestSettings, depth: int) -> dict:
    result = dict(value)
    keys = list(result)
    choice = rng.randrange(3)
    if choice == 0 and keys:
        key = rng.choice(keys)
        result[key] = mutate(result[key], rng, settings, depth + 1)
    elif choice == 1 and keys:
        del result[rng.choice(keys)]
    elif keys and len(result) < settings.max_collection_size:
        key = mutate(rng.choice(keys), rng, settings, depth + 1)
        result[key] = mutate(result[rng.choice(keys)], rng, settings, depth + 1)
    return result


def mutated_inputs(shape: CallShape, settings: PlusTestSettings, rng: random.Random) -> list[tuple[Any, ...]]:
    """New argument tuples near the visible ones, unique and never one of them."""
    seen = {_key(args) for args in shape.calls}
    inputs: list[tuple[Any, ...]] = []
    wanted = settings.tests_per_problem * settings.candidates_per_test
    for _ in range(wanted * 10):
        if len(inputs) >= wanted:
            break
        base = rng.choice(shape.calls)
        if not base:
            break  # a function of no arguments has nothing to mutate
        args = list(base)
        for i in rng.sample(range(len(args)), rng.randint(1, len(args))):
            args[i] = mutate(args[i], rng, settings)
        key = _key(tuple(args))
        if key is not None and key not in seen:
            seen.add(key)
            inputs.append(tuple(args))
    return inputs


def _key(args: tuple) -> str | None:
    text = repr(args)
    return text if _is_literal(text) else None


def _is_literal(text: str) -> bool:
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return repr(value) == text and not _has_bad_float(value)


def json_exact(value: Any) -> bool:
    """Whether JSON holds ``value`` as it is: None, bools, ints, finite floats, strings, and lists
    and string-keyed dicts of them (a tuple would come back a list, a set not at all)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(json_exact(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and json_exact(v) for k, v in value.items())
    return False


def _has_bad_float(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_bad_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_bad_float(k) or _has_bad_float(v) for k, v in value.items())
    return False


# --- Expected outputs from the reference, in the sandbox ----------------------------------------


def driver_program(reference: str, entry_point: str, args: tuple[Any, ...]) -> str:
    """The reference, then one call of it whose result is printed after :data:`MARKER`."""
    return (
        f"{reference}\n\n"
        f"__plus_result = {entry_point}(*{args!r})\n"
        f"print({MARKER!r} + repr(__plus_result))\n"
    )


def expected_output(stdouts: list[str], settings: PlusTestSettings) -> str | None:
    """The literal the reference returned, if every run printed the same usable one."""
    results = set()
    for stdout in stdouts:
        lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
        if len(lines) != 1:
            return None
        results.add(lines[0][len(MARKER) :])
    if len(results) != 1:
        return None  # the reference is not deterministic on this input
    text = results.pop()
    if len(text) > settings.max_output_chars or not _is_literal(text):
        return None
    return text


def plus_test(problem: Problem, entry_point: str, args: tuple[Any, ...], expected: str) -> Any:
    """A held-out test in the problem's own test shape."""
    if problem.test_type == "call":
        return {"args": list(args), "expected": ast.literal_eval(expected)}
    call = f"{entry_point}({', '.join(repr(a) for a in args)})"
    value = ast.literal_eval(expected)
    if isinstance(value, float):
        # A correct program may sum in another order: floats are compared to a relative 1e-6.
        return f"assert abs({call} - {expected}) <= 1e-6 * max(1.0, abs({expected}))"
    return f"assert {call} == {expected}"


@dataclass
class PlusTestReport:
    """What happened to each problem, for the manifest."""

    tests_per_problem: Counter
    skipped: Counter
    reference_runs: int = 0
    skipped_problems: dict[str, str] = field(default_factory=dict)
    """Problem id → why it got no held-out tests (every skipped problem)."""
    unstable_inputs: int = 0
    """Inputs dropped because the reference's runs disagreed (nondeterminism, hash seed)."""
    alternatives_given: int = 0
    """Alternative solutions offered for problems that take part."""
    alternatives_checked: int = 0
    """Those that pass their problem's visible tests: correct, so no held-out test may fail them."""
    split_inputs: int = 0
    """Held-out tests dropped because an alternative correct solution disagrees with the reference."""
    failing_before: Counter = field(default_factory=Counter)
    """Problem id → its alternatives that fail a held-out test made without the alternatives' filter."""
    failing_after: Counter = field(default_factory=Counter)
    """Problem id → its alternatives that fail one of the held-out tests kept."""

    def to_dict(self, n_problems: int) -> dict[str, Any]:
        with_tests = sum(n for k, n in self.tests_per_problem.items() if k > 0)
        return {
            "problems": n_problems,
            "problems_with_plus_tests": with_tests,
            "plus_tests": sum(k * n for k, n in self.tests_per_problem.items()),
            "tests_per_problem": {str(k): n for k, n in sorted(self.tests_per_problem.items())},
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_problems": dict(sorted(self.skipped_problems.items())),
            "reference_runs": self.reference_runs,
            "unstable_inputs": self.unstable_inputs,
            "alternatives_given": self.alternatives_given,
            "alternatives_checked": self.alternatives_checked,
            "split_inputs": self.split_inputs,
            "false_positive_floor_before": _share(sum(self.failing_before.values()), self.alternatives_checked),
            "false_positive_floor_after": _share(sum(self.failing_after.values()), self.alternatives_checked),
            "failing_before": sorted(self.failing_before),
            "failing_after": sorted(self.failing_after),
        }


def _share(count: int, total: int) -> float | None:
    return count / total if total else None


def make_plus_tests(
    problems: list[Problem],
    executor,
    settings: PlusTestSettings,
    progress: Callable[[int], None] | None = None,
    *,
    alternatives: Mapping[str, Sequence[str]] | None = None,
    recheck_executors: Sequence | None = None,
) -> tuple[list[Problem], PlusTestReport]:
    """Each problem with ``plus_tests`` filled in (empty where it has no usable reference).

    The reference first runs on its visible tests (a problem whose reference fails them gets
    none). It then runs on every mutated input in `executor` (hash seed 0) and again in each of
    `recheck_executors` (by default one per ``settings.hash_seeds``, with `executor`'s workers
    and limits); inputs where the runs disagree are dropped. Every candidate test is checked by
    running the reference against it through the sandbox's ordinary judge, and so is each
    alternative correct solution (`alternatives`: problem id → programs;
    those that fail the visible tests are not correct and are not used): a test the reference or
    any of them fails is dropped. The first ``tests_per_problem`` tests left are kept, and the
    alternatives are judged once more on what was kept, for the false-positive floor after the
    filter."""
    alternatives = alternatives or {}
    report = PlusTestReport(Counter(), Counter())
    shapes: dict[int, CallShape] = {}
    for index, problem in enumerate(problems):
        reason = _unusable(problem)
        shape = reason or call_shape(problem)
        if isinstance(shape, str):
            _skip(report, problem, shape)
            continue
        shapes[index] = shape

    # The reference and each alternative on the visible tests: what is correct here.
    offered = {index: distinct_alternatives(problems[index], alternatives.get(problems[index].id, ())) for index in shapes}
    visible = [(index, problems[index].reference, True) for index in shapes]
    visible += [(index, code, False) for index, codes in offered.items() for code in codes]
    verdicts = executor.run_batch([(problems[index], code) for index, code, _ in visible])
    correct: dict[int, list[str]] = {index: [] for index in shapes}
    for (index, code, is_reference), verdict in zip(visible, verdicts):
        if is_reference:
            if verdict.status != "pass":
                _skip(report, problems[index], REFERENCE_FAILS)
                del shapes[index]
        elif verdict.status == "pass":
            correct[index].append(code)
    report.alternatives_given = sum(len(offered[index]) for index in shapes)
    report.alternatives_checked = sum(len(correct[index]) for index in shapes)

    planned: list[tuple[int, str, tuple]] = []
    for index, shape in shapes.items():
        problem = problems[index]
        rng = random.Random(f"{settings.seed}\n{problem.id}")
        for args in mutated_inputs(shape, settings, rng):
            planned.append((index, driver_program(problem.reference, shape.entry_point, args), args))
    codes = [code for _, code, _ in planned]
    first = run_programs(executor, codes)
    again = []
    with ExitStack() as stack:
        if recheck_executors is None and codes:
            recheck_executors = [stack.enter_context(_reseeded(executor, seed)) for seed in settings.hash_seeds]
        for other in recheck_executors or ():
            again.append(run_programs(other, codes) if codes else [])
    report.reference_runs = len(first) + sum(map(len, again))
    candidates: dict[int, list[Any]] = {index: [] for index in shapes}
    for position, (index, _, args) in enumerate(planned):
        runs = [first[position], *(runs[position] for runs in again)]
        if not all(run.ran and not run.stdout_truncated for run in runs):
            continue
        expected = expected_output([run.stdout for run in runs], settings)
        if expected is None and expected_output([runs[0].stdout], settings) is not None:
            report.unstable_inputs += 1
        if expected is not None:
            test = plus_test(problems[index], shapes[index].entry_point, args, expected)
            # a call test is kept as JSON (a data set's tests are read from it): one whose arguments
            # or expected value JSON would change (a tuple, a set, bytes) is not made
            if problems[index].test_type != "call" or json_exact(test):
                candidates[index].append(test)

    # Every candidate test judged on the reference and on each correct alternative.
    checks = [(index, replace(problems[index], tests=tests)) for index, tests in candidates.items() if tests]
    judged = [(index, checked, code) for index, checked in checks for code in (problems[index].reference, *correct[index])]
    outcomes = executor.run_batch([(checked, code) for _, checked, code in judged])
    passes: dict[int, list[list[bool]]] = {index: [] for index, _ in checks}
    for (index, checked, _), verdict in zip(judged, outcomes):
        passes[index].append(_passed(verdict, len(checked.tests)))
    out = list(problems)
    for index, checked in checks:
        reference, *others = passes[index]
        ok = [i for i, passed in enumerate(reference) if passed]
        kept = [i for i in ok if all(other[i] for other in others)]
        report.split_inputs += len(ok) - len(kept)
        out[index] = replace(problems[index], plus_tests=[checked.tests[i] for i in kept[: settings.tests_per_problem]])
        # Without the filter, the first tests the reference passes would have been kept.
        for other in others:
            if not all(other[i] for i in ok[: settings.tests_per_problem]):
                report.failing_before[problems[index].id] += 1

    # The kept tests judged once more on the alternatives, as a candidate meets them.
    final = [(index, replace(out[index], tests=out[index].plus_tests, plus_tests=[]), code)
             for index in shapes if out[index].plus_tests for code in correct[index]]  # fmt: skip
    for (index, _, _), verdict in zip(final, executor.run_batch([(p, code) for _, p, code in final])):
        if verdict.status != "pass":
            report.failing_after[problems[index].id] += 1
    for index in shapes:
        report.tests_per_problem[len(out[index].plus_tests)] += 1
        if progress:
            progress(index)
    return out, report


def make_plus_tests_sandboxed(
    problems: list[Problem],
    settings: PlusTestSettings,
    *,
    workers: int,
    memory_mb: int,
    alternatives: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[Problem], PlusTestReport]:
    """:func:`make_plus_tests` in a sandbox of its own whose reference runs get ``settings.timeout_s``
    of CPU time each (and `memory_mb`); `workers` is parallelism only, never a result."""
    from execrl.sandbox import ExecutionLimits, Executor

    limits = ExecutionLimits(timeout_s=settings.timeout_s, memory_mb=memory_mb)
    with Executor(workers=workers, limits=limits) as executor:
        return make_plus_tests(problems, executor, settings, alternatives=alternatives)


def _skip(report: PlusTestReport, problem: Problem, reason: str) -> None:
    report.skipped[reason] += 1
    report.skipped_problems[problem.id] = reason


def distinct_alternatives(problem: Problem, codes: Sequence[str]) -> list[str]:
    """The alternatives that are not the reference itself (up to formatting), once each."""
    seen, out = {_normalized(problem.reference or "")}, []
    for code in codes:
        key = _normalized(code)
        if key not in seen:
            seen.add(key)
            out.append(code)
    return out


def _normalized(code: str) -> str:
    try:
        return ast.dump(ast.parse(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # the last two: deep nesting
        return code.strip()


def _passed(verdict, n_tests: int) -> list[bool]:
    """Per test, whether the program passed it (a test with no outcome did not pass)."""
    outcomes = list(verdict.test_outcomes)[:n_tests]
    passed = [o.get("status") == "pass" for o in outcomes]
    return passed + [False] * (n_tests - len(passed))


def _reseeded(executor, seed: int):
    """An executor like `executor` (its workers and limits) under ``PYTHONHASHSEED`` `seed`."""
    from execrl.sandbox import Executor

    return Executor(workers=executor.workers, limits=executor.limits, hash_seed=seed)


def _unusable(problem: Problem) -> str | None:
    if not problem.reference:
        return "no reference solution"
    if problem.setup_code.strip():
        return "tests need setup code"
    return None


def with_plus_tests(problem: Problem) -> Problem:
    """The problem judged on its base tests and its held-out tests together."""
    return replace(problem, tests=list(problem.tests) + list(problem.plus_tests), plus_tests=[])


# --- Alternative solutions' file (made by execrl.watch.alternatives) ------------------------------


def write_alternatives(alternatives: Mapping[str, list[str]], path: str | Path) -> None:
    write_json(dict(sorted(alternatives.items())), path)


def read_alternatives(path: str | Path) -> dict[str, list[str]]:
    """An alternatives file (problem id → list of programs); a clear error on anything else."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(record, dict):
        raise ValueError(f"{path}: an alternatives file is a JSON object of problem id → list of programs")
    for key, codes in record.items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ValueError(f"{path}: problem {key!r}: alternatives must be a list of program strings")
    return record
