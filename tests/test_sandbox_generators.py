"""Generators across the judge and the run: each class is a set of programs whose per-test
verdicts must be plain Python's (``plain_verdict`` of ``execrl.sandbox.differential``: one
fresh interpreter, the same tests).

* side effects of the program's generator, in order: the arguments of the call that made
  the generator are kept in step with the run's while it runs (``log == [0]`` after
  ``next(g)``), the test's changes to them reach the generator, and the run never produces
  an item before the test asks for it, unless the test's consumer takes every item without
  running code of the test's in between (``list(g)``, ``sum(g)``);
* the end of the program's generator (``return`` of ``yield from``, a ``finally``) changes
  an argument: the change comes with the ``StopIteration``;
* a large iterator of the test's passed to the program: read in batches where reading ahead
  cannot be seen (a generator expression over a range the test holds nowhere else), one
  item at a time, in order, where it can.
"""

from __future__ import annotations

import sys

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.differential import plain_verdict

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=3, memory_mb=1024)

PRODUCE = "def produce(log, n=3):\n    for i in range(n):\n        log.append(i)\n        yield i\n"
COUNTED = ("made = 0\n\ndef naturals():\n    global made\n    n = 0\n    while True:\n        made += 1\n"
           "        yield n\n        n += 1\n\ndef count():\n    return made\n")
ACC = ("def acc():\n    total = 0\n    while True:\n        got = yield total\n"
       "        total += 1 if got is None else got\n")
YIELD_FROM = ("def inner(k):\n    yield 1\n    yield 2\n    return k\n\n"
              "def outer(out, k='done'):\n    out.append((yield from inner(k)))\n")
FIRST_OVER = "def first_over(items, k):\n    for x in items:\n        if x > k:\n            return x\n"

SIDE_EFFECTS = {
    "next_then_log": (PRODUCE, ["log = []\ng = produce(log)\nassert next(g) == 0\nassert log == [0]\n"
                                "assert next(g) == 1\nassert log == [0, 1]",
                                "log = []\nassert list(produce(log)) == [0, 1, 2] and log == [0, 1, 2]"]),
    "log_checked_in_a_for_loop": (PRODUCE, ["log = []\nfor i, x in enumerate(produce(log, 5)):\n"
                                            "    assert log == list(range(i + 1))\nassert log == [0, 1, 2, 3, 4]"]),
    "test_changes_the_list_between_items": (PRODUCE, ["log = []\ng = produce(log)\nnext(g)\nlog.clear()\n"
                                                      "next(g)\nassert log == [1]"]),
    "dict_argument": ("def tally(words, counts):\n    for w in words:\n        counts[w] = counts.get(w, 0) + 1\n"
                      "        yield w\n",
                      ["c = {}\ng = tally(['a', 'b', 'a'], c)\nnext(g)\nnext(g)\nassert c == {'a': 1, 'b': 1}",
                       "c = {}\nassert sorted(tally('abca', c)) == ['a', 'a', 'b', 'c'] and c['a'] == 2"]),
    "islice_does_not_run_ahead": (COUNTED, ["from itertools import islice\n"
                                            "assert list(islice(naturals(), 4)) == [0, 1, 2, 3]\nassert count() == 4",
                                            "g = naturals()\nfor _ in range(6):\n    next(g)\nassert count() == 10"]),
    "zip_and_any_stop_where_python_stops": (COUNTED, ["assert list(zip(naturals(), 'abc'))[-1] == (2, 'c')\n"
                                                      "assert count() == 4",
                                                      "assert any(x > 5 for x in naturals())\nassert count() == 11"]),
    "send_after_several_next": (ACC, ["g = acc()\nassert next(g) == 0\nassert next(g) == 1\n"
                                      "assert g.send(10) == 11\nassert next(g) == 12"]),
    "pure_generator_expression_over_it": (
        "def upto(n, log=None):\n    for i in range(n):\n        if log is not None:\n            log.append(i)\n"
        "        yield i\n",
        ["assert sum(1 for _ in upto(100000)) == 100000",
         "log = []\nassert sum(x % 3 for x in upto(20000, log)) == 19999 and len(log) == 20000",
         "log = []\nassert max(abs(x - 7) for x in upto(10, log)) == 7 and len(log) == 10",
         "log = []\nseen = []\ndef f(x):\n    seen.append(len(log))\n    return x\n"
         "assert sum(f(x) for x in upto(4, log)) == 6 and seen == [1, 2, 3, 4]",
         "log = []\nassert any(x > 1 for x in upto(5, log)) and log == [0, 1, 2]"]),
    "for_loops_of_the_test": (
        COUNTED + "\ndef upto(n, log=None):\n    for i in range(n):\n        if log is not None:\n"
        "            log.append(i)\n        yield i\n",
        ["n = 0\nfor x in upto(100000):\n    n += x % 2\n    assert x >= 0\nassert n == 50000",
         "log = []\nfor x in upto(5, log):\n    assert len(log) == x + 1",
         "for x in naturals():\n    if x > 3:\n        break\nassert count() == 5",
         "total = 0\nfor x in naturals():\n    total += x\n    assert total < 10\n"]),
    "wrong_program_still_fails": ("def produce(log, n=3):\n    for i in range(n):\n        yield i\n"
                                  "        log.append(i)\n",
                                  ["log = []\ng = produce(log)\nnext(g)\nassert log == [0]",
                                   "log = []\nassert list(produce(log)) == [0, 1, 2] and log == [0, 1, 2]"]),
    "big_generator_summed_and_listed": ("def upto(n, log):\n    for i in range(n):\n        yield i\n"
                                        "    log.append(n)\n",
                                        ["log = []\nassert sum(upto(100000, log)) == 4999950000 and log == [100000]",
                                         "log = []\nassert len(list(upto(100000, log))) == 100000 and log == [100000]",
                                         "log = []\nassert max(upto(50000, log)) == 49999 and log == [50000]"]),
}

