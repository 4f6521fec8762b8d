"""The judge process: runs each problem's tests, the program's functions called in its run.

Each sandbox worker forks one judge process (``_judge_link._judge_process``) and runs the
judge's modules in it (the value exchange, ``_exchange._Side``, is shared with the runs'
harness). It holds the tests, expected values included; a run never does.

For every candidate of an ``assert`` or ``call`` problem the controller hands the judge the
program and one end of a socket pair whose other end is the run's. The judge compiles the
program (under the candidate's CPU-time limit) and sends it to the run, which loads it and
reports its global names. The judge then runs the setup code and each test itself, as plain
Python in a fresh namespace, in which every name the program defines is a proxy: calling
``f(xs)`` sends the arguments to the run (copies, with identity kept between them), runs
``f`` there, and brings back the result and the arguments' new content (copy-in,
copy-out). Objects that are not plain values stay in the run as handles whose operations
(attributes, methods, iteration, arithmetic) are sent there too. So a test's expected side
never leaves the judge, and its verdict is the one the test gives in one interpreter, with
these stated exceptions: a comparison between the program's object and a test's value is
never decided by the program's code (``==`` is identity, ordering raises ``TypeError``,
``in`` iterates the object), an object whose class defines ``__bool__`` or ``__len__`` has no
truth value, ``math``/``cmath`` and modules the tests import are the judge's own, and a
builtin the program redefines is the program's only in tests that use no other name of the
program.

All of the judge's work for a candidate (compiling its program, decoding its values,
running the tests on them) runs under the candidate's CPU-time limit (``ITIMER_PROF``, whose
signal ends the process: a C-level loop cannot ignore it) and a memory limit; the
controller then forks a fresh judge and the candidate times out.

The judge's modules: ``_judge_compare`` (comparisons, also the host's), ``_judge_generators``,
``_judge_proxies``, ``_judge_side``, ``_judge_tests`` and this loop.
"""

from __future__ import annotations

import builtins
import dataclasses  # noqa: F401 - held by the judge, so the program's FrozenInstanceError arrives as itself
import json
import sys
from typing import Any

import _socket

from execrl.sandbox._child import _DIGITS_KEY, _INT_DIGITS
from execrl.sandbox._child_program import compile_candidate
from execrl.sandbox._exchange import _FD, _JUDGE_CPU, PeerGone, ProtocolError, _cpu_time, _dumps, _Exchange, _json_loads
from execrl.sandbox._judge_compare import _short, _trace, call_equal, stable_text
from execrl.sandbox._judge_generators import _Names
from execrl.sandbox._judge_proxies import NotPlainValue, Remote, describe
from execrl.sandbox._judge_side import _Gone, _JudgeSide, _SetupClass, _Violation
from execrl.sandbox._judge_tests import _BUILTIN_NAMES, _JUDGE_MODULES, Problem, _PlainCall, _Test

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

JUDGE_CACHE = 1024
"""Problems whose compiled tests the judge keeps (the controller mirrors this LRU)."""
_STARTUP_MODULES = frozenset(name for name in sys.modules if not name.startswith("__"))
"""The modules the judge holds before any problem (the worker's preloaded ones among them)."""




