"""The host side of judging: every verdict is assembled here, in the executor's process,
from a worker's reply.

In ``assert`` and ``call`` mode the worker's judge process ran the tests (``_judge_loop``) and
reports one outcome per test it ran; what ended a run early (a timeout, a signal, an exit)
comes from the worker's own observation of the run. In ``stdio`` mode each run's output is
compared here. A failure while judging one candidate is that candidate's ``error``, never
the end of a batch.
"""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from execrl.sandbox._judge_compare import FLOAT_ABS_TOL, FLOAT_REL_TOL, _close, _short, _trace, call_equal, stable_text
from execrl.sandbox.codec import DecodeError, loads_record
from execrl.sandbox.result import ExecutionResult
from execrl.sandbox.prepared import Prepared

__all__ = ["FLOAT_ABS_TOL", "FLOAT_REL_TOL", "call_equal", "judge", "stdio_equal"]

_loads = json.loads
RESULT_STREAM_LIMIT = 64 << 10
"""Captured stdout/stderr kept in an ``ExecutionResult`` (a batch holds every result)."""

# --------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------

_INT_TOKEN = re.compile(r"[+-]?[0-9]+")
_TEXT_DIGITS = re.compile(r"\+[0-9]+|-?0[0-9]+")


def _tokens_equal(got: str, expected: str) -> bool:
    """One output token. An integer expected is matched exactly (by value: ``7`` and
    ``7.0`` agree, ``1000000000`` and ``1000000007`` do not), unless it is written as no
    number is (a leading zero or plus: ``00000101``, ``09``), when its digits are the answer
    and only they match; a real float expected is matched within the float tolerance."""
    if _TEXT_DIGITS.fullmatch(expected):
        return got == expected
    if "_" in got:  # ``Decimal("1_0")`` is 10, not what was printed
        return False
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


# --------------------------------------------------------------------------------------
# Judging a worker reply
# --------------------------------------------------------------------------------------

def _r(v: Any) -> str:
    try:
        return _short(repr(v))
    except Exception:  # noqa: BLE001 - e.g. int too large to print
        return f"<{type(v).__name__}>"


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


def _timeout(limits: dict) -> tuple[str, str, str]:
    """Status, error type and message of every timeout. Which limit fires first (the run's
    CPU timer, the worker's sum over the run's processes, ``RLIMIT_CPU``, the judge's timer,
    the wall clock) is a race the machine's load decides, so the text names none of them:
    a program gets the same annotation, and the same refinement prompt, on every run."""
    return "timeout", "Timeout", f"time limit exceeded ({limits['timeout_s']}s of CPU time, or the wall-clock backstop)"


