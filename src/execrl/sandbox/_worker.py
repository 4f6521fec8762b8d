"""Sandbox worker: a long-lived process pair that forks one child per candidate run.

:class:`execrl.sandbox.Executor` starts it in a fresh ``python -s -P`` from code objects it
compiled (see ``executor._BOOT``): the worker's modules (``WORKER_MODULES`` there: the value
exchange, isolation, the child side, the controller and this entry point), with the
configuration in the same file. It deliberately imports nothing else from the package: the
worker is the template every candidate is forked from, so it is kept small (fork cost on the
target machines grows by ~50 us per MB of private memory) and it never holds anything a
candidate must not see. The process the executor talks to (the controller,
``_controller.Worker``) forks a *forker* once, which forks the runs, and a judge process,
which runs the judge's modules (``JUDGE_MODULES``; the worker keeps their code marshalled).
No run ever holds an expected value: the judge process (a uid of its own) holds the tests
and runs them, calling the program's functions in its run; stdio runs' outputs are compared
by the executor (``execrl.sandbox.host_judge``).
"""

from __future__ import annotations

import builtins
import gc
import json
import marshal
import os
import signal
import sys

import _socket

from execrl.sandbox._child import SOCK_FD, _run_served, _run_stdio, _served_limit, _stack_depth
from execrl.sandbox._child_exit import _WARMING, _flush, _WarmDone
from execrl.sandbox._child_program import compile_candidate
from execrl.sandbox._controller import Worker
from execrl.sandbox._files import _pwrite_all, _read_exact
from execrl.sandbox._exchange import _LEN, RESULT_FD, _Side, machine_free_process
from execrl.sandbox._isolation import PR_SET_PDEATHSIG, _libc, _prctl

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

# --------------------------------------------------------------------------------------
# Warm-up (in the controller, before the forker is forked)
# --------------------------------------------------------------------------------------

_WARM_PROGRAM = ("import math\n"
                 "class Solution:\n"
                 "    def f(self, x, y=0):\n"
                 "        return f(x, y)\n"
                 "def f(x, y=0):\n"
                 "    if x < 0:\n"
                 "        raise ValueError('negative')\n"
                 "    print(x, end='')\n"
                 "    return [x + y, (x, 'a', b'b'), {'k': x * 1.5, 2: {x}}, None, True, math.pi, 1 << 70]\n")
_WARM_CALLS = ([["b", "f", [["c", {"g": "f"}, [3], []], ["c", {"g": "f"}, [4], []]]],
                ["c", {"g": "f"}, [1], []], ["c", {"g": "f"}, [2, {"l": [3, 4]}], [["y", {"t": ["a", 1.5]}]]],
                ["c", {"g": "f"}, [-1], []], ["n", "LIMIT"], ["a", {"g": "Solution"}, "f"],
                ["o", "len", [{"g": "TABLE"}]], ["o", "iter", [{"l": [1, 2]}]], ["k", "f", [{"d": [[1, {"s": [2]}]]}]]])


_WARM_BATCH = (["b", "g", [["c", {"g": "g"}, [1], []], ["c", {"g": "g"}, [2], []], ["c", {"g": "g"}, [3], []]], True],)
"""A warm-up round: a batch of every test's call, scalars in and out (most runs)."""
_WARM_BATCH_LISTS = (["b", "h", [["c", {"g": "h"}, [{"l": [3, 1, 2]}, 2], []], ["c", {"g": "h"}, [{"l": ["b", "a"]}, 1], []],
                                 ["c", {"g": "h"}, [{"l": [[1, 2], [0]]}, 0], []]], True],)
"""A warm-up round: a batch whose calls pass lists and get lists back (most of MBPP's)."""
_WARM_ROUNDS = (_WARM_CALLS, _WARM_BATCH, _WARM_BATCH_LISTS)