class _InterpreterState:
    """What one candidate's setup and tests may change in the judge's interpreter, which serves
    every candidate of every problem its worker gets: saved when the judge starts, put back
    before each candidate, so that a verdict does not depend on which candidates the same judge
    served before (another problem's ``getcontext().prec = 6``, a test's ``random`` draws).
    What a test may change beyond these (a module attribute it rebinds, the locale, the modules
    it imports) is not put back; the standard-library modules a problem's tests import are
    imported before its candidates' budgets start (``restore``), so no candidate pays for them.
    Plain Python gives each candidate a fresh interpreter; the module-level random generators
    (``random``'s and numpy's legacy one) are seeded from the problem's key instead of from the
    OS, so a test that draws its inputs unseeded (HumanEval/53's ``random.randint``) checks every
    candidate of a problem with the same draws, in every run and on every machine."""

    DECIMAL_FIELDS = ("prec", "rounding", "Emin", "Emax", "capitals", "clamp")

    def __init__(self) -> None:
        import decimal
        import os
        import random  # noqa: F401 - held, so a test's ``import random`` is the module seeded below
        import warnings

        self.recursion = sys.getrecursionlimit()
        self.filters = list(warnings.filters)
        self.path = list(sys.path)
        self.environ = dict(os.environ)
        self.decimal = {name: getattr(decimal.DefaultContext, name) for name in self.DECIMAL_FIELDS}
        self.decimal_traps = dict(decimal.DefaultContext.traps)
        self.numpy_errors: dict | None = None  # numpy's settings as imported (``restore`` imports it)
        self.failed_imports: set[str] = set()  # tried once ahead of the tests; the tests' own import fails again
        self.numpy_print: dict | None = None

    # Standard-library modules whose import prints or opens something: left to the test itself.
    NOT_IMPORTED_AHEAD = frozenset({"this", "antigravity", "__hello__", "__phello__", "idlelib", "turtle", "turtledemo",
                                    "tkinter"})

    def restore(self, key: str, imported: set[str] = frozenset()) -> None:
        """Put the saved state back and seed the generators from ``key``. The modules of the
        standard library and numpy that the problem's setup or tests import (``imported``) are
        imported first, outside the candidate's budget: every candidate's tests then find them
        loaded, so none pays for an import that only the first candidate of a judge would pay
        for (a judge that never serves such a problem never imports them). numpy's generator is
        seeded from the first candidate that imports it on."""
        import decimal
        import importlib
        import os
        import random
        import time
        import warnings
        import zlib

        # First, so that what an import changes (a filter, the decimal context) is put back below.
        for name in sorted(imported):
            top = name.partition(".")[0]
            if name in sys.modules or name in self.failed_imports or top not in sys.stdlib_module_names:
                continue
            if top in self.NOT_IMPORTED_AHEAD or name.endswith("__main__"):
                continue
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - a SystemExit too: the test's own import fails as it would have
                self.failed_imports.add(name)
        sys.setrecursionlimit(self.recursion)
        if warnings.filters != self.filters:
            warnings.filters[:] = self.filters
            warnings._filters_mutated()
        sys.path[:] = self.path
        if os.environ != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        time.tzset()  # a test's own TZ and tzset() undone too (UTC0 reads no file)
        # DefaultContext is what a new context copies (a test may set it, as for new threads)
        for name, value in self.decimal.items():
            setattr(decimal.DefaultContext, name, value)
        for trap, on in self.decimal_traps.items():
            decimal.DefaultContext.traps[trap] = on
        decimal.DefaultContext.clear_flags()
        decimal.setcontext(decimal.Context())
        random.seed(key)
        numpy = sys.modules.get("numpy")
        if numpy is None and "numpy" in imported:
            try:
                import numpy
            except ImportError:
                numpy = None
        if numpy is not None:
            if self.numpy_errors is None:  # first seen here: before any test of this judge changed them
                self.numpy_errors, self.numpy_print = numpy.geterr(), numpy.get_printoptions()
            numpy.random.seed(zlib.crc32(key.encode()))
            numpy.seterr(**self.numpy_errors)
            numpy.set_printoptions(**self.numpy_print)


# --------------------------------------------------------------------------------------
# Running one candidate
# --------------------------------------------------------------------------------------


