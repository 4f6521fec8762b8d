"""``multiprocessing`` with the ``spawn`` and ``forkserver`` start methods: the new processes
run the program's file again, as for ``python solution.py``, so correct programs pass."""

from __future__ import annotations

import sys

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

POOL = """import multiprocessing as mp
def sq(x):
    return x * x
def total(n):
    with mp.get_context({method!r}).Pool(2) as pool:
        return sum(pool.map(sq, range(n))){wrong}
if __name__ == "__main__":
    import sys
    line = sys.stdin.readline()  # empty when the program is loaded for assert or call tests
    if line:
        print(total(int(line)))
"""

FUTURES = """import concurrent.futures, multiprocessing
def sq(x):
    return x * x
def total(n):
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        return sum(ex.map(sq, range(n)))
if __name__ == "__main__":
    import sys
    for line in sys.stdin:
        print(total(int(line)))
"""

ASSERT = Problem(id="spawn/assert", prompt="t", test_type="assert", tests=["assert total(4) == 14"])
STDIO = Problem(id="spawn/stdio", prompt="t", test_type="stdio", tests=[{"input": "4\n", "output": "14\n"},
                                                                        {"input": "5\n", "output": "30\n"}])
CALL = Problem(id="spawn/call", prompt="t", test_type="call", tests=[{"args": [4], "expected": 14}],
               entry_point="total")


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=5)) as executor:
        yield executor


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
@pytest.mark.parametrize("problem", [ASSERT, STDIO, CALL], ids=lambda p: p.test_type)
def test_a_pool_of_new_interpreters_works(ex, problem, method):
    good, wrong = POOL.format(method=method, wrong=""), POOL.format(method=method, wrong=" + 1")
    respawns, retries = ex.respawns, ex.stats()["retries"]
    results = ex.run_batch([(problem, good), (problem, wrong), (problem, good), (problem, "def total(n):\n    return 14\n")])
    assert [r.status for r in results[:3]] == ["pass", "fail", "pass"], [(r.error_type, r.error_message)
                                                                          for r in results]
    assert results[3].status == ("fail" if problem is STDIO else "pass")
    # the pools ended with their programs (a pass or fail, not the wall-clock backstop's timeout),
    # and no worker was replaced or candidate run again on the way
    assert (ex.respawns, ex.stats()["retries"]) == (respawns, retries)


def test_a_process_pool_executor_with_spawn_works(ex):
    assert [r.status for r in ex.run_batch([(STDIO, FUTURES), (ASSERT, FUTURES)])] == ["pass", "pass"]