def warm_up(worker: Worker, rounds: int = 16) -> None:
    """Run the child-side harness on a benign program a few times, here.

    Every candidate is forked from this process's memory. Running the harness once here
    does its one-time work (quickening its bytecode, filling the type and method caches,
    creating the allocator pools it needs) before the fork instead of again in every child,
    where each page it writes costs a copy-on-write fault. Results go to /dev/null; the
    judge's requests are written ahead into a socket pair, and its answers read afterwards.
    """
    saved = {name: getattr(sys, name) for name in ("stdout", "stderr")}
    saved_main = sys.modules.get("__main__")
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, RESULT_FD, inheritable=False)
    program = _WARM_PROGRAM + ("LIMIT = 3\nTABLE = [1, 2]\ndef g(x):\n    return x + 1\n"
                               "def h(xs, k):\n    return sorted(xs)[:k] if k else len(xs) > 1\n")
    _WARMING[0] = True
    try:
        for i in range(rounds):
            compiled, _ = compile_candidate(program)
            judge, run = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                feeder = _Side(judge.fileno())
                feeder.send_raw(b"P", marshal.dumps(compiled))
                for request in _WARM_ROUNDS[i % len(_WARM_ROUNDS)]:
                    feeder.send(request)
                feeder.send(["x"])
                # as a run does it: its socket at SOCK_FD, the run's own class (what attribute
                # and method lookups specialize on here is then what every run finds; a
                # subclass made them miss there), a recursion limit and a CPU-time budget (the
                # reports' code runs too, never reaching a report)
                os.dup2(run.fileno(), SOCK_FD, inheritable=False)
                try:
                    _run_served(program, "0" * 24, None, _served_limit(_stack_depth(sys._getframe()) + 1), 1e9)
                except _WarmDone:
                    pass
                finally:
                    os.close(SOCK_FD)
                judge.setblocking(False)
                try:
                    while judge.recv(1 << 16):
                        pass
                except BlockingIOError:
                    pass
            finally:
                judge.close()
                run.close()
            _run_stdio(_WARM_PROGRAM, compiled, "0" * 24)
            marshal.loads(marshal.dumps(({"mode": "assert"}, _WARM_PROGRAM, compiled)))
    finally:
        _WARMING[0] = False
        _flush()  # nothing of the warm-up may stay buffered for a child to inherit
        os.close(RESULT_FD)
        os.close(sink)
        sys.modules["__main__"] = saved_main
        for name, stream in saved.items():
            setattr(sys, name, stream)


def _send(fd: int, header: dict, blobs: list[bytes] = ()) -> None:
    head = json.dumps(header).encode()
    data = b"".join([_LEN.pack(len(head)), head, *blobs])
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main() -> None:
    # The configuration came in the boot file, not on the command line: a candidate's
    # sys.argv and /proc/self/cmdline must look like those of a plain program.
    cfg = json.loads(globals().pop("EXECRL_CONFIG"))
    judge_code = globals().pop("EXECRL_JUDGE")  # marshalled: loaded by the judge process only
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    machine_free_process()  # before the preloads: numpy's BLAS sizes its threads at import
    for name in cfg.get("preload", ()):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - an optional module that is not installed
            pass
    try:
        worker = Worker(cfg)
        worker.judge_code_fd = os.memfd_create("execrl-judge-code", os.MFD_CLOEXEC)
        _pwrite_all(worker.judge_code_fd, judge_code)
        del judge_code  # freed before the forker is forked (and trimmed below)
        warm_up(worker)
        # Freeze before forking the forker: every candidate is forked from its memory, and
        # frozen objects are never written by the GC (no copy-on-write of their pages).
        gc.collect()
        gc.freeze()
        try:  # hand freed start-up memory back: fewer pages to copy-protect at every fork
            _libc.malloc_trim(0)
        except AttributeError:  # not glibc
            pass
        worker.start_judge()
        worker.start_forker(close=(in_fd, out_fd, worker.judge_sock.fileno(), worker.judge_code_fd))
        problem = worker.self_test()
    except Exception as e:  # noqa: BLE001
        _send(out_fd, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    if problem is not None:
        worker.stop_forker()
        _send(out_fd, {"ready": False, "error": problem, "isolation": worker.report})
        return
    _send(out_fd, {"ready": True, "isolation": worker.report, "pid": os.getpid(), "forker_pid": worker.forker_pid})
    try:
        _serve(worker, in_fd, out_fd)
    finally:
        worker.stop_forker()


def _serve(worker: Worker, in_fd: int, out_fd: int) -> None:
    while True:
        try:
            (n,) = _LEN.unpack(_read_exact(in_fd, 4))
            msg = json.loads(_read_exact(in_fd, n))
        except EOFError:
            return
        if msg.get("op") == "exit":
            return
        try:
            header, blobs = worker.job(msg)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            header, blobs = {"worker_error": f"{type(e).__name__}: {e}"}, []
        _send(out_fd, header, blobs)