def _death(run: _Run, limits: dict) -> tuple[str, str, str]:
    """Status, error type and message for a run that stopped without finishing."""
    info = run.info
    if info.get("overflow"):
        return "error", "OutputLimitExceeded", "the result channel exceeded its size limit"
    if info.get("timeout"):
        return _timeout(limits)
    sig = info.get("signal")
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = {"SIGSEGV": " (segmentation fault, e.g. C-stack overflow)", "SIGKILL": " (killed)",
                "SIGABRT": " (aborted)", "SIGXFSZ": " (file size limit)"}.get(name, "")
        return "error", name, f"the process was killed by {name}{hint}"
    # 120: the interpreter could not flush sys.stdout or sys.stderr at exit (_child_exit._flush_std_files)
    flush = " (the status of a failed flush of its output at exit)" if info.get("exit") == 120 else ""
    return "error", "ProcessExited", (
        f"the process exited with code {info.get('exit')}{flush} before the tests finished "
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


def _stable(text: Any) -> Any:
    return stable_text(text) if type(text) is str else text


def _encodable(result: ExecutionResult) -> ExecutionResult:
    """Texts as written: valid UTF-8, and (the annotation's texts) free of what differs
    from process to process (``stable_text``), whichever side of the sandbox wrote them."""
    result.error_type = _clean(result.error_type)
    result.error_message = _stable(_clean(result.error_message))
    result.trace = _stable(_clean(result.trace))
    result.stdout = _clean(result.stdout)
    result.stderr = _clean(result.stderr)
    for o in result.test_outcomes:
        o["error_type"] = _clean(o["error_type"])
        o["message"] = _stable(_clean(o["message"]))
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
        result = _judge_single(prepared, runs[0], limits, reply.get("judge"))
    if reply.get("judge"):  # the judge process's work for this candidate is its CPU time too
        cpu += float(reply["judge"].get("cpu", 0.0))
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


def _judge_single(prepared: Prepared, run: _Run, limits: dict, report: dict | None) -> ExecutionResult:
    """``assert`` and ``call`` mode: the judge process's report on the tests, and the run's
    end (as the worker saw it) for the test during which it stopped."""
    n = prepared.n_tests
    report = report or {"died": "crashed"}
    not_run = [_outcome(i, "not_run") for i in range(n)]
    if report.get("compile"):
        etype, msg, trace = (str(x) for x in report["compile"][:3])
        return ExecutionResult("syntax_error", 0, n, not_run, etype, msg, _trace(trace))
    if report.get("load"):
        etype, msg, trace = (str(x) for x in report["load"][:3])
        return ExecutionResult("error", 0, n, not_run, etype, msg, _trace(trace))
    if report.get("judge_error"):
        msg = _short(f"judging this program failed: {report['judge_error']}")
        return ExecutionResult("error", 0, n, not_run, "JudgeError", msg, f"JudgeError: {msg}")
    outcomes, first = [], None
    reported = report.get("tests") or []
    for i in range(min(len(reported), n)):
        status, etype, msg, trace = reported[i]
        o = _outcome(i, status, etype, msg)
        outcomes.append(o)
        if status != "pass" and first is None:
            first = dict(o, trace=trace)
    if report.get("stopped"):  # SystemExit out of a test: the later tests are not run, as in Python
        outcomes += not_run[len(outcomes):]
    if len(outcomes) < n:  # the run or the judge stopped during test len(outcomes)
        i = len(outcomes)
        source = prepared.tests[i] if prepared.test_type == "assert" else _call_repr(prepared, i)
        if report.get("violation"):
            status, etype, msg = "error", "ProtocolViolation", str(report["violation"])
        elif report.get("died") in ("timeout", "wall"):  # its timer, or a test waited on the program (a FIFO it made)
            status, etype, msg = _timeout(limits)
        elif report.get("died"):
            status, etype, msg = "error", "JudgeError", "the judge process died while judging this program"
        else:
            status, etype, msg = _death(run, limits)
        o = _outcome(i, status, etype, msg)
        outcomes.append(o)
        outcomes += not_run[i + 1:]
        if first is None:
            first = dict(o, trace=_trace(source, f"{etype}: {msg}"))
    if report.get("violation"):
        msg = f"the sandboxed program interfered with the harness: {report['violation']}"
        return ExecutionResult("error", 0, n, [dict(o, status="error") if o["status"] == "pass" else o
                                               for o in outcomes], "ProtocolViolation", msg,
                               f"ProtocolViolation: {msg}")
    cpu = float(run.info.get("cpu", 0.0)) + float(report.get("cpu", 0.0))
    if first is None and cpu > float(limits["timeout_s"]):  # the run and the judging of its values together
        status, etype, msg = _timeout(limits)
        first = {"status": status, "error_type": etype, "message": msg, "trace": f"{etype}: {msg}"}
    return _finish(outcomes, first, n)


def _call_repr(prepared: Prepared, i: int) -> str:
    try:
        shown = ", ".join(_r(a) for a in prepared.tests[i][0])
    except Exception:  # noqa: BLE001
        shown = "..."
    return _short(f"{prepared.entry_point}({shown})", 600)


def _judge_stdio(prepared: Prepared, runs: list[_Run], limits: dict, reply: dict) -> ExecutionResult:
    n = prepared.n_tests
    outcomes, first = [], None
    for i in range(n):
        if i >= len(runs):
            if first is None and reply.get("total_wall_exceeded"):  # the candidate's wall-clock backstop
                status, etype, msg = _timeout(limits)
                outcomes.append(_outcome(i, status, etype, msg))
                first = dict(outcomes[-1], trace=f"{etype}: {msg}")
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
                # output past the size limit is not seen, so what follows the kept part (a wrong
                # answer after padding) cannot be judged: such a run never passes
                truncated = bool(run.info.get("stdout_truncated"))
                if not truncated and stdio_equal(got, expected):
                    o, trace = _outcome(i, "pass"), ""
                else:
                    msg = "wrong output"
                    if truncated:
                        msg = (f"output longer than the size limit ({int(limits['max_output_bytes'])} bytes, "
                               f"max_output_bytes): not judged")
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
