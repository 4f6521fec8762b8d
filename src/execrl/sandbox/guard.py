"""Bounded evaluation of test code in the judge (the executor's own process).

The judge evaluates the non-candidate part of each test itself, on values the candidate
returned. Those values are chosen by the candidate, so the evaluation must stay cheap
whatever they are: ``sum(range(f(3)))`` with ``f`` returning 3e8, ``2 ** f(x)``,
``math.factorial(f(x))``, a helper from the setup code looping on a value. Two bounds:

* operations whose cost is not bounded by the size of their operands (repetition, powers,
  shifts, big products and divisions, ``range`` consumed by a builtin, factorials,
  ``bytes(n)``, ``round`` of huge integers) are rewritten into calls
  that check the size of the result before computing it (``JudgeLimitExceeded``);
* Python-level code (comprehensions, lambdas, setup helpers, replayed tests) runs under a
  per-thread trace function that raises once ``JUDGE_TIME_LIMIT_S`` has passed.

What remains (C-level work linear in the decoded values) is bounded by the reply caps.
"""

from __future__ import annotations

import ast
import builtins
import cmath
import math
import sys
import time
import types
from typing import Any

JUDGE_TIME_LIMIT_S = 2.0
MAX_ITEMS = 1_000_000
"""Largest sequence or range the judge builds or iterates for one test."""
MAX_INT_BITS = 1 << 22
"""Largest integer (in bits) the judge computes for one test."""
MAX_DIVISION_WORK = 1 << 36
"""Largest product of operand sizes (in bits) for integer division, remainder and modular
powers, whose cost grows with that product (~0.1 s at the bound)."""


class JudgeLimitExceeded(Exception):
    """Evaluating the test on the candidate's values would cost more than the judge allows."""


def _int_bits(x: Any) -> int:
    return x.bit_length() if type(x) is int or type(x) is bool else 64


def _size(x: Any) -> int:
    try:
        return len(x)
    except TypeError:
        return 1


