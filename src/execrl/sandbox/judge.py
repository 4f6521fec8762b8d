"""Judge a worker's reply: every verdict is decided here, in the executor's process.

``split`` decides what the sandbox runs (probes, recorded expressions, call arguments,
stdin) and what stays here (expected values, the rest of each test). The child reports
values; this module decodes them strictly (``codec``), evaluates the rest of each test on
them under ``guard``'s bounds, and compares outputs. A failure while judging one candidate
is that candidate's ``error``, never the end of a batch.
"""

from __future__ import annotations

import builtins
import json
import re
import signal
from collections import deque
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from execrl.sandbox.codec import DecodeError, decode, loads_record
from execrl.sandbox.guard import run_with_deadline
from execrl.sandbox.result import ExecutionResult
from execrl.sandbox.split import JudgeTest, Prepared

FLOAT_REL_TOL = 1e-5
"""Relative tolerance for floats in ``stdio`` and ``call`` comparisons (as numpy.allclose)."""
FLOAT_ABS_TOL = 1e-8
"""Absolute tolerance for floats in ``stdio`` and ``call`` comparisons."""

TRACE_LIMIT = 2000
_loads = json.loads
REPR_LIMIT = 300
RESULT_STREAM_LIMIT = 64 << 10
"""Captured stdout/stderr kept in an ``ExecutionResult`` (a batch holds every result)."""

# --------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------

def _close(a: float, b: float) -> bool:
    return abs(a - b) <= FLOAT_ABS_TOL + FLOAT_REL_TOL * abs(b)


_INT_TOKEN = re.compile(r"[+-]?\d+")


def _tokens_equal(got: str, expected: str) -> bool:
    """One output token. An integer expected is matched exactly (by value: ``7`` and
    ``7.0`` agree, ``1000000000`` and ``1000000007`` do not); a real float expected is
    matched within the float tolerance."""
    if _INT_TOKEN.fullmatch(expected):
        try:
            return Decimal(got) == int(expected)
        except (InvalidOperation, ValueError):
            return False
    try:
        fe, fg = float(expected), float(got)
    except (ValueError, OverflowError):
        return False
    return fe == fg or _close(fg, fe)


def stdio_equal(got: str, expected: str) -> bool:
    """TACO-style output comparison: exact after strip, then line-wise, then token-wise
    (integers exactly, floats with tolerance)."""
    if got == expected:
        return True
    g, e = got.strip(), expected.strip()
    if g == e:
        return True
    gl = [line.strip() for line in g.splitlines()]
    el = [line.strip() for line in e.splitlines()]
    if gl == el:
        return True
    if len(gl) != len(el):
        gl = [line for line in gl if line]
        el = [line for line in el if line]
        if len(gl) != len(el):
            return False
    for a, b in zip(gl, el):
        if a == b:
            continue
        ta, tb = a.split(), b.split()
        if len(ta) != len(tb):
            return False
        for x, y in zip(ta, tb):
            if x != y and not _tokens_equal(x, y):
                return False
    return True


def _normalize(v: Any) -> Any:
    if type(v) in (list, tuple):
        return [_normalize(x) for x in v]
    if type(v) is dict:
        return {k: _normalize(x) for k, x in v.items()}
    return v


def call_equal(got: Any, expected: Any) -> bool:
    """Call-mode comparison: tuples equal lists; a float expected matches within the
    tolerance, an integer expected only exactly."""
    got, expected = _normalize(got), _normalize(expected)
    return _equal_tol(got, expected)


