"""A sandbox process killed from outside is not a verdict: the candidate runs once more, and
only a second death of the same candidate is its verdict. Each test kills a process of the
executor (the run, the judge, the forker, the worker) from here while a candidate runs."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import psutil
import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=5, memory_mb=512)
ADD = Problem(id="add", prompt="add", test_type="assert",
              tests=["assert add(1, 2) == 3", "assert add(2, 2) == 4"])
ECHO = Problem(id="echo", prompt="echo", test_type="stdio", tests=[{"input": "3\n", "output": "3\n"}])
GOOD = "def add(a, b):\n    return a + b\n"
SPIN = "import time\n\ndef add(a, b):\n    t = time.process_time()\n    while time.process_time() - t < 0.8:\n        pass\n    return a + b\n"
SPIN_STDIO = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.8:\n    pass\nprint(input())\n"


def _runs(ex: Executor) -> list[int]:
    h = ex._handles[0]
    try:
        return [p.pid for p in psutil.Process(h.forker_pid).children()]
    except psutil.Error:
        return []


class Killer(threading.Thread):
    """Kills ``target(ex)`` (a pid) once a run of the candidate has been going for a while,
    at most ``times`` times, each time in a different run."""

    def __init__(self, ex: Executor, target, times: int = 1) -> None:
        super().__init__(daemon=True)
        self.ex, self.target, self.times = ex, target, times
        self.killed: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        seen: set[int] = set()
        while len(self.killed) < self.times and not self.stop.is_set():
            runs = [p for p in _runs(self.ex) if p not in seen]
            if runs:
                seen.update(runs)
                time.sleep(0.3)  # the candidate is spinning in its run
                if set(_runs(self.ex)) & set(runs):
                    pid = self.target(self.ex, runs[0])
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)
            time.sleep(0.01)


def _run_with_killer(ex, problem, code, target, times=1):
    killer = Killer(ex, target, times)
    killer.start()
    try:
        result = ex.run(problem, code)
    finally:
        killer.stop.set()
        killer.join()
    return result, killer.killed


def _the_run(ex, run_pid):
    return run_pid


def _the_judge(ex, run_pid):
    return ex._handles[0].judge_pid


@pytest.mark.parametrize("problem,code", [(ADD, SPIN), (ECHO, SPIN_STDIO)], ids=["assert", "stdio"])
def test_a_run_killed_from_outside_is_retried(problem, code):
    with Executor(workers=1, limits=LIMITS) as ex:
        result, killed = _run_with_killer(ex, problem, code, _the_run)
        assert len(killed) == 1
        assert result.status == "pass", result
        assert ex.stats()["retries"] == 1 and ex.respawns == 0


def test_a_judge_killed_from_outside_is_retried():
    with Executor(workers=1, limits=LIMITS) as ex:
        assert ex.run(ADD, GOOD).status == "pass"  # the judge process exists from now on
        judge = ex._handles[0].judge_pid
        assert judge is not None and psutil.pid_exists(judge)
        result, killed = _run_with_killer(ex, ADD, SPIN, _the_judge)
        assert killed == [judge]
        assert result.status == "pass", result
        assert ex.stats()["retries"] == 1 and ex.respawns == 0
        assert ex._handles[0].judge_pid != judge  # a fresh judge judged the retry


def test_a_second_death_is_the_verdict():
    with Executor(workers=1, limits=LIMITS) as ex:
        result, killed = _run_with_killer(ex, ADD, SPIN, _the_run, times=2)
        assert len(killed) == 2
        assert result.status == "error" and result.error_type == "SIGKILL", result
        assert ex.stats()["retries"] == 1
        # the next candidate is judged as usual, with nothing carried over
        assert ex.run(ADD, GOOD).status == "pass"
        assert ex.stats()["retries"] == 1


@pytest.mark.parametrize("which", ["worker", "forker"])
def test_a_worker_killed_under_a_candidate_is_a_counted_retry(which):
    with Executor(workers=1, limits=LIMITS) as ex:
        target = (lambda ex, run: ex._handles[0].proc.pid) if which == "worker" else (
            lambda ex, run: ex._handles[0].forker_pid)
        result, killed = _run_with_killer(ex, ADD, SPIN, target)
        assert len(killed) == 1
        assert result.status == "pass", result
        assert ex.stats()["retries"] == 1 and ex.respawns == 1


def test_the_candidates_own_limits_are_verdicts_at_once():
    """Deaths the candidate's own limits cause are never retried: the CPU-time limit (the
    forker's kill, ``RLIMIT_CPU``), the memory limit, the file-size limit (``SIGXFSZ``)."""
    spin_forever = "def add(a, b):\n    while True:\n        pass\n"
    hog = "def add(a, b):\n    return len(bytearray(1 << 32))\n"
    big_file = ("def add(a, b):\n    with open('f', 'wb') as fh:\n        fh.write(b'x' * (64 << 20))\n"
                "    return a + b\n")
    limits = ExecutionLimits(timeout_s=1, memory_mb=512, file_size_mb=1)
    with Executor(workers=1, limits=limits) as ex:
        results = ex.run_batch([(ADD, spin_forever), (ADD, hog), (ADD, big_file)])
        assert [r.status for r in results] == ["timeout", "error", "error"], results
        assert results[1].error_type == "MemoryError"
        assert ex.stats()["retries"] == 0 and ex.respawns == 0


def test_a_program_that_kills_itself_gets_its_verdict_on_the_second_attempt():
    """From outside, a ``SIGKILL`` the program sent itself looks like any other: it is run
    twice, and its second death is its verdict, as in plain Python (killed by SIGKILL)."""
    code = "import os, signal\n\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    with Executor(workers=1, limits=LIMITS) as ex:
        r = ex.run(ADD, code)
        assert r.status == "error" and r.error_type == "SIGKILL", r
        assert ex.stats()["retries"] == 1 and ex.respawns == 0