def op_mul(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta in (int, bool) and tb in (int, bool):
        if _int_bits(a) + _int_bits(b) > MAX_INT_BITS:
            raise JudgeLimitExceeded("product too large")
    elif ta in (int, bool) or tb in (int, bool):
        n, seq = (a, b) if ta in (int, bool) else (b, a)
        if n > 0 and n * _size(seq) > MAX_ITEMS:
            raise JudgeLimitExceeded("repetition too large")
    return a * b


def op_pow(a: Any, b: Any) -> Any:
    if type(b) in (int, bool) and b > 0 and type(a) in (int, bool) and abs(a) > 1:
        if b * _int_bits(a) > MAX_INT_BITS:
            raise JudgeLimitExceeded("power too large")
    return a ** b


def _check_division(a: Any, b: Any) -> None:
    if type(a) in (int, bool) and type(b) in (int, bool) and _int_bits(a) * _int_bits(b) > MAX_DIVISION_WORK:
        raise JudgeLimitExceeded("division of integers too large")


def op_floordiv(a: Any, b: Any) -> Any:
    _check_division(a, b)
    return a // b


def op_mod(a: Any, b: Any) -> Any:
    _check_division(a, b)
    return a % b


def op_truediv(a: Any, b: Any) -> Any:
    _check_division(a, b)
    return a / b


def guarded_divmod(a: Any, b: Any) -> Any:
    _check_division(a, b)
    return divmod(a, b)


def guarded_round(x: Any, ndigits: Any = None) -> Any:
    if type(x) is int and type(ndigits) is int and ndigits < 0 and (
            -ndigits > MAX_INT_BITS // 4 or _int_bits(x) * -ndigits * 4 > MAX_DIVISION_WORK):
        raise JudgeLimitExceeded("rounding of an integer too large")  # it divides by 10 ** -ndigits
    return round(x) if ndigits is None else round(x, ndigits)


def op_lshift(a: Any, b: Any) -> Any:
    if type(b) in (int, bool) and b > MAX_INT_BITS:
        raise JudgeLimitExceeded("shift too large")
    return a << b


def guarded_pow(base: Any, exp: Any, mod: Any = None) -> Any:
    if mod is None:
        return op_pow(base, exp)
    if type(exp) is int and type(mod) is int and _int_bits(exp) * _int_bits(mod) > MAX_DIVISION_WORK:
        raise JudgeLimitExceeded("modular power too large")
    return builtins.pow(base, exp, mod)


def op_alloc(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``bytes(n)`` / ``bytearray(n)`` (and whatever the name is bound to) with ``n`` bounded."""
    if args and type(args[0]) is int and args[0] > MAX_ITEMS:
        raise JudgeLimitExceeded(f"{getattr(cls, '__name__', 'buffer')} too large")
    return cls(*args, **kwargs)


def guarded_range(*args: Any) -> range:
    r = range(*args)
    if len(r) > MAX_ITEMS:
        raise JudgeLimitExceeded("range too large")
    return r


def _bounded(fn, size_of):
    def wrapper(*args: Any) -> Any:
        if size_of(*args) > MAX_ITEMS:
            raise JudgeLimitExceeded(f"{fn.__name__} argument too large")
        return fn(*args)
    wrapper.__name__ = fn.__name__
    return wrapper


def _guarded_math() -> types.ModuleType:
    m = types.ModuleType("math")
    m.__dict__.update({k: v for k, v in vars(math).items() if not k.startswith("__")})
    m.factorial = _bounded(math.factorial, lambda n: n if type(n) is int else 0)
    m.comb = _bounded(math.comb, lambda n, k=0: n if type(n) is int else 0)
    m.perm = _bounded(math.perm, lambda n, k=None: n if type(n) is int else 0)
    m.prod = _bounded(math.prod, lambda it, **kw: _size(it))
    return m


GUARDED_MATH = _guarded_math()
_GUARDS = {"__op_mul__": op_mul, "__op_pow__": op_pow, "__op_lshift__": op_lshift, "__op_alloc__": op_alloc,
           "__op_floordiv__": op_floordiv, "__op_mod__": op_mod, "__op_truediv__": op_truediv}
_OPS = {ast.Mult: "__op_mul__", ast.Pow: "__op_pow__", ast.LShift: "__op_lshift__",
        ast.FloorDiv: "__op_floordiv__", ast.Mod: "__op_mod__", ast.Div: "__op_truediv__"}


def judge_namespace(safe_builtins: dict[str, Any]) -> dict[str, Any]:
    """Globals for test code evaluated in the judge: the given builtins with ``range`` and
    ``pow`` bounded, ``math`` bounded, ``cmath``, and the operator guards."""
    b = dict(safe_builtins)
    b["range"] = guarded_range
    b["pow"] = guarded_pow
    b["divmod"] = guarded_divmod
    b["round"] = guarded_round
    return {"__builtins__": b, "math": GUARDED_MATH, "cmath": cmath, **_GUARDS}


def scan_judge_tree(tree: ast.AST, helpers: frozenset[str] | set[str]) -> tuple[bool, bool]:
    """(whether ``GuardOps`` has anything to rewrite in ``tree``, whether evaluating it runs
    Python-level frames: comprehensions, lambdas, calls of setup helpers, which need the
    time limit). Most tests need neither."""
    guards = timed = False
    for n in ast.walk(tree):
        if isinstance(n, (ast.BinOp, ast.AugAssign)) and type(n.op) in _OPS:
            guards = True
        elif isinstance(n, ast.Name) and n.id in ("bytes", "bytearray"):
            guards = True
        elif isinstance(n, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)) or (
                isinstance(n, ast.Name) and n.id in helpers):
            timed = True
    return guards, timed


class GuardOps(ast.NodeTransformer):
    """Rewrites ``a * b``, ``a ** b``, ``a << b`` (and their augmented forms) and calls of
    ``bytes``/``bytearray`` into guarded calls."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("bytes", "bytearray"):
            call = ast.Call(func=ast.Name(id="__op_alloc__", ctx=ast.Load()), args=[node.func, *node.args],
                            keywords=node.keywords)
            return ast.copy_location(call, node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = _OPS.get(type(node.op))
        if name is None:
            return node
        call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[node.left, node.right], keywords=[])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        name = _OPS.get(type(node.op))
        if name is None or not isinstance(node.target, ast.Name):
            return node
        load = ast.Name(id=node.target.id, ctx=ast.Load())
        value = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[load, node.value], keywords=[])
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)


def run_with_deadline(fn, *args: Any, limit: float = JUDGE_TIME_LIMIT_S) -> Any:
    """Call ``fn`` with a trace function that raises ``JudgeLimitExceeded`` in any Python
    frame once ``limit`` seconds have passed (the previous tracer is restored)."""
    deadline = time.monotonic() + limit
    monotonic = time.monotonic

    def tracer(frame, event, arg):
        if monotonic() > deadline:
            raise JudgeLimitExceeded(f"evaluating the test took more than {limit:g}s")
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return fn(*args)
    finally:
        sys.settrace(previous)
