"""Split problems into what the sandbox runs and what the judge keeps, and judge the result.

Expected values never leave this process. For an ``assert`` test such as
``assert math.isclose(area(2), 12.56, rel_tol=1e-3)`` the sub-expressions that depend on
the candidate (``area(2)``: a *probe*) are sent to the sandbox; the child returns each
probe's value as a strictly-typed plain value (``codec``); the judge then evaluates the
rest of the assert (``math.isclose(<value>, 12.56, rel_tol=1e-3)``) here, on plain data,
with a restricted set of builtins. A rigged ``__eq__``, a patched ``isinstance``, or code
that walks the stack cannot change the comparison, and the child never holds the expected
value, so it cannot look it up.

Tests that cannot be split (several statements, a comparison inside a comprehension or a
lambda, ...) run in the child as an in-child assert, with ``==`` replaced by a strict
plain-value comparison, and count as passed only when the child reports completion with
the per-run token (see ``docs/sandbox.md`` for the weaker guarantee of this path).
"""

from __future__ import annotations

import ast
import builtins
import cmath
import hashlib
import json
import math
import re
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from execrl.problems import Problem
from execrl.sandbox.codec import DecodeError, decode, loads_record
from execrl.sandbox.result import ExecutionResult

SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "chr", "complex", "dict",
    "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "oct", "ord",
    "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple",
    "type", "zip", "True", "False", "None", "Exception", "ValueError", "TypeError",
)
SAFE_MODULES = {"math": math, "cmath": cmath}
SAFE_NAMES = frozenset(SAFE_BUILTIN_NAMES) | frozenset(SAFE_MODULES)
_JUDGE_BUILTINS = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES if hasattr(builtins, name)}

FLOAT_REL_TOL = 1e-5
"""Relative tolerance for floats in ``stdio`` and ``call`` comparisons (as numpy.allclose)."""
FLOAT_ABS_TOL = 1e-8
"""Absolute tolerance for floats in ``stdio`` and ``call`` comparisons."""

TRACE_LIMIT = 2000
_loads = json.loads
REPR_LIMIT = 300

_STRUCTURAL = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.IfExp, ast.Tuple, ast.List,
               ast.Set, ast.Dict, ast.Subscript, ast.Slice, ast.JoinedStr, ast.FormattedValue,
               ast.Starred)
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _NotSplittable(Exception):
    pass


# --------------------------------------------------------------------------------------
# Preparation
# --------------------------------------------------------------------------------------

@dataclass
class JudgeTest:
    source: str
    kind: str  # "p": probes judged here; "x": in-child assert
    judge_code: Any = None
    probes: list[str] = field(default_factory=list)
    expected_node: Any = None
    judge_tree: Any = None
    _expected_repr: str | None = field(default=None, repr=False)

    @property
    def expected_repr(self) -> str | None:
        """The expected side of ``assert probe == expected``, for messages. Made on first
        use: unparsing a large literal costs more than judging, and most tests pass."""
        if self._expected_repr is None and self.expected_node is not None:
            self._expected_repr = _short(ast.unparse(self.expected_node))
        return self._expected_repr


@dataclass
class Prepared:
    key: str
    test_type: str
    child_spec: dict[str, Any]
    tests: list[Any]
    entry_point: str | None = None
    judge_names: frozenset[str] = frozenset()
    """Safe builtin names the judge evaluates itself (a program that redefines one of them
    gets a variant where that name is evaluated in the sandbox, as Python would)."""

    @property
    def n_tests(self) -> int:
        return len(self.tests)