class _Candidate:
    def __init__(self, problem: Problem, side: _JudgeSide, kinds: dict) -> None:
        self.problem, self.side, self.kinds = problem, side, kinds
        self.excluded: frozenset[str] = frozenset()
        self.failed: int | None = None
        self.got: dict[int, Any] = {}
        self.site_values: dict[int, Any] = {}
        self.modules: dict[str, Any] = {}
        for name, kind in kinds.items():
            if kind.startswith("x:"):
                side.exception_class(name, kind[2:])

    # ---- the namespace --------------------------------------------------------------------
    def namespace(self) -> _Names:
        ns = _Names(__name__="__main__", __builtins__=builtins, __execrl_resolve__=self.resolve,
                    __execrl_enter__=self.enter, __execrl_fail__=self.fail, __execrl_got__=self.note_got,
                    __execrl_site__=self.note_site)
        return ns

    def resolve(self, name: str) -> Any:
        kind = self.kinds.get(name)
        if kind is None or name in self.excluded:
            raise KeyError(name)
        if name in _JUDGE_MODULES:
            return __import__(name)
        side = self.side
        if kind.startswith("m:"):
            module = self.module(kind[2:])
            if module is not None:
                return module
        elif kind == "v":
            return side.request_global(name)
        elif kind.startswith("x:"):
            return side.exceptions[name]
        remote = side.named.get(name)
        if remote is None:
            remote = side.named[name] = Remote(side, {"g": name}, "object")
        return remote

    def module(self, name: str) -> Any:
        """The judge's own copy of a module the program imported: a module of the standard
        library the judge loaded when it started, or one the tests import themselves, under
        that very name, or numpy (any other stays the program's). The judge never imports a
        module because the program names it: importing runs the module's code (a module object
        the program names ``unittest.__main__`` would make the judge run test discovery); numpy
        is the one it imports (outside the candidate's budget, as for a returned array), since
        tests use it unimported (``np.allclose(f(x), expected)``) and the program's own would
        be handed the expected value; of its submodules, only those the tests import."""
        top = name.split(".")[0]
        if top == "numpy":
            if name not in self.modules:
                self.side.numpy()
            # a submodule only where the tests import it (``numpy.conftest`` would load pytest and
            # hypothesis into the judge for good); not by what the judge holds, which other
            # candidates' tests decide
            if name != "numpy" and name not in self.problem.imported:
                return None
        elif name not in self.problem.imported and not (
                name in _STARTUP_MODULES and top in getattr(sys, "stdlib_module_names", ())):
            return None
        if name not in self.modules:
            try:
                self.modules[name] = __import__(name, fromlist=["_"])
            except Exception:  # noqa: BLE001 - not importable here
                self.modules[name] = None
        return self.modules[name]

    def exclude_for(self, names: frozenset[str]) -> None:
        """A builtin the program redefines is its own only where it is the function under
        test: in tests (with the setup code) that use no other name of the program."""
        used = names & self.kinds.keys()
        shadowing = {n for n in used if n in _BUILTIN_NAMES}
        self.excluded = frozenset(shadowing) if used - shadowing - set(_JUDGE_MODULES) else frozenset()

    # ---- assert instrumentation ---------------------------------------------------------
    def enter(self, j: int) -> None:
        for k, _node in self.problem.asserts[j].sites:
            self.site_values.pop(k, None)
        self.got.pop(j, None)

    def fail(self, j: int, *msg: Any) -> None:
        self.failed = j
        raise AssertionError(*msg)

    def note_got(self, j: int, value: Any) -> Any:
        self.got[j] = value
        return value

    def note_site(self, k: int, value: Any) -> Any:
        self.site_values.setdefault(k, value)
        return value

    def assertion_message(self) -> str:
        j = self.failed
        if j is None:
            return "assertion is false"
        info = self.problem.asserts[j]
        if info.expected is not None and j in self.got:
            return f"expected {info.expected}, got {describe(self.got[j])}"
        shown = [f"{info.site_text(i)} = {_short(describe(self.site_values[k]), 200)}"
                 for i, (k, _node) in enumerate(info.sites) if k in self.site_values]
        return _short("assertion is false" + (": " + "; ".join(shown) if shown else ""), 600)

    # ---- running --------------------------------------------------------------------------
    def run_asserts(self) -> dict:
        problem, side = self.problem, self.side
        ns = side.setup_ns = self.namespace()
        if problem.setup is not None:
            if problem.setup.error is not None:
                etype, msg, _ = problem.setup.error
                return {"load": [etype, msg, f"{etype}: {msg}"]}
            self.exclude_for(problem.setup.names)
            _enter_run_dir()
            try:
                exec(problem.setup.code, ns)
            except (_Gone, _Violation) as e:
                return self._ended(e, [])
            except BaseException as e:  # noqa: BLE001 - the setup raised: as at load time
                etype, msg, trace = self._error_fields(e, "")
                return {"load": [etype, msg, trace]}
        outcomes: list[list] = []
        for test in problem.tests:
            outcome = self.run_test(test, ns)
            if outcome is None:  # the run ended (or broke the protocol) during this test
                return self._ended(side.ended, outcomes)
            outcomes.append(outcome)
            if outcome[0] == "stop":  # SystemExit or KeyboardInterrupt out of a test: Python stops there
                outcome[0] = "error"
                return {"tests": outcomes, "stopped": True}
            if side.ended is not None:  # after the test's verdict (its message may have asked the run)
                return self._ended(side.ended, outcomes)
        return {"tests": outcomes}

    def _ended(self, e: BaseException, outcomes: list) -> dict:
        if isinstance(e, _Violation):
            return {"tests": outcomes, "violation": str(e)}
        return {"tests": outcomes, "gone": True}

    def run_test(self, test: _Test, ns: dict) -> list:
        if test.error is not None:
            etype, msg, trace = test.error
            return ["error", etype, msg, _trace(test.source, trace)]
        self.failed = None
        self.exclude_for(test.names)
        plain = test.plain
        try:
            if plain is not None and self.kinds.get(plain.name) == "f" and plain.name not in ns:
                self.run_plain(plain)
            else:
                _enter_run_dir()
                exec(self.problem.test_code(test), ns)
        except (_Gone, _Violation):
            return None
        except AssertionError as e:
            if getattr(e, "execrl_candidate", None) is None:
                msg = self.assertion_message() if not isinstance(e, NotPlainValue) else str(e)
                return ["fail", "AssertionError", msg, _trace(test.source, f"AssertionError: {msg}")]
            etype, msg, trace = self._error_fields(e, test.source)
            return ["error", etype, msg, trace]
        except BaseException as e:  # noqa: BLE001 - as in Python: the test raised
            etype, msg, trace = self._error_fields(e, test.source)
            return ["error" if isinstance(e, Exception) else "stop", etype, msg, trace]
        return ["pass", None, None, ""]

    def run_plain(self, plain: _PlainCall) -> None:
        """``assert name(literal, ...) == literal`` where ``name`` is the program's function:
        what the test's code does (the same message to the run, the same comparison here),
        without running it. Arguments without containers are sent as encoded when the
        problem was prepared (nothing of theirs can come back changed or be named by the
        answer); others are made afresh for this candidate."""
        if plain.make_args is not None:
            got = self.side.request_call(self.resolve(plain.name), plain.make_args(), {})
        else:
            with self.side.lock:
                got = self.side.ask(None, _Exchange(), plain.text)[0]
        self.got[plain.j] = got
        if not (got == plain.expected):
            self.failed = plain.j
            raise AssertionError()

    @staticmethod
    def _error_fields(e: BaseException, source: str) -> tuple[str, str, str]:
        recorded = getattr(e, "execrl_candidate", None)
        if recorded is not None:
            etype, msg, trace = recorded
            return etype, _short(stable_text(msg), 600), _trace(source, stable_text(trace))
        try:
            msg = _short(stable_text(str(e)), 600)
        except BaseException:  # noqa: BLE001 - the program's text of a run that ended
            msg = ""
        etype = type(e).__name__
        return etype, msg, _trace(source, f"{etype}: {msg}")

    def run_calls(self) -> dict:
        problem, side = self.problem, self.side
        name = problem.entry_point
        if name not in self.kinds and "Solution" not in self.kinds:
            msg = f"entry point {name!r} is not defined"
            return {"load": ["NameError", msg, f"NameError: name {name!r} is not defined"]}
        outcomes = []
        for args, expected in problem.calls:
            call = _call_repr(name, args)
            try:
                got = side.request_entry(name, json.loads(json.dumps(args)))
            except (_Gone, _Violation):
                return self._ended(side.ended, outcomes)
            except BaseException as e:  # noqa: BLE001
                etype, msg, trace = self._error_fields(e, "")
                outcomes.append(["error", etype, msg, _trace(call, trace)])
                if not isinstance(e, Exception):  # SystemExit: the tests stop here
                    return {"tests": outcomes, "stopped": True}
                continue
            if isinstance(got, Remote):
                msg = f"expected {describe(expected)}, got {describe(got)}"
                outcomes.append(["fail", "WrongAnswer", msg, _trace(call, msg)])
            elif call_equal(got, expected):
                outcomes.append(["pass", None, None, ""])
            else:
                msg = f"expected {describe(expected)}, got {describe(got)}"
                outcomes.append(["fail", "WrongAnswer", msg, _trace(call, msg)])
            if side.ended is not None:
                return self._ended(side.ended, outcomes)
        return {"tests": outcomes}


