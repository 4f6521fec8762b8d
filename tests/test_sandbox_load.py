"""Verdicts do not depend on machine load: budgets are CPU time, wall clock only a backstop.

Each test runs next to CPU hogs on every core. The backstop does bound what load a verdict
survives: a run stops at 3 × its CPU budget + 2 s of wall time, so a correct program that needs
most of its budget times out where it gets less than about a third of a core. Other tests
beside these (a parallel test worker training a model) can push a run below that, so the
module is marked ``alone``: `make test` runs it after the parallel tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.limits import candidate_wall

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux"), pytest.mark.alone]


@contextlib.contextmanager
def cpu_hogs(n: int | None = None):
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n or os.cpu_count() or 2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def burner(cpu_s: float) -> str:
    """A stdio program that reads a number, burns ``cpu_s`` of CPU time and prints it doubled."""
    return ("import time\n"
            "n = int(input())\n"
            f"end = time.process_time() + {cpu_s}\n"
            "while time.process_time() < end:\n"
            "    pass\n"
            "print(2 * n)\n")


def test_the_candidate_backstop_scales_with_its_tests():
    lim = ExecutionLimits(timeout_s=2.0).worker_limits()
    assert candidate_wall(lim, 1) == 3 * 8  # three per-run limits
    assert candidate_wall(lim, 20) == 3 * 2.0 * 20 + 2 * 8  # each test may take three times its CPU budget
    assert candidate_wall(ExecutionLimits(timeout_s=2.0, total_wall_timeout_s=5).worker_limits(), 20) == 5


def test_many_tests_near_their_cpu_budget_pass_under_load():
    """20 tests of 0.8 s CPU each with 1 s per test: 16 s of CPU, more than the former
    per-candidate wall budget (3 × (3 × 1 + 2) = 15 s) even on an idle machine."""
    tests = [{"input": f"{i}\n", "output": f"{2 * i}\n"} for i in range(20)]
    problem = Problem(id="load/stdio", prompt="t", test_type="stdio", tests=tests)
    wrong = burner(0.0).replace("2 * n", "n")
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=1.0)) as ex, cpu_hogs():
        t0 = time.monotonic()
        good, bad, again = ex.run_batch([(problem, burner(0.8)), (problem, wrong), (problem, burner(0.8))])
        elapsed = time.monotonic() - t0
    assert (good.status, good.tests_passed) == ("pass", 20), (good.error_type, good.error_message, elapsed)
    assert bad.status == "fail"
    assert again.status == "pass"
    assert good.cpu_time_s >= 20 * 0.8


def test_a_test_over_its_cpu_budget_times_out_under_load():
    tests = [{"input": "1\n", "output": "2\n"}] * 3
    problem = Problem(id="load/over", prompt="t", test_type="stdio", tests=tests)
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=0.5)) as ex, cpu_hogs():
        over, ok = ex.run_batch([(problem, burner(5.0)), (problem, burner(0.1))])
    assert over.status == "timeout" and over.test_outcomes[0]["status"] == "timeout"
    assert [o["status"] for o in over.test_outcomes[1:]] == ["not_run", "not_run"]
    assert ok.status == "pass"


def test_filling_the_scratch_space_under_load_is_a_verdict_not_a_kill():
    """The hostile ``fill_scratch`` program, with the hostile suite's limits, next to CPU hogs:
    it fails (or times out) every time, never ends as killed, and the next program passes."""
    from pathlib import Path

    from test_sandbox_hostile import LIMITS

    code = (Path(__file__).parent / "hostile" / "fill_scratch.py").read_text()
    problem = Problem(id="load/add", prompt="t", test_type="assert", tests=["assert add(1, 2) == 3"])
    good = "def add(a, b):\n    return a + b\n"
    with Executor(workers=1, limits=LIMITS) as ex, cpu_hogs(2 * (os.cpu_count() or 2)):
        results = ex.run_batch([(problem, c) for _ in range(4) for c in (code, good)])
    assert [r.status in ("fail", "timeout") for r in results[::2]] == [True] * 4, [
        (r.status, r.error_type, r.error_message) for r in results[::2]]
    assert [r.status for r in results[1::2]] == ["pass"] * 4
