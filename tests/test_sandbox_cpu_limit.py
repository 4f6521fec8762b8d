"""A program over its CPU-time budget times out whatever it does with the limit's signals
(issue #47's first forged pass): the timer fires past the budget and the verdict reads the
CPU time the kernel reports for the run, not how the run ended."""

from __future__ import annotations

import sys

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.differential import plain_verdict

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=1.0)
STDIO = Problem(id="double", prompt="t", test_type="stdio", tests=[{"input": "3\n", "output": "6\n"}])
CALL = Problem(id="double_call", prompt="t", test_type="assert", tests=["assert double(3) == 6"])
SPIN = ("def spin(seconds):\n"
        "    import time\n"
        "    end = time.process_time() + seconds\n"
        "    while time.process_time() < end:\n"
        "        pass\n")

FORGERIES = {
    # the answer first, then a handler that ends the run with status 0 when the limit's signal comes
    "catch_the_signals": (STDIO, "import signal, sys\nprint(2 * int(input()), flush=True)\n"
                                 "for s in (signal.SIGPROF, signal.SIGXCPU):\n"
                                 "    signal.signal(s, lambda *a: sys.exit(0))\n"
                                 "while True:\n    pass\n"),
    # the signals blocked: the run spins past its budget, then ends with the answer and status 0
    "block_the_signals": (STDIO, SPIN + "import signal\n"
                                 "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF, signal.SIGXCPU})\n"
                                 "spin(1.5)\nprint(2 * int(input()))\n"),
    # the timer's signal ignored by a function the tests call: its answer comes after the budget
    "ignore_the_signal_in_a_call": (CALL, SPIN + "import signal\n"
                                          "def double(x):\n    signal.signal(signal.SIGPROF, signal.SIG_IGN)\n"
                                          "    spin(1.5)\n    return 2 * x\n"),
}


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=1, limits=LIMITS) as executor:
        yield executor


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_run_over_its_cpu_budget_times_out_however_it_ends(ex, name):
    problem, program = FORGERIES[name]
    assert plain_verdict(problem, program, LIMITS).status == "timeout"
    r = ex.run(problem, program)
    # (a timeout, whether its CPU time or, on a loaded machine, the wall-clock backstop ended it)
    assert r.status == "timeout", (name, r.status, r.error_type, r.error_message, r.cpu_time_s)


def test_a_run_under_its_budget_passes(ex):
    """The verdict's CPU rule costs a correct program nothing: one that uses most of its
    budget, with handlers on the signals, passes."""
    program = SPIN + ("import signal, sys\nsignal.signal(signal.SIGPROF, lambda *a: sys.exit(0))\n"
                      "spin(0.6)\nprint(2 * int(input()))\n")
    r = ex.run(STDIO, program)
    assert r.status == "pass", (r.status, r.error_type, r.error_message)