def _call_repr(name: str, args: Any) -> str:
    try:
        shown = ", ".join(describe(a) for a in args)
    except Exception:  # noqa: BLE001
        shown = "..."
    return _short(f"{name}({shown})", 600)


# --------------------------------------------------------------------------------------
# The process's loop
# --------------------------------------------------------------------------------------

_STATM: list = []
"""An open ``/proc/self/statm`` and the hard address-space limit (read once: the judge never
lowers it)."""


def _limit(timeout_s: float, memory_mb: int) -> None:
    """This candidate's limits on the judge's work: CPU time (the timer's signal ends the
    process, whatever it is doing) and address space beyond what the judge already uses."""
    import os
    import resource
    import signal

    if not _STATM:
        _STATM[:] = [os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC), resource.getpagesize(),
                     resource.getrlimit(resource.RLIMIT_AS)[1]]
    fd, page, hard = _STATM
    size = int(os.pread(fd, 256, 0).split()[0]) * page
    want = size + int(memory_mb) * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    signal.setitimer(signal.ITIMER_PROF, max(float(timeout_s), 0.001))


def _unlimit() -> None:
    import resource
    import signal

    signal.setitimer(signal.ITIMER_PROF, 0)
    hard = _STATM[2] if _STATM else resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


_RUN_DIR: list = []
"""The run's directory, where the judge has a view of the file system of its own
(``_judge_link._judge_view``): the setup and the tests work in it, sharing its files with the
program as in one interpreter. Entered only for a candidate whose setup or tests run code of
their own (a plain call test touches no file), and left after it."""
_IN_RUN_DIR = [False]