def problem_key(problem: Problem) -> str:
    payload = json.dumps([problem.test_type, problem.tests, problem.setup_code, problem.entry_point],
                         sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# CPython 3.11's AST <-> object conversion keeps its recursion depth in interpreter-wide state,
# so ast.parse / compile(ast) in two threads at once can fail with "AST constructor recursion
# depth mismatch" (python/cpython#106905). The executor prepares problems from one thread per
# worker: preparation is serialized.
_AST_LOCK = threading.RLock()


def prepare(problem: Problem, shadowed: frozenset[str] = frozenset()) -> Prepared:
    with _AST_LOCK:
        return _prepare(problem, shadowed)


def _prepare(problem: Problem, shadowed: frozenset[str]) -> Prepared:
    key = problem_key(problem)
    if problem.test_type == "assert":
        safe = SAFE_NAMES - shadowed
        tests, child_tests = [], []
        for src in problem.tests:
            judge_test, child_test = _prepare_assert(src, safe)
            tests.append(judge_test)
            child_tests.append(child_test)
        spec = {"mode": "assert", "tests": child_tests, "setup": problem.setup_code or None}
        if shadowed:
            key += "|" + ",".join(sorted(shadowed))
        names = frozenset(n for t in tests if t.judge_code is not None for n in _code_names(t.judge_code)
                          if n in SAFE_NAMES)
        return Prepared(key, "assert", spec, tests, judge_names=names)
    if problem.test_type == "call":
        args = [json.dumps(t["args"]) for t in problem.tests]
        spec = {"mode": "call", "entry_point": problem.entry_point, "args": args}
        return Prepared(key, "call", spec, [t["expected"] for t in problem.tests], problem.entry_point)
    if problem.test_type == "stdio":
        spec = {"mode": "stdio", "inputs": [t["input"] for t in problem.tests]}
        return Prepared(key, "stdio", spec, [(t["input"], t["output"]) for t in problem.tests])
    raise ValueError(f"unknown test_type {problem.test_type!r}")


def _code_names(code: Any) -> set[str]:
    """Names a code object (and the lambdas/comprehensions in it) looks up or reads as
    attributes: a superset of the names the judge evaluates, without walking the tree."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _prepare_assert(src: str, safe: frozenset[str]) -> tuple[JudgeTest, dict]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return JudgeTest(src, "x"), {"kind": "x", "source": src}
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
        try:
            return _split_assert(src, tree.body[0].test, safe)
        except _NotSplittable:
            pass
    rewritten = _StrictEq().visit(tree)
    ast.fix_missing_locations(rewritten)
    return JudgeTest(src, "x"), {"kind": "x", "source": ast.unparse(rewritten)}


def _unsafe(node: ast.AST, safe: frozenset[str] = SAFE_NAMES) -> bool:
    return any(isinstance(n, ast.Name) and n.id not in safe for n in ast.walk(node))


def _contains_compare(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Compare) for n in ast.walk(node))


def _unsafe_ids(root: ast.AST, safe: frozenset[str]) -> set[int]:
    """ids of the nodes of ``root`` whose subtree uses a name outside ``safe``: one pass,
    instead of walking each subtree again at every level of the split."""
    parent: dict[int, ast.AST] = {}
    names = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            if node.id not in safe:
                names.append(node)
            continue
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
            stack.append(child)
    unsafe: set[int] = set()
    for node in names:
        while node is not None and id(node) not in unsafe:
            unsafe.add(id(node))
            node = parent.get(id(node))
    return unsafe


class _Splitter:
    def __init__(self, safe: frozenset[str], root: ast.AST) -> None:
        self.safe = safe
        self.probes: list[tuple[str, bool]] = []
        self._unsafe = _unsafe_ids(root, safe)  # of the original tree (visit asks before rewriting)

    def unsafe(self, node: ast.AST) -> bool:
        return id(node) in self._unsafe

    def probe(self, node: ast.AST, materialize: bool) -> ast.Name:
        if _contains_compare(node):
            raise _NotSplittable  # a comparison the candidate could rig would run in the child
        self.probes.append((ast.unparse(node), materialize))
        return ast.copy_location(ast.Name(id=f"_v{len(self.probes) - 1}", ctx=ast.Load()), node)

    def visit(self, node: ast.AST, in_safe_call: bool = False) -> ast.AST:
        unsafe = self.unsafe
        if not unsafe(node):
            return node
        if isinstance(node, ast.Call) and not unsafe(node.func):
            bare = [a for a in node.args
                    if isinstance(a, (ast.Name, ast.Attribute, ast.Lambda)) and unsafe(a)]
            if bare:  # map(f, xs), sorted(xs, key=f): the function itself can't be shipped
                return self.probe(node, materialize=in_safe_call)
            node.args = [self.visit(a, True) for a in node.args]
            for kw in node.keywords:
                if isinstance(kw.value, (ast.Name, ast.Attribute, ast.Lambda)) and unsafe(kw.value):
                    return self.probe(node, materialize=in_safe_call)
                kw.value = self.visit(kw.value, True)
            return node
        if isinstance(node, _STRUCTURAL):
            for name, value in ast.iter_fields(node):
                if isinstance(value, ast.AST):
                    setattr(node, name, self.visit(value))
                elif isinstance(value, list):
                    setattr(node, name, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
            return node
        if isinstance(node, _SCOPES) and not in_safe_call:
            raise _NotSplittable
        return self.probe(node, materialize=in_safe_call)


def _split_assert(src: str, test: ast.expr, safe: frozenset[str]) -> tuple[JudgeTest, dict]:
    splitter = _Splitter(safe, test)
    body = splitter.visit(test)
    try:  # the only new nodes (the probes' names) carry their locations already
        code = compile(ast.Expression(body=body), "<judge>", "eval", dont_inherit=True)
    except (TypeError, ValueError):
        ast.fix_missing_locations(body)
        code = compile(ast.Expression(body=body), "<judge>", "eval", dont_inherit=True)
    expected_node = None
    if (isinstance(body, ast.Compare) and len(body.ops) == 1 and isinstance(body.ops[0], ast.Eq)
            and isinstance(body.left, ast.Name) and body.left.id.startswith("_v")
            and not _unsafe_names_in_judge(body.comparators[0])):
        expected_node = body.comparators[0]
    probes = [p for p, _ in splitter.probes]
    judge = JudgeTest(src, "p", code, probes, expected_node, body)
    return judge, {"kind": "p", "probes": probes, "materialize": [m for _, m in splitter.probes]}


def defined_names(code: str, names: frozenset[str]) -> frozenset[str]:
    """Which of ``names`` the program (re)defines at any level (approximate, textual)."""
    found = set()
    for name in names:
        if name not in code:
            continue
        n = re.escape(name)
        if re.search(rf"(^|\n)\s*(async\s+def|def|class)\s+{n}\b|\b{n}\s*(:[^=\n]*)?=(?!=)|"
                     rf"\bimport\b[^\n]*\b{n}\b|\bfor\s+[^\n]*\b{n}\b[^\n]*\bin\b|\bglobal\b[^\n]*\b{n}\b",
                     code):
            found.add(name)
    return frozenset(found)


def _unsafe_names_in_judge(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id.startswith("_v") for n in ast.walk(node))


class _StrictEq(ast.NodeTransformer):
    """In-child asserts: ``a == b`` becomes a plain-value comparison."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            call = ast.Call(func=ast.Name(id="__execrl_eq__", ctx=ast.Load()),
                            args=[node.left, node.comparators[0]], keywords=[])
            return call if isinstance(node.ops[0], ast.Eq) else ast.UnaryOp(op=ast.Not(), operand=call)
        return node


