"""A program over its CPU budget is a timeout whatever it does about the signals that enforce the
budget: the verdict reads the CPU time the run used (measured outside the program's reach), not
how the program ended."""

from __future__ import annotations

import sys

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=1.0)

# Prints the right answer, then spins until a limit's signal arrives and ends cleanly from its handler.
CATCHES_THE_LIMIT = """
import os, signal, sys
print(2 * int(input()), flush=True)
def leave(*_):
    {leave}
for name in ("SIGPROF", "SIGXCPU", "SIGVTALRM", "SIGALRM"):
    signal.signal(getattr(signal, name), leave)
while True:
    pass
"""
# Disarms the CPU timer instead, then burns past the budget and exits 0 between the worker's checks.
DISARMS_THE_TIMER = """
import signal, time
print(2 * int(input()), flush=True)
signal.setitimer(signal.ITIMER_PROF, 0)
signal.signal(signal.SIGXCPU, signal.SIG_IGN)
end = time.process_time() + 1.05
while time.process_time() < end:
    pass
"""
UNDER_BUDGET = "print(2 * int(input()))\n"


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=1, limits=LIMITS) as ex:
        yield ex


def stdio(n_tests: int = 1) -> Problem:
    tests = [{"input": f"{i}\n", "output": f"{2 * i}\n"} for i in range(1, n_tests + 1)]
    return Problem(id="forged/stdio", prompt="double it", test_type="stdio", tests=tests)


@pytest.mark.parametrize("leave", ["sys.exit(0)", "os._exit(0)"])
def test_a_stdio_program_that_catches_its_cpu_limit_times_out(executor, leave):
    program = CATCHES_THE_LIMIT.format(leave=leave)
    caught, honest = executor.run_batch([(stdio(), program), (stdio(), UNDER_BUDGET)])
    assert (caught.status, caught.error_type) == ("timeout", "Timeout"), (caught.status, caught.error_message)
    assert caught.cpu_time_s > LIMITS.timeout_s
    # the same worker judges the next program as before
    assert honest.status == "pass"


def test_a_stdio_program_that_disarms_its_cpu_timer_times_out(executor):
    (disarmed,) = executor.run_batch([(stdio(2), DISARMS_THE_TIMER)])
    assert disarmed.status == "timeout", (disarmed.status, disarmed.error_type, disarmed.error_message)
    assert disarmed.test_outcomes[0]["status"] == "timeout"
    assert disarmed.test_outcomes[1]["status"] == "not_run"


def test_an_assert_program_that_catches_its_cpu_limit_times_out(executor):
    program = ("import os, signal\n"
               "def leave(*_):\n    os._exit(0)\n"
               "for name in ('SIGPROF', 'SIGXCPU'):\n    signal.signal(getattr(signal, name), leave)\n"
               "def f(x):\n    while True:\n        pass\n")  # fmt: skip
    problem = Problem(id="forged/assert", prompt="f", test_type="assert", tests=["assert f(1) == 2"], entry_point="f")
    (caught,) = executor.run_batch([(problem, program)])
    assert caught.status == "timeout", (caught.status, caught.error_type, caught.error_message)