def _enter_run_dir() -> None:
    if _RUN_DIR and not _IN_RUN_DIR[0]:
        import os

        _IN_RUN_DIR[0] = True
        try:
            os.chdir(_RUN_DIR[0])
        except OSError:  # the program removed or closed its directory: the tests find no file there
            pass


def _leave_run_dir() -> None:
    """Back to ``/``: a directory of a scratch mount replaced since is not kept alive."""
    if _IN_RUN_DIR[0]:
        import os

        _IN_RUN_DIR[0] = False
        try:
            os.chdir("/")
        except OSError:
            pass


def judge_candidate(problem: Problem, code: str, fd: int, budget: float | None = None, start: float = 0.0) -> dict:
    """Compile the program, send it to the run, run the tests; the report. ``budget``: the
    candidate's CPU time, the run's and the judge's together (from ``start``, this process's
    CPU time when the candidate began); each side tells the other what it used."""
    compiled, record = compile_candidate(code)
    side = _JudgeSide(fd)
    side.budget, side.cpu_start = budget, start
    try:
        if record is not None:
            return {"compile": [str(x) for x in record[1:4]]}
        import marshal

        try:
            batch = problem.batch_frame if problem.mode == "assert" else b""
            if problem.setup_classes:  # lent before the setup runs: each resolved when the program uses it
                compiled = (compiled, {name: side.lend(_SetupClass(name)) for name in problem.setup_classes})
            side.send_raw(b"P", marshal.dumps(compiled), batch)
            if batch:
                side.ahead.extend(problem.batch_calls)
            first = side.recv()
        except PeerGone:  # the run ended before it loaded the program
            return {"tests": [], "gone": True}
        except ProtocolError as e:
            return {"tests": [], "violation": str(e)[:300]}
        if first[0] == "l" and len(first) >= 4:
            return {"load": [stable_text(str(x))[:2000] for x in first[1:4]]}
        if first[0] != "g" or len(first) != 2 or type(first[1]) is not dict or any(
                type(v) is not str for v in first[1].values()):
            return {"tests": [], "violation": "malformed greeting"}
        digits = first[1].pop(_DIGITS_KEY, None)
        side.kinds = first[1]
        candidate = _Candidate(problem, side, first[1])
        if digits is not None and digits.isdigit() and len(digits) <= 9:
            try:  # what the program set when it loaded, for the tests' ``str()`` of an int
                sys.set_int_max_str_digits(int(digits))
            except ValueError:
                pass
        try:
            report = candidate.run_calls() if problem.mode == "call" else candidate.run_asserts()
        finally:
            sys.set_int_max_str_digits(_INT_DIGITS)
        # a run that answered a batch of every test's call has ended by itself (see
        # ``_ChildSide.serve_batch``): nothing to tell it
        if side.ended is None and not (batch and problem.batch_complete and not side.batch_stopped):
            try:
                side.send(["x"])
            except BaseException:  # noqa: BLE001 - it is gone already
                pass
        return report
    finally:
        import os

        # a thread a test left running that calls the program later finds the run gone, never
        # the next candidate's socket (which may reuse this descriptor's number)
        held = side.lock.acquire(timeout=1.0)  # not forever: such a thread may be waiting on the run
        side.ended = _Gone()
        os.close(fd)
        if held:
            side.lock.release()
        _leave_run_dir()