def _equal_tol(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        if ta in (int, float) and tb in (int, float):
            if a == b:
                return True
            if tb is not float:  # an integer is expected: exact only
                return False
            try:
                return _close(float(a), b)
            except OverflowError:  # an int too large for a float is far from any float
                return False
        return False
    if ta is list and tb is list:
        return len(a) == len(b) and all(_equal_tol(x, y) for x, y in zip(a, b))
    if ta is dict and tb is dict:
        return a.keys() == b.keys() and all(_equal_tol(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - plain values; defensive only
        return False


# --------------------------------------------------------------------------------------
# Judging a worker reply
# --------------------------------------------------------------------------------------

def _short(text: str, limit: int = REPR_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _r(v: Any) -> str:
    try:
        return _short(repr(v))
    except Exception:  # noqa: BLE001 - e.g. int too large to print
        return f"<{type(v).__name__}>"


def _trace(*parts: str) -> str:
    text = "\n".join(p for p in parts if p)
    return text if len(text) <= TRACE_LIMIT else text[: TRACE_LIMIT - 4] + "\n..."


def _outcome(i: int, status: str, error_type: str | None = None, message: str | None = None) -> dict:
    return {"index": i, "status": status, "error_type": error_type, "message": message}


@dataclass
class _Run:
    info: dict
    records: bytes
    stdout: bytes
    stderr: bytes


class _Violation(Exception):
    pass


def _parse_records(run: _Run, n_tests: int) -> dict:
    """Check the record stream's order and tokens; return what it says."""
    out: dict[str, Any] = {"compile": None, "load": None, "tests": {}, "done": False}
    expect = 0
    lines = run.records.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    token = run.info.get("token")
    try:  # one parse for the whole stream; line by line only to report a malformed one
        records = _loads(b"[" + b",".join(lines) + b"]") if lines else []
        if len(records) != len(lines) or any(type(r) is not list or not r or type(r[0]) is not str
                                             for r in records):
            raise ValueError
    except (ValueError, RecursionError):
        records = []
        for line in lines:
            try:
                records.append(loads_record(line))
            except DecodeError as e:
                raise _Violation(str(e)) from e
    for rec in records:
        tag = rec[0]
        if out["done"] or out["compile"] or out["load"]:
            raise _Violation(f"record {tag!r} after the end of the run")
        if tag in ("c", "l"):
            if len(rec) != 4 or expect:
                raise _Violation(f"malformed {tag!r} record")
            out["compile" if tag == "c" else "load"] = [str(x) for x in rec[1:4]]
        elif tag in ("v", "u", "e", "r"):
            if len(rec) < 3 or rec[1] != expect or expect >= n_tests:
                raise _Violation("test records out of order")
            out["tests"][expect] = rec
            expect += 1
        elif tag == "d":
            if len(rec) != 3 or rec[1] != n_tests or expect != n_tests or rec[2] != token:
                raise _Violation("bad completion record")
            out["done"] = True
        else:
            raise _Violation(f"unknown record {tag!r}")
    return out


def _ended_normally(run: _Run) -> bool:
    """What the forker saw (outside the program's reach): the run's process exited by
    itself with status 0, within its limits. An end-of-run record counts only with it: a
    program that writes one and then loops, crashes or exits non-zero did not finish."""
    info = run.info
    return (not info.get("timeout") and not info.get("overflow") and info.get("signal") is None
            and info.get("exit") == 0)


def _death(run: _Run, limits: dict) -> tuple[str, str, str]:
    """Status, error type and message for a run that stopped without finishing."""
    info = run.info
    if info.get("overflow"):
        return "error", "OutputLimitExceeded", "the result channel exceeded its size limit"
    if info.get("timeout"):
        if info.get("wall_killed"):
            return "timeout", "Timeout", f"wall-clock limit of {info.get('wall_limit', '?')}s exceeded"
        if info.get("cpu_killed"):
            return "timeout", "Timeout", (f"CPU-time limit of {limits['timeout_s']}s exceeded by the "
                                          "program's processes together")
        return "timeout", "Timeout", f"CPU-time limit of {limits['timeout_s']}s exceeded"
    sig = info.get("signal")
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = {"SIGSEGV": " (segmentation fault, e.g. C-stack overflow)", "SIGKILL": " (killed)",
                "SIGABRT": " (aborted)", "SIGXFSZ": " (file size limit)"}.get(name, "")
        return "error", name, f"the process was killed by {name}{hint}"
    return "error", "ProcessExited", (
        f"the process exited with code {info.get('exit')} before the tests finished "
        "(no evidence of passing was produced)")


def judge(prepared: Prepared, reply: dict, blobs: list[bytes], limits: dict) -> ExecutionResult:
    """The verdict for one candidate. Whatever goes wrong while judging it (a value that
    defeats a comparison, a bug) is that candidate's ``error``, and every text in the result
    is valid UTF-8 (a lone surrogate in an exception message cannot break a writer)."""
    try:
        result = _judge(prepared, reply, blobs, limits)
    except Exception as e:  # noqa: BLE001 - one candidate must not end a batch
        n = prepared.n_tests
        msg = _short(f"judging this program failed: {type(e).__name__}: {e}")
        result = ExecutionResult("error", 0, n, [_outcome(i, "not_run") for i in range(n)], "JudgeError", msg,
                                 f"JudgeError: {msg}")
    return _encodable(result)


def _clean(text: Any) -> Any:
    if type(text) is not str:
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable(result: ExecutionResult) -> ExecutionResult:
    result.error_type = _clean(result.error_type)
    result.error_message = _clean(result.error_message)
    result.trace = _clean(result.trace)
    result.stdout = _clean(result.stdout)
    result.stderr = _clean(result.stderr)
    for o in result.test_outcomes:
        o["error_type"] = _clean(o["error_type"])
        o["message"] = _clean(o["message"])
    return result


def _judge(prepared: Prepared, reply: dict, blobs: list[bytes], limits: dict) -> ExecutionResult:
    runs = []
    for k, info in enumerate(reply["runs"]):
        rec, out, err = blobs[3 * k: 3 * k + 3]
        runs.append(_Run(info, rec, out, err))
    cpu = sum(r.info["cpu"] for r in runs)
    wall = sum(r.info["wall"] for r in runs)
    if prepared.test_type == "stdio":
        result = _judge_stdio(prepared, runs, limits, reply)
    else:
        result = _judge_single(prepared, runs[0], limits)
    result.cpu_time_s = cpu
    result.wall_time_s = wall
    if runs:
        result.stdout = runs[0].stdout[:RESULT_STREAM_LIMIT].decode("utf-8", "replace")
        result.stdout_truncated = bool(runs[0].info.get("stdout_truncated")) or len(runs[0].stdout) > RESULT_STREAM_LIMIT
        result.stderr = runs[0].stderr[:RESULT_STREAM_LIMIT].decode("utf-8", "replace")
    return result


def _finish(outcomes: list[dict], first: dict | None, n: int) -> ExecutionResult:
    passed = sum(o["status"] == "pass" for o in outcomes)
    if first is None:
        return ExecutionResult("pass", passed, n, outcomes)
    return ExecutionResult(first["status"], passed, n, outcomes, first["error_type"], first["message"],
                           first["trace"])


def _judge_single(prepared: Prepared, run: _Run, limits: dict) -> ExecutionResult:
    n = prepared.n_tests
    try:
        parsed = _parse_records(run, n)
    except _Violation as v:
        outcomes = [_outcome(i, "error", "ProtocolViolation", str(v)) for i in range(n)]
        return ExecutionResult("error", 0, n, outcomes, "ProtocolViolation",
                               f"the sandboxed program interfered with the harness: {v}",
                               f"ProtocolViolation: {v}")
    if parsed["compile"]:
        etype, msg, trace = parsed["compile"]
        return ExecutionResult("syntax_error", 0, n, [_outcome(i, "not_run") for i in range(n)],
                               etype, msg, _trace(trace))
    if parsed["load"]:
        etype, msg, trace = parsed["load"]
        outcomes = [_outcome(i, "not_run") for i in range(n)]
        return ExecutionResult("error", 0, n, outcomes, etype, msg, _trace(trace))
    outcomes, first = [], None
    stopped = None
    for i in range(n):
        rec = parsed["tests"].get(i)
        if rec is None:
            if stopped is None:
                status, etype, msg = _death(run, limits)
                stopped = status
                o = _outcome(i, status, etype, msg)
                if prepared.test_type == "assert":
                    o_trace = _trace(prepared.tests[i].source, f"{etype}: {msg}")
                else:
                    o_trace = _trace(_call_repr(prepared, i), f"{etype}: {msg}")
            else:
                o, o_trace = _outcome(i, "not_run"), ""
        elif prepared.test_type == "assert":
            o, o_trace = _judge_assert(prepared, prepared.tests[i], i, rec)
        else:
            o, o_trace = _judge_call(prepared, i, rec)
        outcomes.append(o)
        if o["status"] != "pass" and first is None:
            first = dict(o, trace=o_trace)
    tampered = next((o for o in outcomes if o["error_type"] == "ProtocolViolation"), None)
    if tampered is not None:
        msg = f"the sandboxed program interfered with the harness: {tampered['message']}"
        return ExecutionResult("error", 0, n, [dict(o, status="error") if o["status"] == "pass" else o
                                               for o in outcomes], "ProtocolViolation", msg,
                               f"ProtocolViolation: {msg}")
    if first is None and not parsed["done"]:
        status, etype, msg = _death(run, limits)
        if status != "timeout":
            etype, msg = "IncompleteRun", "every test passed but the run did not finish cleanly: " + msg
        first = {"status": status if status == "timeout" else "error", "error_type": etype,
                 "message": msg, "trace": f"{etype}: {msg}"}
    return _finish(outcomes, first, n)


def _judge_assert(prepared: Prepared, test: JudgeTest, i: int, rec: list) -> tuple[dict, str]:
    tag = rec[0]
    if (tag == "r") != (test.kind == "r") and tag != "u":
        msg = f"unexpected {tag!r} record for this test"
        return _outcome(i, "error", "ProtocolViolation", msg), _trace(test.source, f"ProtocolViolation: {msg}")
    if tag == "r":
        return _judge_replay(prepared, test, i, rec)
    if tag == "e":
        etype, msg, trace = (str(x) for x in rec[2:5]) if len(rec) >= 5 else ("Error", "", "")
        return _outcome(i, "error", etype, msg), _trace(test.source, trace)
    if tag == "u":
        tname, shown = (str(x) for x in rec[2:4]) if len(rec) >= 4 else ("?", "")
        msg = f"got a {tname} object ({shown}), not a plain value"
        return _outcome(i, "fail", "AssertionError", msg), _trace(test.source, f"AssertionError: {msg}")
    # "v": evaluate the assert here on plain values
    try:
        values = rec[2]
        if type(values) is not list or len(values) != len(test.probes):
            raise DecodeError("wrong number of probe values")
        env = dict(prepared.env)
        for k, v in enumerate(values):
            env[f"_v{k}"] = decode(v)
    except DecodeError as e:
        msg = f"malformed value record: {e}"
        return _outcome(i, "error", "ProtocolViolation", msg), _trace(test.source, msg)
    try:
        if test.timed:
            ok = bool(run_with_deadline(eval, test.judge_code, env))
        else:
            ok = bool(eval(test.judge_code, env))  # noqa: S307 - dataset test code on plain values
    except Exception as e:  # noqa: BLE001 - e.g. len() of an int: an error, as in the original
        msg = _short(f"{e}")
        return _outcome(i, "error", type(e).__name__, msg), _trace(test.source, f"{type(e).__name__}: {msg}")
    if ok:
        return _outcome(i, "pass"), ""
    got = ", ".join(_r(env[f"_v{k}"]) for k in range(len(values)))
    if test.expected_repr is not None and len(values) == 1:
        msg = f"expected {test.expected_repr}, got {got}"
    else:
        msg = "; ".join(f"{p} = {_r(env[f'_v{k}'])}" for k, p in enumerate(test.probes)) or "assertion is false"
    return _outcome(i, "fail", "AssertionError", msg), _trace(test.source, f"AssertionError: {msg}")


# --------------------------------------------------------------------------------------
# Replayed tests (see split.py): the judge runs the test on the values the child recorded
# --------------------------------------------------------------------------------------

class _Mismatch(Exception):
    """The recorded values do not follow the test as the judge runs it."""


class _Opaque:
    """A recorded value that is not a plain value: equal only to itself."""

    def __init__(self, type_name: str, shown: str) -> None:
        self.type_name, self.shown = type_name, shown

    def __repr__(self) -> str:
        return f"<{self.type_name} object: {self.shown}>"

    def __bool__(self) -> bool:  # as in split asserts: an object that is not a plain value fails
        raise AssertionError(f"got a {self.type_name} object ({self.shown}), not a plain value")


class CandidateError(Exception):
    """An exception the candidate's code raised, re-raised in the judge."""


def _reraise(entry: list) -> BaseException:
    etype, msg, trace, base = (str(x) for x in entry[2:6])
    cls = getattr(builtins, base, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(
            cls, (StopIteration, StopAsyncIteration)):
        # SystemExit, KeyboardInterrupt, ... must not stop the judge, and StopIteration must
        # not end an iteration of the judge's early (``all(map(...))`` would be true)
        cls = CandidateError
    try:
        exc = cls(msg)
    except Exception:  # noqa: BLE001 - a builtin class with other constructor arguments
        exc = CandidateError(msg)
    exc.execrl_recorded = (etype, msg, trace)
    return exc


class _Replay:
    def __init__(self, entries: list) -> None:
        self.entries, self.pos, self.group = entries, 0, None
        self.last_group: dict[int, list] = {}

    def _value(self, entry: list) -> Any:
        if type(entry) is not list or len(entry) < 3:
            raise _Mismatch("malformed recorded value")
        tag = entry[1]
        if tag == "v":
            try:
                return decode(entry[2])
            except DecodeError as e:
                raise _Mismatch(f"malformed recorded value: {e}") from None
        if tag == "u" and len(entry) >= 4:
            return _Opaque(_short(str(entry[2]), 80), _short(str(entry[3]), 200))
        if tag == "x" and len(entry) >= 6:
            raise _reraise(entry)
        raise _Mismatch("malformed recorded value")

    def replay(self, k: int) -> Any:
        if self.group is not None:
            queue = self.group.get(k)
            if not queue:
                raise _Mismatch(f"no recorded value for expression {k} of this assert")
            return self._value(queue.popleft())
        if self.pos >= len(self.entries):
            raise _Mismatch("fewer recorded values than the test evaluates")
        entry = self.entries[self.pos]
        self.pos += 1
        if type(entry) is not list or not entry or entry[0] != k:
            raise _Mismatch("recorded values out of order")
        return self._value(entry)

    def enter(self, j: int) -> None:
        if self.pos >= len(self.entries) or self.entries[self.pos] != ["a", j]:
            raise _Mismatch("recorded asserts out of order")
        self.pos += 1
        group: dict[int, deque] = {}
        while self.pos < len(self.entries) and self.entries[self.pos] != ["z", j]:
            entry = self.entries[self.pos]
            if type(entry) is not list or not entry or type(entry[0]) is not int:
                raise _Mismatch("malformed assert record")
            group.setdefault(entry[0], deque()).append(entry)
            self.pos += 1
        if self.pos >= len(self.entries):
            raise _Mismatch("unterminated assert record")
        self.pos += 1
        self.group = group
        self.last_group = {k: list(q) for k, q in group.items()}

    def leave(self, j: int) -> None:
        self.group = None


def _judge_replay(prepared: Prepared, test: JudgeTest, i: int, rec: list) -> tuple[dict, str]:
    entries = rec[2] if len(rec) >= 3 else None
    child_exc = rec[3] if len(rec) >= 4 and type(rec[3]) is list and len(rec[3]) == 3 else None
    if test.judge_code is None or type(entries) is not list:  # a test that does not compile
        etype, msg, trace = (str(x) for x in child_exc) if child_exc else ("ProtocolViolation", "no values", "")
        return _outcome(i, "error", etype, msg), _trace(test.source, trace)
    replay = _Replay(entries)
    env = dict(prepared.env, __execrl_replay__=replay.replay, __execrl_enter__=replay.enter,
               __execrl_leave__=replay.leave)
    try:
        run_with_deadline(exec, test.judge_code, env)
        if replay.pos != len(entries):
            raise _Mismatch("more recorded values than the test evaluates")
        if child_exc is not None:  # the child's run of the test failed outside the recorded expressions
            etype, msg, trace = (str(x) for x in child_exc)
            return _outcome(i, "error", etype, msg), _trace(test.source, trace)
        return _outcome(i, "pass"), ""
    except AssertionError as e:
        j = e.args[0] if e.args and type(e.args[0]) is int else None
        values = [] if j is None else [
            f"{test.sites[k]} = {_short(repr(_shown(entry)), 200)}"
            for k, entries_k in sorted(replay.last_group.items()) for entry in entries_k[:1]]
        msg = _short("assertion is false" + (": " + "; ".join(values) if values else ""), 600)
        return _outcome(i, "fail", "AssertionError", msg), _trace(test.source, f"AssertionError: {msg}")
    except _Mismatch as e:
        if child_exc is not None:
            etype, msg, trace = (str(x) for x in child_exc)
            return _outcome(i, "error", etype, msg), _trace(test.source, trace)
        msg = f"the recorded values do not match the test: {e}"
        return _outcome(i, "error", "ProtocolViolation", msg), _trace(test.source, f"ProtocolViolation: {msg}")
    except Exception as e:  # noqa: BLE001
        recorded = getattr(e, "execrl_recorded", None)
        if recorded is not None:
            etype, msg, trace = recorded
            return _outcome(i, "error", etype, msg), _trace(test.source, trace)
        msg = _short(f"{e}")
        return _outcome(i, "error", type(e).__name__, msg), _trace(test.source, f"{type(e).__name__}: {msg}")


def _shown(entry: list) -> Any:
    try:
        return _Replay([])._value(entry)
    except Exception as e:  # noqa: BLE001 - an exception was recorded
        return e


def _call_repr(prepared: Prepared, i: int) -> str:
    try:
        args = json.loads(prepared.child_spec["args"][i])
        shown = ", ".join(_r(a) for a in args)
    except Exception:  # noqa: BLE001
        shown = "..."
    return _short(f"{prepared.entry_point}({shown})", 600)


def _judge_call(prepared: Prepared, i: int, rec: list) -> tuple[dict, str]:
    tag = rec[0]
    call = _call_repr(prepared, i)
    if tag == "e":
        etype, msg, trace = (str(x) for x in rec[2:5]) if len(rec) >= 5 else ("Error", "", "")
        return _outcome(i, "error", etype, msg), _trace(call, trace)
    expected = prepared.tests[i]
    if tag == "u":
        tname, shown = (str(x) for x in rec[2:4]) if len(rec) >= 4 else ("?", "")
        msg = f"expected {_r(expected)}, got a {tname} object ({shown}), not a plain value"
        return _outcome(i, "fail", "WrongAnswer", msg), _trace(call, msg)
    if tag != "v":
        return _outcome(i, "error", "ProtocolViolation", f"unexpected record {tag!r}"), ""
    try:
        values = rec[2]
        if type(values) is not list or len(values) != 1:
            raise DecodeError("expected one value")
        got = decode(values[0])
    except DecodeError as e:
        return _outcome(i, "error", "ProtocolViolation", str(e)), ""
    if call_equal(got, expected):
        return _outcome(i, "pass"), ""
    msg = f"expected {_r(expected)}, got {_r(got)}"
    return _outcome(i, "fail", "WrongAnswer", msg), _trace(call, msg)


def _judge_stdio(prepared: Prepared, runs: list[_Run], limits: dict, reply: dict) -> ExecutionResult:
    n = prepared.n_tests
    outcomes, first = [], None
    for i in range(n):
        if i >= len(runs):
            if first is None and reply.get("total_wall_exceeded"):  # the candidate's budget ran out
                msg = "the program's wall-clock backstop over all its tests was exceeded"
                outcomes.append(_outcome(i, "timeout", "Timeout", msg))
                first = dict(outcomes[-1], trace=f"Timeout: {msg}")
            elif first is None and reply.get("reply_limit_exceeded"):
                msg = "the outputs of the earlier tests exceeded the size limit of one reply"
                outcomes.append(_outcome(i, "error", "OutputLimitExceeded", msg))
                first = dict(outcomes[-1], trace=f"OutputLimitExceeded: {msg}")
            else:
                outcomes.append(_outcome(i, "not_run"))
            continue
        run = runs[i]
        inp, expected = prepared.tests[i]
        shown_in = _short(inp, 400)
        try:
            parsed = _parse_records(run, 0)
        except _Violation as v:
            o, trace = _outcome(i, "error", "ProtocolViolation", str(v)), f"ProtocolViolation: {v}"
        else:
            if parsed["compile"]:
                etype, msg, trace = parsed["compile"]
                return ExecutionResult("syntax_error", 0, n, [_outcome(k, "not_run") for k in range(n)],
                                       etype, msg, _trace(trace))
            if parsed["load"]:
                etype, msg, ctrace = parsed["load"]
                o, trace = _outcome(i, "error", etype, msg), _trace(f"Input:\n{shown_in}", ctrace)
            elif parsed["done"] and _ended_normally(run):
                got = run.stdout.decode("utf-8", "replace")
                if stdio_equal(got, expected):
                    o, trace = _outcome(i, "pass"), ""
                else:
                    msg = "wrong output"
                    if run.info.get("stdout_truncated"):
                        msg += " (output truncated at the size limit)"
                    o = _outcome(i, "fail", "WrongAnswer", msg)
                    trace = _trace(f"Input:\n{shown_in}", f"Expected output:\n{_short(expected, 500)}",
                                   f"Got:\n{_short(got, 500)}")
            else:
                status, etype, msg = _death(run, limits)
                o, trace = _outcome(i, status, etype, msg), _trace(f"Input:\n{shown_in}", f"{etype}: {msg}")
        outcomes.append(o)
        if o["status"] != "pass" and first is None:
            first = dict(o, trace=trace)
    return _finish(outcomes, first, n)
