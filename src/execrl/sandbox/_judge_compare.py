"""Comparisons of call mode and the text of messages: shared by the judge process and the
host's verdicts (``execrl.sandbox.host_judge``).
"""

from __future__ import annotations

import builtins
import re
from typing import Any

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

FLOAT_REL_TOL = 1e-5
"""Relative tolerance for floats in ``stdio`` and ``call`` comparisons (as numpy.allclose)."""
FLOAT_ABS_TOL = 1e-8
"""Absolute tolerance for floats in ``stdio`` and ``call`` comparisons."""
REPR_LIMIT = 300
TRACE_LIMIT = 2000


# --------------------------------------------------------------------------------------
# Comparisons of call mode (also used by execrl.sandbox.host_judge)
# --------------------------------------------------------------------------------------

def _close(a: float, b: float) -> bool:
    return abs(a - b) <= FLOAT_ABS_TOL + FLOAT_REL_TOL * abs(b)


def _normalize(v: Any) -> Any:
    if isinstance(v, (list, tuple)) and not isinstance(v, (str, bytes)):
        return [_normalize(x) for x in v]
    if isinstance(v, dict):
        return {k: _normalize(x) for k, x in v.items()}
    t = type(v)
    if t not in _EXACT_SCALARS:  # call mode compares values: a numpy scalar or an int subclass by its value
        if t.__module__ == "numpy" and hasattr(v, "item"):
            return v.item()
        for base in _EXACT_SCALARS[1:]:
            if isinstance(v, base):
                # a str subclass by its content: `str(v)` would ask the program's `__str__`
                return str.__str__(v) if base is str else base(v)
    return v


_EXACT_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def call_equal(got: Any, expected: Any) -> bool:
    """Call-mode comparison: tuples equal lists; a float expected matches within the
    tolerance, an integer expected only exactly."""
    return _equal_tol(_normalize(got), _normalize(expected))


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
    if isinstance(a, LentObject) or isinstance(b, LentObject):
        for x in (a, b):
            if isinstance(x, LentObject):
                x._execrl_refuse_comparison()
        return a is b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - plain values; defensive only
        return False


def _short(text: str, limit: int = REPR_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _trace(*parts: str) -> str:
    text = "\n".join(p for p in parts if p)
    return text if len(text) <= TRACE_LIMIT else text[: TRACE_LIMIT - 4] + "\n..."


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")
"""The memory address in CPython's default repr (``<function f at 0x7f...>``, ``<object
object at 0x...>``, a bound method's ``<... of <A object at 0x...>>``)."""
_RUN_DIR_PATH = re.compile(r"(?:/[^\s'\"/<>]+)*/execrl-run-[A-Za-z0-9_]+")
"""A run's own directory where the worker has no mount namespace (``tempfile.mkdtemp``):
shown as ``/tmp/run``, the path every run has where it has one."""


def stable_text(text: str) -> str:
    """``text`` without what differs from process to process: memory addresses (as in
    ``<generator object g at 0x7f...>``, kept as ``<generator object g>``) and a run's
    temporary directory. Messages and traces reach annotations and SRRL's refinement
    prompts, which must be the same whichever worker ran the program."""
    if "0x" in text:
        text = _ADDRESS.sub("", text)
    if "execrl-run-" in text:
        text = _RUN_DIR_PATH.sub("/tmp/run", text)
    return text


class LentObject:
    """An object that stays in a program's run (``_judge_proxies.Remote``): compared with a
    test's value it is equal to itself only (the program's code never decides a comparison)."""

    __slots__ = ()

    def _execrl_refuse_comparison(self) -> None:
        """Raise when the object may not be compared at all (a value too large or too deep
        to cross from the run): the test then errs, naming the limit, instead of failing."""