# --------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------

def _close(a: float, b: float) -> bool:
    return abs(a - b) <= FLOAT_ABS_TOL + FLOAT_REL_TOL * abs(b)


def _as_float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def stdio_equal(got: str, expected: str) -> bool:
    """TACO-style output comparison: exact after strip, then line-wise, then token-wise
    with float tolerance."""
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
            if x == y:
                continue
            fx, fy = _as_float(x), _as_float(y)
            if fx is None or fy is None or not _close(fx, fy):
                return False
    return True


def _normalize(v: Any) -> Any:
    if type(v) in (list, tuple):
        return [_normalize(x) for x in v]
    if type(v) is dict:
        return {k: _normalize(x) for k, x in v.items()}
    return v


def call_equal(got: Any, expected: Any) -> bool:
    """Call-mode comparison: tuples equal lists, floats within tolerance."""
    got, expected = _normalize(got), _normalize(expected)
    return _equal_tol(got, expected)


def _equal_tol(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        if ta in (int, float) and tb in (int, float) and ta is not bool and tb is not bool:
            return a == b or _close(float(a), float(b))
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
        elif tag in ("v", "u", "e", "o"):
            if len(rec) < 3 or rec[1] != expect or expect >= n_tests:
                raise _Violation("test records out of order")
            if tag == "o" and (len(rec) != 3 or rec[2] != token):
                raise _Violation("in-child test record without the run token")
            out["tests"][expect] = rec
            expect += 1
        elif tag == "d":
            if len(rec) != 3 or rec[1] != n_tests or expect != n_tests or rec[2] != token:
                raise _Violation("bad completion record")
            out["done"] = True
        else:
            raise _Violation(f"unknown record {tag!r}")
    return out


def _death(run: _Run, limits: dict) -> tuple[str, str, str]:
    """Status, error type and message for a run that stopped without finishing."""
    info = run.info
    if info.get("overflow"):
        return "error", "OutputLimitExceeded", "the result channel exceeded its size limit"
    if info.get("timeout"):
        if info.get("wall_killed"):
            return "timeout", "Timeout", f"wall-clock limit of {info.get('wall_limit', '?')}s exceeded"
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
    runs = []
    for k, info in enumerate(reply["runs"]):
        rec, out, err = blobs[3 * k: 3 * k + 3]
        runs.append(_Run(info, rec, out, err))
    cpu = sum(r.info["cpu"] for r in runs)
    wall = sum(r.info["wall"] for r in runs)
    if prepared.test_type == "stdio":
        result = _judge_stdio(prepared, runs, limits)
    else:
        result = _judge_single(prepared, runs[0], limits)
    result.cpu_time_s = cpu
    result.wall_time_s = wall
    if runs:
        result.stdout = runs[0].stdout.decode("utf-8", "replace")
        result.stderr = runs[0].stderr.decode("utf-8", "replace")
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
            o, o_trace = _judge_assert(prepared.tests[i], i, rec)
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


def _judge_assert(test: JudgeTest, i: int, rec: list) -> tuple[dict, str]:
    tag = rec[0]
    if tag == "o" or test.kind == "x":
        if tag == "o" and test.kind == "x":
            return _outcome(i, "pass"), ""
        if tag != "e":  # a completion record for a test judged here, or a value for an in-child test
            msg = f"unexpected {tag!r} record for this test"
            return _outcome(i, "error", "ProtocolViolation", msg), _trace(test.source, f"ProtocolViolation: {msg}")
    if tag == "e":
        etype, msg, trace = (str(x) for x in rec[2:5]) if len(rec) >= 5 else ("Error", "", "")
        status = "fail" if (test.kind == "x" and etype == "AssertionError") else "error"
        return _outcome(i, status, etype, msg), _trace(test.source, trace)
    if tag == "u":
        tname, shown = (str(x) for x in rec[2:4]) if len(rec) >= 4 else ("?", "")
        msg = f"got a {tname} object ({shown}), not a plain value"
        return _outcome(i, "fail", "AssertionError", msg), _trace(test.source, f"AssertionError: {msg}")
    # "v": evaluate the assert here on plain values
    try:
        values = rec[2]
        if type(values) is not list or len(values) != len(test.probes) or test.kind != "p":
            raise DecodeError("wrong number of probe values")
        env = {"__builtins__": _JUDGE_BUILTINS, **SAFE_MODULES}
        for k, v in enumerate(values):
            env[f"_v{k}"] = decode(v)
    except DecodeError as e:
        msg = f"malformed value record: {e}"
        return _outcome(i, "error", "ProtocolViolation", msg), _trace(test.source, msg)
    try:
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


def _judge_stdio(prepared: Prepared, runs: list[_Run], limits: dict) -> ExecutionResult:
    n = prepared.n_tests
    outcomes, first = [], None
    for i in range(n):
        if i >= len(runs):
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
            elif parsed["done"]:
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