def judge_main(fd: int, cfg: dict) -> None:
    """Serve the controller: compile programs, judge candidates; one message at a time."""
    import os

    sock = _socket.socket(fileno=fd)
    problems: dict[str, Problem] = {}
    fd_space = _socket.CMSG_SPACE(_FD.size)
    fresh = _InterpreterState()
    while True:
        head, ancillary, _flags, _addr = sock.recvmsg(4, fd_space)
        if not head:
            return
        while len(head) < 4:
            more = sock.recv(4 - len(head))
            if not more:
                return
            head += more
        fds = [_FD.unpack(data[:_FD.size])[0] for _level, _kind, data in ancillary]
        n = int.from_bytes(head, "big")
        parts, got = [], 0
        while got < n:
            chunk = sock.recv(min(n - got, 1 << 20))
            if not chunk:
                return
            parts.append(chunk)
            got += len(chunk)
        msg = _json_loads(b"".join(parts)[1:].decode("ascii"))  # the controller's JSON is ASCII
        kind, reply = b"J", None
        problem = None
        if msg.get("op") == "judge":  # the problem's own preparation is not the candidate's work
            key = msg["key"]
            problem = problems.pop(key, None)
            try:
                if problem is None:
                    problem = Problem(msg["spec"])
                problems[key] = problem
            except Exception as e:  # noqa: BLE001
                problem, reply = None, {"judge_error": f"the tests could not be prepared: {type(e).__name__}: {e}"}
            while len(problems) > cfg.get("cache_size", JUDGE_CACHE):
                problems.pop(next(iter(problems)))
            if problem is not None:
                fresh.restore(key, problem.imported)
        start = _cpu_time()
        try:
            _limit(msg.get("timeout_s", 10.0), msg.get("memory_mb", 1024))
            if msg.get("op") == "compile":
                compiled, record = compile_candidate(msg["code"])
                if record is not None:
                    reply = record
                else:
                    import marshal

                    kind, reply = b"P", marshal.dumps(compiled)
            elif problem is not None:
                reply = judge_candidate(problem, msg["code"], fds.pop(0), float(msg.get("timeout_s", 10.0)), start)
        except Exception as e:  # noqa: BLE001 - this candidate's judging failed, not the judge
            reply = {"judge_error": f"{type(e).__name__}: {e}"[:600]}
        finally:
            _unlimit()
            for extra in fds:
                os.close(extra)
        end = _cpu_time()
        if msg.get("op") == "compile":  # the CPU time first, then the code object or the record
            data = _JUDGE_CPU.pack(end - start, end) + (reply if kind == b"P" else _dumps(reply).encode("ascii"))
        else:
            if isinstance(reply, dict):
                reply["cpu"], reply["total"] = end - start, end
            data = _dumps(reply).encode("ascii")
        sock.sendall((len(data) + 1).to_bytes(4, "big") + kind + data)
