"""A program over its CPU-time budget times out whatever it does with the limit's signals (a
forged pass once: a stdio program printed the answer, then caught the CPU-time signal and
exited 0): the timer fires past the budget and the verdict reads the CPU time the kernel
reports for the run, not how the run ended. The kernel keeps two CPU clocks: the one the timer
fires on (the scheduler tick's samples) runs ahead of the one ``wait4`` reports on a loaded
machine, so the verdict reads both."""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time

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


def test_the_timers_clock_has_passed_its_setting_when_a_caught_timer_ends_a_run():
    """What the verdict relies on: the forker reads the clock ``ITIMER_PROF`` fires on from the
    run's zombie, and a run that caught the timer's signal and exited has used at least the
    timer's setting on it, whatever CPU time ``wait4`` then reports."""
    from execrl.sandbox._forker import limit_clock

    setting = 0.3
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        signal.signal(signal.SIGPROF, lambda *a: os._exit(0))
        signal.setitimer(signal.ITIMER_PROF, setting)
        while True:
            pass
    pidfd = os.pidfd_open(pid)
    try:
        select.select([pidfd], [], [])
        on_the_timers_clock = time.clock_gettime(limit_clock(pid))
    finally:
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert on_the_timers_clock >= setting, (on_the_timers_clock, usage.ru_utime + usage.ru_stime)


def _judged_by_a_worker(reported_cpu: float, on_the_timers_clock: float) -> dict:
    """The controller's reading of a forker's answer for a run that exited 0 by itself: its
    processes reported ``reported_cpu`` seconds, its first process's CPU time on the timer's
    clock was ``on_the_timers_clock`` (no forker: the answer is written where it would be)."""
    from execrl.sandbox._controller import Worker
    from execrl.sandbox._exchange import run_stack_bytes
    from execrl.sandbox._forker import _DONE, KILL_NONE

    worker = object.__new__(Worker)  # only what ``run_one`` uses, without isolation or a forker
    worker.workdir, worker.uid, worker.nproc_base = None, None, 0
    worker.run_stack = run_stack_bytes()
    for name in ("res_fd", "out_fd", "err_fd", "in_fd", "job_fd"):
        setattr(worker, name, os.memfd_create(name))
    worker.cmd_sock, forker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    worker.done_fd, done_w = os.pipe()
    try:
        os.write(done_w, _DONE.pack(0, KILL_NONE, False, reported_cpu, 0.0, 0, 0, 2.0, on_the_timers_clock))
        info, _ = worker.run_one({"child": b""}, "print(6)", None, LIMITS.worker_limits(), "3\n")
    finally:
        for fd in (worker.res_fd, worker.out_fd, worker.err_fd, worker.in_fd, worker.job_fd, worker.done_fd, done_w):
            os.close(fd)
        worker.cmd_sock.close()
        forker_end.close()
    return info


@pytest.mark.parametrize("reported_cpu, on_the_timers_clock, timed_out", [
    # measured under load: the timer (1.07 s) ended the run, wait4 reported 0.98 s
    (0.9802, 1.0756, True),
    (1.01, 0.99, True),  # either clock past the budget is enough
    (0.98, 0.99, False),  # under the budget on both: a run that ended by itself in time
])
def test_a_run_whose_timer_fired_times_out_whatever_cpu_time_wait4_reports(reported_cpu, on_the_timers_clock,
                                                                             timed_out):
    info = _judged_by_a_worker(reported_cpu, on_the_timers_clock)
    assert info["exit"] == 0 and info["signal"] is None
    assert info["timeout"] is timed_out, info