RETURN_AND_FINALLY = {
    "yield_from_return_value": (YIELD_FROM, ["out = []\nassert list(outer(out)) == [1, 2] and out == ['done']"]),
    "yield_from_in_a_for_loop": (YIELD_FROM, ["out = []\nfor x in outer(out, 7):\n    assert out == []\n"
                                              "assert out == [7]"]),
    "stop_iteration_by_next": (YIELD_FROM, ["out = []\ng = outer(out)\nnext(g)\nnext(g)\ntry:\n    next(g)\n"
                                            "except StopIteration:\n    pass\nassert out == ['done']"]),
    "finally_on_close": ("def guarded(log):\n    try:\n        yield 1\n        yield 2\n    finally:\n"
                         "        log.append('closed')\n",
                         ["log = []\ng = guarded(log)\nnext(g)\ng.close()\nassert log == ['closed']"]),
    "wrong_return_value_fails": ("def inner():\n    yield 1\n    return 'dne'\n\ndef outer(out):\n"
                                 "    out.append((yield from inner()))\n",
                                 ["out = []\nassert list(outer(out)) == [1] and out == ['done']"]),
}

TEST_ITERATORS = {
    "big_generator_expression": ("def total(items):\n    return sum(items)\n",
                                 ["assert total(x for x in range(100000)) == 4999950000",
                                  "assert total(x * x for x in range(150000) if x % 3) == 749999999950000"]),
    "big_generator_expression_in_a_for_loop": ("def evens(items):\n    n = 0\n    for x in items:\n"
                                               "        if x % 2 == 0:\n            n += 1\n    return n\n",
                                               ["assert evens(x for x in range(200000)) == 100000",
                                                "assert evens(iter(range(100001))) == 50001"]),
    "held_iterator_keeps_its_position": (FIRST_OVER, ["it = iter(range(10))\nassert first_over(it, 2) == 3\n"
                                                      "assert next(it) == 4",
                                                      "g = (x for x in range(10))\nassert first_over(g, 4) == 5\n"
                                                      "assert list(g) == [6, 7, 8, 9]",
                                                      "it = iter(range(10))\nassert first_over(k=2, items=it) == 3\n"
                                                      "assert next(it) == 4"]),
    "source_held_by_the_test": (FIRST_OVER, ["r = iter(range(10))\nassert first_over((x for x in r), 2) == 3\n"
                                             "assert next(r) == 4"]),
    "side_effects_of_the_tests_generator_in_order": (
        FIRST_OVER, ["seen = []\ndef src():\n    for i in range(5):\n        seen.append(i)\n        yield i\n"
                     "assert first_over(src(), 2) == 3\nassert seen == [0, 1, 2, 3]",
                     "seen = []\nassert first_over((seen.append(x) or x for x in range(9)), 1) == 2\n"
                     "assert seen == [0, 1, 2]"]),
    "iterator_the_test_keeps_from_its_callback": (
        "def first_of(make, k):\n    for x in make():\n        if x > k:\n            return x\n",
        ["keep = []\ndef make():\n    keep.append(x for x in range(10))\n    return keep[-1]\n"
         "assert first_of(make, 2) == 3\nassert next(keep[0]) == 4"]),
    "big_generator_expression_of_builtins": ("def total_len(items):\n    return sum(len(s) for s in items)\n",
                                             ["assert total_len(str(x) for x in range(100000)) == 488890",
                                              "assert total_len(hex(abs(x - 5)) for x in range(7)) == 21"]),
    "generator_expression_calling_a_function_is_read_in_turn": (
        "calls = []\n\ndef double(x):\n    calls.append(x)\n    return 2 * x\n\n" + FIRST_OVER
        + "\ndef called():\n    return calls\n",
        ["assert first_over((double(x) for x in range(10)), 5) == 6\nassert called() == [0, 1, 2, 3]",
         "seen = []\ndef str(x):\n    seen.append(x)\n    return x\n"
         "assert first_over((str(x) for x in range(10)), 2) == 3\nassert seen == [0, 1, 2, 3]"]),
    "error_inside_the_tests_generator": ("def total(items):\n    s = 0\n    try:\n        for x in items:\n"
                                         "            s += x\n    except ZeroDivisionError:\n        return -s\n"
                                         "    return s\n",
                                         ["assert total(10 // (x - 300) for x in range(1000)) == 323"]),
}


def _agree(code: str, tests: list[str], executor: Executor) -> tuple[list[str], list[str]]:
    problem = Problem(id="g", prompt="g", test_type="assert", tests=tests)
    plain = plain_verdict(problem, code, LIMITS)
    (result,) = executor.run_batch([(problem, code)], limits=LIMITS)
    return plain.tests, [o["status"] for o in result.test_outcomes]


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=1, limits=LIMITS) as ex:
        yield ex


@pytest.mark.parametrize("case", sorted(SIDE_EFFECTS))
def test_side_effects_of_the_programs_generator_are_seen_in_order(case, executor):
    plain, sandbox = _agree(*SIDE_EFFECTS[case], executor)
    assert sandbox == plain


@pytest.mark.parametrize("case", sorted(RETURN_AND_FINALLY))
def test_what_a_generator_does_at_its_end_reaches_the_tests_arguments(case, executor):
    plain, sandbox = _agree(*RETURN_AND_FINALLY[case], executor)
    assert sandbox == plain


@pytest.mark.parametrize("case", sorted(TEST_ITERATORS))
def test_the_tests_iterators_are_read_as_python_reads_them(case, executor):
    plain, sandbox = _agree(*TEST_ITERATORS[case], executor)
    assert sandbox == plain


def test_a_big_iterator_of_the_tests_costs_few_round_trips(executor):
    """200,000 items of a generator expression in growing batches (up to 4,096 a request): the
    run waits for the judge about 200 times. Counted by the program itself, as the voluntary
    context switches of its process while it sums (each wait for an answer is one), not timed:
    one round trip per item was ~1.9 switches per item (~380,000) and took seconds of CPU."""
    problem = Problem(id="g", prompt="g", test_type="assert",
                      tests=["s, waits = total(x for x in range(200000))\nassert s == 19999900000\nassert waits < 2000"])
    program = ("import resource\n\ndef total(items):\n"
               "    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw\n"
               "    s = sum(items)\n"
               "    return s, resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before\n")
    (result,) = executor.run_batch([(problem, program)], limits=LIMITS)
    assert result.status == "pass", (result.error_type, result.error_message)
