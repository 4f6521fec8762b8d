"""The judge process: runs each problem's tests, the program's functions called in its run.

Each sandbox worker forks one judge process (``_worker._judge_process``) and runs this file in
it, in a copy of the worker module's namespace (the value exchange, ``_Side``, is shared with
the runs' harness). It holds the tests, expected values included; a run never does.

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

This file is also imported as a module (``execrl.sandbox.judge`` uses its comparisons).
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import sys
from collections import Counter, OrderedDict, defaultdict, deque
from typing import Any

if "_Side" not in globals():  # imported as a module (not run in the worker's namespace)
    from execrl.sandbox._worker import (_FD, _JUDGE_CPU, _STRUCT_LEN, PeerGone, ProtocolError, _cpu_time, _dumps,
                                        _Exchange, _json_loads, _shallow, _Side, _socket, _unchanged,
                                        compile_candidate)

FLOAT_REL_TOL = 1e-5
"""Relative tolerance for floats in ``stdio`` and ``call`` comparisons (as numpy.allclose)."""
FLOAT_ABS_TOL = 1e-8
"""Absolute tolerance for floats in ``stdio`` and ``call`` comparisons."""
REPR_LIMIT = 300
TRACE_LIMIT = 2000
JUDGE_CACHE = 1024
"""Problems whose compiled tests the judge keeps (the controller mirrors this LRU)."""
_BUILTIN_NAMES = frozenset(dir(builtins))
_STARTUP_MODULES = frozenset(name for name in sys.modules if not name.startswith("__"))
"""The modules the judge holds before any problem (the worker's preloaded ones among them)."""
_INT_DIGITS = sys.get_int_max_str_digits()
_DIGITS_KEY = "__int_max_str_digits__"  # the run's greeting: the program's int_max_str_digits
_JUDGE_MODULES = ("math", "cmath")
"""Always the judge's own modules, whatever the program binds to these names."""


# --------------------------------------------------------------------------------------
# Comparisons of call mode (also used by execrl.sandbox.judge)
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
                return base(v)
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
    if isinstance(a, Remote) or isinstance(b, Remote):
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


def describe(v: Any) -> str:
    """A value for a message: its repr, short; a program's object by its type and its repr
    (without a memory address)."""
    if isinstance(v, Remote):
        note = Remote._note.__get__(v)
        if not note:
            try:
                shown = repr(v)
            except BaseException:  # noqa: BLE001 - the run is gone, or its __repr__ failed
                shown = ""
            note = _short(stable_text(shown), 200) if isinstance(shown, str) else ""
        tname = Remote._tname.__get__(v)
        article = "an" if tname[:1] in "aeiouAEIOU" else "a"
        return f"{article} {tname} object ({note}), not a plain value"
    try:
        return _short(stable_text(repr(v)))
    except BaseException:  # noqa: BLE001 - an int too large to print; a value holding a handle of a run that ended
        return f"<{type(v).__name__}>"


# --------------------------------------------------------------------------------------
# The program's objects, seen from the judge
# --------------------------------------------------------------------------------------

class NotPlainValue(AssertionError):
    """The truth value of the program's object would be decided by the program's code."""


class CandidateExit(BaseException):
    """``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit`` raised by the program: it
    ends the test, and test code cannot catch it with ``except Exception``."""


_CANDIDATE_EXITS = {c.__name__: type(c.__name__, (c, CandidateExit), {"__module__": "builtins"})
                    for c in (SystemExit, KeyboardInterrupt, GeneratorExit)}
"""The program's ``SystemExit`` (...) as the test sees it: ``except SystemExit`` catches it; one
that leaves the test stops the tests, as it stops ``python`` (``_Candidate.run_asserts``)."""


class Remote:
    """An object of the program's that stays in its run: what the test does with it is done
    there (by a request over the run's socket)."""

    __slots__ = ("_side", "_ref", "_tname", "_note", "_buf", "_end", "_batch", "_hash", "__weakref__")

    def __init__(self, side: Any, ref: dict, tname: str = "object", note: str = "") -> None:
        for name, value in (("_side", side), ("_ref", ref), ("_tname", tname), ("_note", note), ("_buf", None),
                            ("_end", None), ("_batch", 1), ("_hash", None)):
            object.__setattr__(self, name, value)

    def _op(self, name: str, *operands: Any) -> Any:
        return Remote._side.__get__(self).request_op(name, operands)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Remote._side.__get__(self).request_call(self, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # numpy's protocols are never the program's: ``__array_interface__`` would have the
        # judge's numpy read its own memory at an address the program names
        if name.startswith(("_execrl", "__array", "__dlpack")):
            raise AttributeError(name)
        return Remote._side.__get__(self).request_attr(self, name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """The judge's copy of the program's numpy array (of bools or numbers), for numpy in
        the test (``numpy.array_equal(f(x), expected)``, ``(f(x) == expected).all()``)."""
        side = Remote._side.__get__(self)
        got = self._op("array", self)
        numpy = side.numpy()
        if type(got) is not list or len(got) != 3 or type(got[0]) is not str or type(got[2]) is not list:
            raise TypeError("not a numpy array")
        dt = numpy.dtype(got[0]) if got[0][:1] in "<>|=" and len(got[0]) <= 4 else None
        if dt is None or dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None:
            raise TypeError("not a numpy array")
        out = numpy.array(got[1], dtype=dt).reshape([int(n) for n in got[2]])
        return out if dtype is None else out.astype(dtype)

    def __setattr__(self, name: str, value: Any) -> None:
        Remote._side.__get__(self).request_set(self, name, value)

    def __delattr__(self, name: str) -> None:
        Remote._side.__get__(self).request_del(self, name)

    def __repr__(self) -> str:
        return self._op("repr", self)

    def __str__(self) -> str:
        return self._op("str", self)

    def __len__(self) -> int:
        return self._op("len", self)

    def __iter__(self) -> Any:
        return self._op("iter", self)

    def __next__(self) -> Any:
        buf = Remote._buf.__get__(self)
        if buf:
            return buf.popleft()
        end = Remote._end.__get__(self)
        if end is None:
            side = Remote._side.__get__(self)
            # one item per request, so that the program's generator runs no further than the
            # test has asked (its side effects happen when they would in Python); in growing
            # batches only for a consumer that takes every item without running the test's
            # code in between (``_takes_every_item``)
            n = 1
            if _takes_every_item(side, sys._getframe(1)):
                n = Remote._batch.__get__(self)
                object.__setattr__(self, "_batch", min(2 * n, 1024))
            items, end = side.request_batch(self, n)
            if items:
                buf = deque(items)
                object.__setattr__(self, "_buf", buf)
                object.__setattr__(self, "_end", end)
                return buf.popleft()
        object.__setattr__(self, "_end", None)  # delivered: the next call asks the run again
        Remote._side.__get__(self).drain = None
        if end == "s" or end is None:
            raise StopIteration
        raise Remote._side.__get__(self).candidate_exception(end)

    def __length_hint__(self) -> int:
        """Asked by ``list()``, ``tuple()``, ``sorted()``, ``str.join`` and ``list.extend``
        before they take every item of the iterator in one go, with no code of the test's in
        between: its items may then come in batches (``__next__``)."""
        frame = sys._getframe(1)
        Remote._side.__get__(self).drain = (frame, frame.f_lasti)
        return 0

    def __getitem__(self, key: Any) -> Any:
        return self._op("getitem", self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._op("setitem", self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._op("delitem", self, key)

    def __contains__(self, item: Any) -> bool:
        # decided here, on the items the program's object yields: the test's value stays here
        return any(x is item or x == item for x in self)

    def __bool__(self) -> bool:
        value = self._op("truth", self)
        if value is True:
            return True
        raise NotPlainValue(f"got {describe(self)}")

    def __eq__(self, other: Any) -> Any:
        return self._op("eq", self, other) if isinstance(other, Remote) else NotImplemented

    def __ne__(self, other: Any) -> Any:
        if isinstance(other, Remote):
            return self._op("ne", self, other)
        # the program's own __ne__ would need the test's value (it stays here), and "not equal
        # to a plain value" would pass any object: neither side of the verdict is taken
        raise NotPlainValue(f"compared {describe(self)} with != to a plain value")

    def __lt__(self, other: Any) -> Any:
        return self._op("lt", self, other) if isinstance(other, Remote) else NotImplemented

    def __le__(self, other: Any) -> Any:
        return self._op("le", self, other) if isinstance(other, Remote) else NotImplemented

    def __gt__(self, other: Any) -> Any:
        return self._op("gt", self, other) if isinstance(other, Remote) else NotImplemented

    def __ge__(self, other: Any) -> Any:
        return self._op("ge", self, other) if isinstance(other, Remote) else NotImplemented

    def __hash__(self) -> int:
        """The program's hash of its object (sent with it as an item of a set or a dict key,
        else asked once): a set of the program's points holds them as the program's own
        does. An equal hash never makes the test's value equal to the program's object
        (``__eq__`` above): a plain value is never found in a set by a program's object."""
        h = Remote._hash.__get__(self)
        if h is None:
            h = self._op("hash", self)
            if type(h) is not int:
                raise TypeError(f"unhashable type: {Remote._tname.__get__(self)!r}")
            object.__setattr__(self, "_hash", h)
        return h

    def __format__(self, spec: str) -> str:
        return self._op("format", self, spec) if spec else str(self)

    def __instancecheck__(self, instance: Any) -> bool:
        return self._op("isinstance", instance, self)

    def __subclasscheck__(self, cls: Any) -> bool:
        return self._op("issubclass", cls, self)

    def __enter__(self) -> Any:
        return self.__getattr__("__enter__")()

    def __exit__(self, *exc: Any) -> Any:
        return self.__getattr__("__exit__")(*exc)

    def __reversed__(self) -> Any:
        return self._op("reversed", self)

    def __round__(self, ndigits: Any = None) -> Any:
        return self._op("round", self) if ndigits is None else self._op("round", self, ndigits)


def _binary(op: str):
    """An operator between the program's object and another: the program's code computes it
    only when both operands are the program's. With a value of the test's (``abs(f(x) - y)
    < 1e-6``) it would hand that value, often the expected one, to the program's operator,
    which could answer whatever satisfies the test (an object whose ``__sub__`` returns
    0.0); it raises ``TypeError`` instead, as Python does for operands without the operator
    (a generator minus a float), so the test is an error."""

    def forward(self, other):
        if not isinstance(other, Remote):
            raise _refused(op, self, other)
        return self._op(op, self, other)

    def reflected(self, other):
        if not isinstance(other, Remote):
            raise _refused(op, self, other)
        return self._op(op, other, self)

    return forward, reflected


def _refused(op: str, remote: Remote, other: Any) -> TypeError:
    return TypeError(f"operator {op.rstrip('_')!r} between the program's {Remote._tname.__get__(remote)} object "
                     f"and the test's {type(other).__name__} value is not computed by the program")


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or", "xor",
              "matmul"):
    _fwd, _rev = _binary(_name + "_" if _name in ("and", "or") else _name)
    setattr(Remote, f"__{_name}__", _fwd)
    setattr(Remote, f"__r{_name}__", _rev)
for _name in ("neg", "pos", "abs", "invert", "index", "int", "float", "complex"):
    setattr(Remote, f"__{_name}__", (lambda op: lambda self: self._op(op, self))(_name))
Remote.__divmod__, Remote.__rdivmod__ = _binary("divmod")
del _name, _fwd, _rev


def _shadow_type(base: type) -> type:
    """A plain container holding the content of the program's object of a subclass of
    ``base`` (a namedtuple, a ``Counter`` subclass, a ``list`` subclass): compared, indexed
    and iterated as its plain content (so a subclass's ``__eq__`` never decides a test), its
    other attributes and methods asked of the run."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["_execrl_remote"], name)

    def __repr__(self):
        return base.__repr__(base(self))

    return type(f"{base.__name__}_of_the_program", (base,), {"__getattr__": __getattr__, "__repr__": __repr__})


_SHADOWS = {base: _shadow_type(base) for base in (tuple, list, dict, set, frozenset, int, float, str, bytes, complex)}
_SHADOW_TYPES = frozenset(_SHADOWS.values())


_KEPT_DICTS = (dict, Counter, OrderedDict, defaultdict)


def _assign(container: Any, value: Any) -> None:
    """Give a list, dict or set of the judge's the content ``value``."""
    if isinstance(container, list):
        container[:] = value
    else:
        container.clear()
        container.update(value)


class _SetInRunOrder(set):
    """A set whose iteration order is the one the run's set had (the judge's own insertion
    order cannot always reproduce it), as long as its content is unchanged."""

    def __iter__(self):
        order = self.__dict__.get("_execrl_order")
        if order is not None and len(order) == len(self) and all(x in self for x in order):
            return iter(order)
        return set.__iter__(self)

    def __repr__(self):
        return "{" + ", ".join(repr(x) for x in self) + "}" if self else "set()"


class _FrozenSetInRunOrder(frozenset):
    def __iter__(self):
        return iter(self.__dict__["_execrl_order"])

    def __repr__(self):
        return "frozenset({" + ", ".join(repr(x) for x in self) + "})" if self else "frozenset()"


# --------------------------------------------------------------------------------------
# The judge's side of the conversation with one run
# --------------------------------------------------------------------------------------

class _Gone(BaseException):
    """The run ended (exited, was killed or timed out) during a test."""


class _Violation(BaseException):
    """The run sent something that is not a valid answer."""


class _JudgeSide(_Side):
    def __init__(self, fd: int, kinds: dict | None = None) -> None:
        super().__init__(fd)
        self.kinds = kinds or {}
        self.shadows: dict = {}
        self.named: dict = {}
        self.exceptions: dict = {}
        self.ended: BaseException | None = None
        self.sources: dict = {}
        self.ahead: deque = deque()  # calls sent ahead in a batch whose answers are still to come
        self.kept: dict = {}  # n -> what the judge's copy of the program's container n held when last in step
        self.batch_stopped = False  # the run stopped the batch (it then waits for the judge's requests)
        self.setup_ns: dict = {}  # the tests' namespace, where the setup's classes are (``_SetupClass``)
        self.drain = None  # (frame, offset) of the test's call that takes every item of an iterator
        self.read_ahead: set = set()  # the test's iterators lent to the run that it may read ahead
        self.pending: dict = {}  # lent number -> the exception a read ahead met, raised when reached

    # ---- values: what only this side has -------------------------------------------------
    def other(self, v, ex, depth):
        t = type(v)
        if t is Remote:
            return Remote._ref.__get__(v)
        if t in _SHADOW_TYPES:
            return Remote._ref.__get__(v.__dict__["_execrl_remote"])
        if t is _SetInRunOrder or t is _FrozenSetInRunOrder:
            base = set if t is _SetInRunOrder else frozenset
            return self.enc(base(v), ex, depth)
        if t is type(sys):
            return {"m": v.__name__}
        scalar = self.numpy_scalar(v, t)
        if scalar is not None:
            return {"N": [scalar[0], self.enc(scalar[1], ex, depth)]}
        name = getattr(v, "__name__", None)
        if isinstance(name, str) and getattr(builtins, name, None) is v:
            return {"B": name}
        if depth == 0 and (t is _GENERATOR or t in _SCALAR_ITERATORS or t is _TUPLE_ITERATOR) \
                and _an_argument() and sys.getrefcount(v) <= _TEMPORARY_REFS and _unseen_iterator(v):
            n = self.lend(v)
            self.read_ahead.add(n)
            return {"j": n}
        return {"j": self.lend(v)}

    def dec_other(self, tag, val, ex):
        if tag == "h":
            if type(val) is not list or not val or type(val[0]) is not int:
                raise ProtocolError("bad handle")
            n = val[0]
            remote = self.proxies.get(n)
            if remote is None:
                tname = val[1] if len(val) > 1 and type(val[1]) is str else "object"
                note = val[2] if len(val) > 2 and type(val[2]) is str else ""
                remote = self.proxies[n] = Remote(self, {"h": n}, _short(tname, 80), _short(note, 80))
            if len(val) > 3 and type(val[3]) is int:  # the program's hash of an item of a set, a key
                object.__setattr__(remote, "_hash", val[3])
            return remote
        if tag == "S":
            if type(val) is not list or len(val) != 3 or type(val[0]) is not int:
                raise ProtocolError("bad shadow")
            n, tname = val[0], val[1]
            k = len(ex.table)
            base = self.dec(val[2], ex)
            shadow = self.shadows.get(n)
            if shadow is None:
                cls = _SHADOWS.get(type(base) if type(base) in _SHADOWS else None)
                if cls is None:
                    raise ProtocolError("bad shadow")
                shadow = cls(base)
                shadow.__dict__["_execrl_remote"] = self.dec_other("h", [n, tname if type(tname) is str else "object"],
                                                                   ex)
                self.shadows[n] = shadow
            if k < len(ex.table):
                ex.table[k] = shadow
            return shadow
        if tag == "j":
            obj = self.lent_object(val)
            return self.setup_class(obj.name) if type(obj) is _SetupClass else obj
        if tag == "B":  # a builtin type (never a function of the builtins: the judge runs none)
            v = getattr(builtins, val, None) if type(val) is str and not val.startswith("_") else None
            if not isinstance(v, type) or v.__module__ != "builtins":
                raise ProtocolError("bad builtin")
            return v
        if tag == "X":  # an exception class of the program's: the judge's stand-in
            if type(val) is not list or len(val) != 2 or not all(type(x) is str for x in val):
                raise ProtocolError("bad exception class")
            return self.exception_class(val[0][:200], val[1])
        raise ProtocolError(f"unknown tag {tag!r}")

    @staticmethod
    def numpy():
        """numpy, imported outside the candidate's CPU-time limit (the judge's one-time cost)."""
        numpy = sys.modules.get("numpy")
        if numpy is None:
            import signal

            left = signal.setitimer(signal.ITIMER_PROF, 0)[0]
            try:
                import numpy
            finally:
                if left:
                    signal.setitimer(signal.ITIMER_PROF, left)
        return numpy

    @staticmethod
    def make_set(items, frozen):
        out = frozenset(items) if frozen else set(items)
        if len(out) > 1 and len(out) == len(items) and any(a is not b for a, b in zip(out, items)):
            out = (_FrozenSetInRunOrder if frozen else _SetInRunOrder)(items)
            out.__dict__["_execrl_order"] = list(items)
        return out

    def refresh(self, entries, rex) -> None:
        """New content of the program's containers whose copies the judge holds (its container
        subclasses, and the containers it keeps), numbered in the response ``rex`` (the run
        encodes them after the answer)."""
        if type(entries) is not list:
            raise ProtocolError("malformed refresh")
        for entry in entries:
            if type(entry) is not list or len(entry) != 2:
                raise ProtocolError("malformed refresh")
            shadow = self.shadows.get(entry[0])
            value = self.dec(entry[1], rex)
            if shadow is None or not isinstance(shadow, (list, dict, set)):
                continue
            _assign(shadow, value)
            if entry[0] in self.kept:
                self.kept[entry[0]] = _shallow(shadow)

    def track(self, pairs, rex, value, first: int):
        """The containers of an answer that are the program's own objects, held by it too
        (``[k, n]``: the response's k-th container is its object n): kept in step with them
        (``refresh``, ``push_kept``). The same object answered again is the same copy, as
        ``f() is f()`` is true in Python for a list the program keeps. A container of the
        request (below ``first``: the test's own argument, which a generator the call made
        reads and changes as it runs) is kept in step with the run's copy of it the same way."""
        if type(pairs) is not list:
            raise ProtocolError("malformed kept containers")
        same: dict = {}  # id of a new copy -> the copy the judge already holds of that object
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or type(pair[1]) is not int \
                    or not 0 <= pair[0] < len(rex.table):
                raise ProtocolError("malformed kept containers")
            k, n = pair
            copy = rex.table[k]
            if not isinstance(copy, (list, dict, set)) or type(copy) in _SHADOW_TYPES:
                raise ProtocolError("a kept container that is not one")
            old = self.shadows.get(n)
            if n in self.kept and type(old) is type(copy) and old is not copy:
                _assign(old, copy)
                same[id(copy)] = (copy, old)
                copy = old
            self.shadows[n] = copy
            self.kept[n] = _shallow(copy)
        if same:  # the earlier copies take the place of the new ones in the answer
            for container in rex.table[first:]:
                if type(container) is list or type(container) in _KEPT_DICTS:
                    keys = range(len(container)) if type(container) is list else list(container)
                    for key in keys:
                        hit = same.get(id(container[key]))
                        if hit is not None and hit[0] is container[key]:
                            container[key] = hit[1]
            hit = same.get(id(value))
            if hit is not None and hit[0] is value:
                value = hit[1]
            for copy, old in same.values():  # the content the run sent, with the earlier copies in it
                _assign(old, copy)
            for pair in pairs:
                self.kept[pair[1]] = _shallow(self.shadows[pair[1]])
        return value

    def push_kept(self) -> None:
        """Before a request: the new content of the copies the test changed goes to the
        program's objects (``r = f(); r.append(9); f()`` sees the 9, as in Python), and the
        copies the test no longer holds are no longer kept in step."""
        changed, released = [], []
        count = sys.getrefcount
        for n, snap in self.kept.items():  # (``s.items.append(7)`` changes a copy no one holds after)
            if not _unchanged(snap, self.shadows[n]):
                changed.append(n)
        if changed:  # numbered after every kept copy: one inside another goes as itself
            order = list(self.kept)
            ex = _Exchange()
            for n in order:
                self._number(self.shadows[n], ex)
            updates = []
            for n in changed:
                copy = self.shadows[n]
                updates.append([ex.seen[id(copy)], self.contents(copy, ex)])
                self.kept[n] = _shallow(copy)
            ex = copy = None
        for n in list(self.kept):
            if count(self.shadows[n]) <= 2:  # ``self.shadows``, the argument of getrefcount
                released.append(n)
        if changed or released:
            data = _dumps(["u", updates if changed else [], released, order if changed else []]).encode("ascii")
            self.held += _STRUCT_LEN.pack(len(data) + 1) + b"J" + data
            for n in released:
                del self.kept[n], self.shadows[n]

    # ---- requests to the run ------------------------------------------------------------
    def call_peer(self, msg, text: str | None = None):
        """As ``_Side.call_peer`` (``text``: the message already encoded); a call the batch
        sent ahead is not sent again, its answer is the next one the run sends. A request
        the batch did not foresee is sent once the run has stopped the batch (it does when
        it lends an object, before any request could name one)."""
        if text is None:
            text = _dumps(msg)
        ahead = self.ahead
        if ahead:
            if text == ahead[0]:
                ahead.popleft()
                reply = self._reply()
                if reply is not None:
                    return reply
            else:  # not foreseen: the run ends the batch first (answers to calls no test made are dropped)
                while ahead:
                    if self._reply() is not None:
                        ahead.popleft()
        self.send_text(text)
        reply = self._reply()
        if reply is None:
            raise ProtocolError("the end of a batch that was not sent")
        return reply

    def _reply(self):
        """The run's next answer, serving its requests meanwhile; ``None`` when it is the end
        of a batch (the calls sent ahead and not yet answered are then not answered)."""
        while True:
            reply = self.recv()
            tag = reply[0]
            if tag == "r" or tag == "e":
                return reply
            if tag == "z":
                self.ahead.clear()
                self.batch_stopped = True
                return None
            if tag == "x":
                self.finish()
            if tag == "p":
                self.charge_peer(reply)
                continue
            self.send_text(self.serve_one(reply))

    def ask(self, msg: list | None, ex, text: str | None = None) -> tuple:
        """Send a request (``msg``, or as ``text`` already encoded), serve the run's calls
        back meanwhile; the decoded answer."""
        if self.ended is not None:
            raise self.ended
        try:
            if self.kept:
                self.push_kept()
            self.tell_cpu()
            reply = self.call_peer(msg, text)
            rex = ex.follow()
            if reply[0] == "e":
                if len(reply) < 8:
                    raise ProtocolError("malformed exception answer")
                self.apply_updates(reply[5], rex)
                self.refresh(reply[6], rex)
                # raised after this handler: a MemoryError of the program's is its own
                raised = self.candidate_exception(reply[1:5] + reply[7:9])
            else:
                if len(reply) < 4:
                    raise ProtocolError("malformed answer")
                first = len(rex.table)
                value = self.dec(reply[1], rex)
                self.apply_updates(reply[2], rex)
                self.refresh(reply[3], rex)
                if len(reply) > 5:
                    value = self.track(reply[5], rex, value, first)
                return value, (reply[4] if len(reply) > 4 else None)
        except PeerGone:
            self.ended = _Gone()
            raise self.ended from None
        except (ProtocolError, RecursionError, MemoryError) as e:
            self.ended = _Violation(f"{type(e).__name__}: {e}"[:300])
            raise self.ended from None
        raise raised

    def setup_class(self, name: str) -> type:
        """The class the setup bound to ``name`` (the program's ``ListNode(v)``); a
        ``NameError`` in the program while the setup has not bound it, or bound it to
        something that is not a class (nothing else of the setup's is the program's)."""
        v = dict.get(self.setup_ns, name)
        if not isinstance(v, type):
            raise NameError(f"name {name!r} is not defined")
        return v

    def request_call(self, target, args, kwargs):
        ex = _Exchange()
        enc = self.enc
        msg = ["c", enc(target, ex), [enc(a, ex) for a in args], [[k, enc(v, ex)] for k, v in kwargs.items()]]
        return self.ask(msg, ex)[0]

    def request_op(self, name, operands):
        ex = _Exchange()
        return self.ask(["o", name, [self.enc(x, ex) for x in operands]], ex)[0]

    def request_attr(self, target, name):
        ex = _Exchange()
        return self.ask(["a", self.enc(target, ex), name], ex)[0]

    def request_set(self, target, name, value):
        ex = _Exchange()
        self.ask(["s", self.enc(target, ex), name, self.enc(value, ex)], ex)

    def request_del(self, target, name):
        ex = _Exchange()
        self.ask(["d", self.enc(target, ex), name], ex)

    def request_batch(self, target, n):
        ex = _Exchange()
        items, end = self.ask(["t", self.enc(target, ex), n], ex)
        if type(items) is not list:
            raise _Violation("malformed batch")
        return items, end

    def request_global(self, name):
        return self.ask(["n", name], _Exchange())[0]

    def request_entry(self, name, args):
        ex = _Exchange()
        return self.ask(["k", name, [self.enc(a, ex) for a in args]], ex)[0]

    def exception_class(self, key: str, base: str) -> type:
        """The judge's stand-in for the program's exception class ``key`` (a global name, or
        the qualified name of a nested class: ``Stack.Empty``), a subclass of the builtin
        ``base``; one per key, so that the test's ``except`` catches what the program raises."""
        cls = self.exceptions.get(key)
        if cls is None:
            b = getattr(builtins, base, None)
            if not (isinstance(b, type) and issubclass(b, Exception)):
                b = Exception
            name = key.rpartition(".")[2] or "Exception"
            cls = self.exceptions[key] = type(name, (b,), {"__module__": "__main__", "__qualname__": key})
        return cls

    @staticmethod
    def _stdlib_class(path) -> type | None:
        """The standard library's exception class ``[module, qualname]``, looked up (never
        imported, no code run) in a module the judge already holds."""
        if type(path) is not list or len(path) != 2 or not all(type(p) is str for p in path):
            return None
        mod, qualname = path
        if mod.split(".")[0] not in getattr(sys, "stdlib_module_names", ()):
            return None
        obj = sys.modules.get(mod)
        if obj is None:
            return None
        ns = vars(obj)
        for part in qualname.split("."):
            obj = ns.get(part)
            if not isinstance(obj, type):
                return None
            ns = obj.__dict__
        if issubclass(obj, Exception) and obj.__module__ == mod:
            return obj
        return None

    def candidate_exception(self, record, depth: int = 0) -> BaseException:
        """The program's exception, raised in the test as its nearest builtin class (so
        ``except ValueError`` works), as the judge's stand-in for the program's own class, or
        as the standard library's class (the judge's own ``json.JSONDecodeError``); with the
        program's arguments and attributes when they are plain scalars, and its ``__cause__``."""
        if type(record) is not list or len(record) < 4:
            return _Violation("malformed exception record")
        etype, msg, trace, base = (str(x)[:2000] for x in record[:4])
        gname = record[4] if len(record) > 4 and type(record[4]) is str else None
        detail = record[5] if len(record) > 5 and type(record[5]) is dict else {}
        cls = self.exception_class(gname[:200], base) if gname else self._stdlib_class(detail.get("c"))
        if cls is None:
            cls = getattr(builtins, base, None)
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                cls = Exception
            elif not issubclass(cls, Exception):
                cls = _CANDIDATE_EXITS.get(base, CandidateExit)
        args = detail.get("a")
        args = tuple(args) if type(args) is list and all(type(a) in _DETAIL_TYPES for a in args) else (msg,)
        exc = None
        if getattr(cls, "__module__", "builtins") not in ("builtins", "__main__"):
            try:  # the standard library's class, without running its ``__init__``
                exc = BaseException.__new__(cls)
                exc.args = args
            except Exception:  # noqa: BLE001 - a class of another layout (an OSError's)
                exc = None
        if exc is None:
            for a in (args, (msg,)):
                try:
                    exc = cls(*a) if cls.__module__ in ("builtins", "__main__") else Exception(*a)
                    break
                except Exception:  # noqa: BLE001 - a builtin class with other constructor arguments
                    exc = Exception(msg)
        attrs = detail.get("d")
        for kv in attrs if type(attrs) is list else ():
            if (type(kv) is list and len(kv) == 2 and type(kv[0]) is str and kv[0].isidentifier()
                    and not kv[0].startswith(("_", "execrl")) and type(kv[1]) in _DETAIL_TYPES
                    and not hasattr(type(exc), kv[0])):
                exc.__dict__[kv[0]] = kv[1]
        cause = detail.get("k")
        if cause is not None and depth < 3:
            c = self.candidate_exception(cause, depth + 1)
            if not isinstance(c, _Violation):
                exc.__cause__ = c
        exc.execrl_candidate = (etype, msg, trace)
        return exc

    # ---- the run's requests (a call back into an object the test passed) --------------
    def serve_one(self, req) -> str:
        ex = _Exchange()
        try:
            value = self._perform(req, ex)
        except (_Gone, _Violation):
            raise
        except BaseException as e:  # noqa: BLE001 - the test's code raised: the program sees it
            base = next((c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins"), "Exception")
            return json.dumps(["e", type(e).__name__, _short(str(e)), "", base, [], [], None])
        return json.dumps(["r", self.enc(value, ex.follow()), [], []])

    def _perform(self, req, ex):
        op = req[0]
        if op == "c" and len(req) == 4:
            target = self.dec(req[1], ex)
            args = [self.dec(a, ex) for a in req[2]]
            kwargs = {str(k): self.dec(v, ex) for k, v in req[3]}
            return target(*args, **kwargs)
        if op == "a" and len(req) == 3:
            target = self.dec(req[1], ex)
            name = str(req[2])
            if name.startswith("_") or getattr(type(target), "__module__", None) != "__main__":
                raise AttributeError(name)  # only a test's own objects show their attributes
            return getattr(target, name)
        if op in ("s", "d") and len(req) == (4 if op == "s" else 3):  # ``node.next = head`` in the program
            target = self.dec(req[1], ex)
            name = str(req[2])
            if name.startswith("_") or getattr(type(target), "__module__", None) != "__main__":
                raise AttributeError(name)  # only a test's own objects, and their public attributes
            if op == "s":
                setattr(target, name, self.dec(req[3], ex))
            else:
                delattr(target, name)
            return None
        if op == "o" and len(req) == 3:
            operands = [self.dec(a, ex) for a in req[2]]
            if req[1] == "take" and len(operands) == 2:
                return self.take(*operands)
            fn = _REVERSE_OPS.get(req[1])
            if fn is None or not operands:
                raise TypeError(f"unsupported operation {req[1]!r}")
            return fn(*operands)
        raise ProtocolError(f"unexpected request {op!r}")

    def take(self, it, n):
        """``[items, end]``: the next items of the test's iterator ``it`` that the program reads
        (``end``: ``"s"`` when it is exhausted after them, else None). Exactly one, when the
        program asks for it, unless nothing can see ``it`` read ahead (``read_ahead``): then
        up to ``n``; an exception met after some items is raised when the program reaches it."""
        k = self.lent_ids.get(id(it))
        if k is not None and k in self.pending:
            raise self.pending.pop(k)
        items: list = []
        count = min(n, 4096) if k in self.read_ahead and type(n) is int and n > 1 else 1
        for _ in range(count):
            try:
                items.append(next(it))
            except StopIteration:
                return [items, "s"]
            except BaseException as e:  # noqa: BLE001 - the test's iterator raised: the program meets it in turn
                if not items:
                    raise
                self.pending[k] = e
                break
        return [items, None]


_DETAIL_TYPES = frozenset({type(None), bool, int, float, str})

_REVERSE_OPS = {"iter": iter, "next": next, "len": len, "repr": repr, "hash": hash, "truth": bool,
                "getitem": lambda a, b: a[b], "contains": lambda a, b: b in a, "eq": lambda a, b: a == b,
                "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
                "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
                "isinstance": lambda cls, v: isinstance(v, cls)}


class _SetupClass:
    """Lent to the run in place of a class the setup defines (the setup runs after the
    program loads): the run's requests naming it name the class (``_JudgeSide.setup_class``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


# --------------------------------------------------------------------------------------
# Generators: when items may travel in batches without changing what the test can see
# --------------------------------------------------------------------------------------

_DRAINING = tuple(getattr(builtins, n) for n in ("sum", "max", "min", "set", "frozenset", "sorted", "list",
                                                 "tuple", "dict"))
"""Builtins that, called with one argument, take every item of it (or stop at an error)."""
_CALL_PARTS = frozenset({"PUSH_NULL", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_FAST", "LOAD_DEREF", "LOAD_CONST",
                         "LOAD_METHOD", "LOAD_ATTR", "PRECALL", "CALL", "BUILD_LIST", "BUILD_TUPLE", "KW_NAMES",
                         "MAKE_FUNCTION", "GET_ITER"})
_LOADS = frozenset({"LOAD_NAME", "LOAD_GLOBAL", "LOAD_FAST", "LOAD_DEREF"})
_LOOP_OPS = frozenset({"LOAD_NAME", "LOAD_GLOBAL", "LOAD_FAST", "LOAD_CONST", "STORE_NAME", "STORE_FAST", "BINARY_OP",
                       "COMPARE_OP", "UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT", "POP_TOP", "NOP", "COPY", "SWAP",
                       "BUILD_TUPLE", "UNPACK_SEQUENCE", "JUMP_BACKWARD", "JUMP_FORWARD", "POP_JUMP_FORWARD_IF_FALSE",
                       "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
                       "PUSH_NULL", "PRECALL", "CALL", "LOAD_ASSERTION_ERROR", "RAISE_VARARGS", "EXTENDED_ARG"})
"""What the body of a ``for`` loop over the program's iterator may do for its items to be
fetched in batches (names are checked when it runs: ``_takes_every_item``)."""
_CONSUMERS: dict = {}  # (code, offset) -> (consumer's name, ("name" | "call", name)) or None


def _one_value(ins: list, end: int):
    """``(start, (kind, x))`` when ``ins[start:end]`` computes one value: a name (``"name"``,
    its name), a call (``"call"``, the name called) or a generator expression (``"genexpr"``,
    its code), from loads and calls alone; else None."""
    import dis

    need, j = 1, end - 1
    while j >= 0 and need > 0 and ins[j].opname in _CALL_PARTS and not ins[j].is_jump_target:
        i = ins[j]
        need -= dis.stack_effect(i.opcode, i.arg) if i.opcode >= dis.HAVE_ARGUMENT else dis.stack_effect(i.opcode)
        j -= 1
    if need != 0:
        return None
    part = [i for i in ins[j + 1:end] if i.opname != "PUSH_NULL"]
    if len(part) > 2 and part[0].argval == "__execrl_site__" and part[1].opname == "LOAD_CONST":
        part = part[2:]  # a site (``_Sites``): the value of the program's call it notes
    if len(part) == 1 and part[0].opname in _LOADS:
        return j + 1, ("name", part[0].argval)
    if part and part[0].opname in _LOADS and part[-1].opname == "CALL":
        return j + 1, ("call", part[0].argval)
    if (len(part) > 2 and getattr(part[0].argval, "co_name", None) == "<genexpr>"
            and part[1].opname == "MAKE_FUNCTION" and part[1].arg == 0 and part[-1].opname == "CALL"):
        return j + 1, ("genexpr", part[0].argval)
    return None


def _consumer_call(code, lasti: int):
    """The call at ``lasti`` in ``code`` when it is ``name(arg)`` with ``arg`` a name, a call
    ``g(...)`` or a generator expression (the builtin's one argument), else None; or the
    ``for`` loop at ``lasti`` (``("for", iterable, names it loads, names it stores)``) when
    its iterable is a name or a call and its body only computes on names and constants
    (``_LOOP_OPS``; an ``assert`` included, no ``break``)."""
    key = (code, lasti)
    if key in _CONSUMERS:
        return _CONSUMERS[key]
    import dis

    found = None
    ins = list(dis.get_instructions(code))
    at = next((k for k, i in enumerate(ins) if i.offset == lasti), None)
    if at is not None and ins[at].opname == "CALL" and ins[at].arg == 1 and at >= 2:
        k = at - 1 if ins[at - 1].opname == "PRECALL" else at
        arg = _one_value(ins, k)
        if arg is not None and arg[0] > 0 and ins[arg[0] - 1].opname in _LOADS:
            found = (ins[arg[0] - 1].argval, arg[1])
    elif at is not None and ins[at].opname == "FOR_ITER" and at >= 1 and ins[at - 1].opname == "GET_ITER":
        iterable = _one_value(ins, at - 1)
        head, stop = ins[at].offset, ins[at].argval
        body = [i for i in ins[at + 1:] if i.offset < stop]
        if (iterable is not None and iterable[1][0] != "genexpr" and all(i.opname in _LOOP_OPS for i in body)
                and all(head <= i.argval < stop for i in body if i.opcode in dis.hasjabs or i.opcode in dis.hasjrel)):
            found = ("for", iterable[1], tuple({i.argval for i in body if i.opname in _LOADS}),
                     frozenset(i.argval for i in body if i.opname in ("STORE_NAME", "STORE_FAST")))
    if len(_CONSUMERS) > 4096:
        _CONSUMERS.clear()
    _CONSUMERS[key] = found
    return found


def _lookup(frame, name: str, side) -> Any:
    """What ``name`` holds in ``frame`` without resolving it anew (a name of the program's is
    the proxy the judge made when the test used it)."""
    for ns in (frame.f_locals, frame.f_globals):
        if dict.__contains__(ns, name):
            return dict.__getitem__(ns, name)
        if type(ns) is _Names and name in side.named:
            return side.named[name]
    return frame.f_builtins.get(name)


def _takes_every_item(side, frame) -> bool:
    """Whether the program's iterator is being read by a consumer that takes every item with
    no code of the test's between two (``list(g)``, which asks ``__length_hint__`` first;
    ``sum(g)``, ``max(f(x))`` with the builtin and an object of the program's): its
    items may then be produced ahead of the consumer, which nothing can observe."""
    drain = side.drain
    if drain is not None and drain[0] is frame and drain[1] == frame.f_lasti:
        return True
    if frame.f_code.co_name == "<genexpr>":  # ``sum(x * x for x in g)``: the expression in between is pure
        outer = frame.f_back
        if outer is None or not _pure_code(frame.f_code, frame.f_globals, frame.f_builtins) \
                or not isinstance(frame.f_locals.get(".0"), Remote):
            return False
        call = _consumer_call(outer.f_code, outer.f_lasti)
        return (call is not None and call[1][0] == "genexpr" and call[1][1] is frame.f_code
                and any(_lookup(outer, call[0], side) is b for b in _DRAINING))
    call = _consumer_call(frame.f_code, frame.f_lasti)
    if call is None or call[1][0] == "genexpr":
        return False
    if not isinstance(_lookup(frame, call[1][1], side), Remote):
        return False
    if call[0] != "for":
        fn = _lookup(frame, call[0], side)
        return any(fn is b for b in _DRAINING)
    # ``for x in g: total += x``: the body reads numbers and strings only (no object of the
    # program's, no container the test shares with it), calls nothing but the judge's notes
    # and ``_PURE_BUILTINS``, and leaves the loop only when ``g`` ends or by an exception
    for name in call[2]:
        if name.startswith("__execrl_") or _pure_builtin(frame.f_globals, frame.f_builtins, name):
            continue
        for ns in (frame.f_locals, frame.f_globals):
            if dict.__contains__(ns, name):
                if type(dict.__getitem__(ns, name)) not in _NUMBERS:
                    return False
                break
        else:
            if name not in call[3]:
                return False
    return True


_READ_AHEAD_OPS = frozenset({"RETURN_GENERATOR", "POP_TOP", "RESUME", "LOAD_FAST", "STORE_FAST", "LOAD_CONST",
                             "FOR_ITER", "YIELD_VALUE", "JUMP_BACKWARD", "JUMP_FORWARD", "POP_JUMP_FORWARD_IF_FALSE",
                             "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
                             "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "BINARY_OP", "COMPARE_OP", "UNARY_NEGATIVE",
                             "UNARY_NOT", "UNARY_INVERT", "BUILD_TUPLE", "RETURN_VALUE", "RETURN_CONST", "END_FOR",
                             "NOP", "COPY", "SWAP", "CACHE", "EXTENDED_ARG", "CALL_INTRINSIC_1", "RERAISE",
                             "PUSH_NULL", "PRECALL", "CALL"})
"""What a generator expression may do for its items to be read ahead: arithmetic and
comparisons on its own variables and constants, calls of ``_PURE_BUILTINS`` (on those, all
numbers and strings: no code of the test's or the program's runs), no other name."""
_PURE_BUILTINS = frozenset({"str", "int", "float", "abs", "len", "round", "divmod", "pow", "min", "max", "chr", "ord",
                            "bool", "hex", "bin", "oct", "repr"})
_SCALAR_ITERATORS = frozenset({type(iter(range(0))), type(iter("")), type(iter("\u0100")), type(iter(b""))})
_GENERATOR = type((lambda: (yield))())
_TUPLE_ITERATOR = type(iter(()))
_NUMBERS = frozenset({int, float, bool, complex, str, bytes, type(None)})


def _pure_builtin(ns: dict, builtins_ns: dict, name: str) -> bool:
    """``name`` in the test's namespace ``ns`` is one of the builtins ``_PURE_BUILTINS`` (not
    a name of the test's, nor of the program's)."""
    if name not in _PURE_BUILTINS or dict.__contains__(ns, name):
        return False
    if type(ns) is _Names and name in getattr(getattr(dict.get(ns, "__execrl_resolve__"), "__self__", None),
                                              "kinds", (name,)):
        return False
    return builtins_ns.get(name) is getattr(builtins, name)


_PURE_CODES: dict = {}  # code -> the global names it loads, or None when it does more than ``_READ_AHEAD_OPS``


def _pure_code(code, ns: dict, builtins_ns: dict) -> bool:
    """The code of a generator expression does nothing but ``_READ_AHEAD_OPS`` and calls of
    ``_PURE_BUILTINS`` (as ``ns`` and ``builtins_ns`` resolve them)."""
    names = _PURE_CODES.get(code, False)
    if names is False:
        import dis

        names = []
        for i in dis.get_instructions(code):
            if i.opname == "LOAD_GLOBAL":
                names.append(i.argval)
            elif i.opname not in _READ_AHEAD_OPS:
                names = None
                break
        if len(_PURE_CODES) > 4096:
            _PURE_CODES.clear()
        _PURE_CODES[code] = names
    return names is not None and all(_pure_builtin(ns, builtins_ns, n) for n in names)


def _source_refs(gen) -> int:
    return sys.getrefcount(gen.gi_frame.f_locals[".0"])


def _unseen_iterator(it, depth: int = 0) -> bool:
    """An iterator of the test's whose items can be read ahead of the program without anyone
    seeing it: reading has no side effect (a range, a string, a tuple of numbers, or a
    generator expression computing on those alone) and no one else holds what it reads from."""
    t = type(it)
    if t in _SCALAR_ITERATORS:
        return True
    if t is _TUPLE_ITERATOR:
        return all(type(x) in _NUMBERS for x in it.__reduce__()[1][0])
    if t is not _GENERATOR or depth > 8 or it.gi_code.co_name != "<genexpr>" or it.gi_running:
        return False
    frame = it.gi_frame
    if frame is None:
        return True
    if not _pure_code(it.gi_code, frame.f_globals, frame.f_builtins):
        return False
    if ".0" not in frame.f_locals or _source_refs(it) > _UNSHARED_SOURCE_REFS:
        return False
    return _unseen_iterator(frame.f_locals[".0"], depth + 1)


def _an_argument() -> bool:
    """Whether ``_JudgeSide.other`` is encoding an argument of a call of the program's
    (``request_call``, whose references ``_TEMPORARY_REFS`` counts)."""
    f = sys._getframe(2)
    for _ in range(4):
        if f is None:
            return False
        if f.f_code is _JudgeSide.request_call.__code__:
            return True
        f = f.f_back
    return False


class _CountReferences(_JudgeSide):
    """Measures, once, the references an argument that the test holds nowhere (a generator
    expression written in the call) has when ``other`` lends it: the caller's stack, the
    arguments' tuple, the encoder's variables, ``getrefcount``'s; one more means that the
    test holds it too (its variable, a list), and then reading ahead could be seen."""

    def other(self, v, ex, depth):
        self.refs = sys.getrefcount(v)

    def ask(self, msg, ex, text=None):
        return None, None


_counter = _CountReferences(-1)
Remote(_counter, {"g": "f"})(x for x in ())
_TEMPORARY_REFS = _counter.refs
_UNSHARED_SOURCE_REFS = _source_refs(x for x in range(1))
del _counter


# --------------------------------------------------------------------------------------
# A problem, prepared once: the tests compiled with their asserts instrumented for messages
# --------------------------------------------------------------------------------------

class _AssertInfo:
    """What a failure message of one assert shows: the expected side as written (for
    ``x == literal``) and the program's calls in it (``sites``, numbered). The text is made
    from the tree when a message needs it, not for every problem."""

    __slots__ = ("_expected", "sites")

    def __init__(self, expected: ast.expr | None, sites: list[list]) -> None:
        self._expected, self.sites = expected, sites

    @property
    def expected(self) -> str | None:
        node = self._expected
        if isinstance(node, ast.AST):
            self._expected = node = _short(ast.unparse(node))
        return node

    def site_text(self, i: int) -> str:
        site = self.sites[i]
        if isinstance(site[1], ast.AST):
            site[1] = _short(ast.unparse(site[1]), 120)
        return site[1]


def _names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """The names a tree loads, the names it binds, and the modules it imports (packages too)."""
    loaded: set[str] = set()
    stored: set[str] = set()
    imported: set[str] = set()
    Name, arg, defs, handler = ast.Name, ast.arg, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef), \
        ast.ExceptHandler
    for n in ast.walk(tree):
        if isinstance(n, Name):
            (loaded if isinstance(n.ctx, ast.Load) else stored).add(n.id)
        elif isinstance(n, arg):
            stored.add(n.arg)
        elif isinstance(n, defs):
            stored.add(n.name)
        elif isinstance(n, handler):
            if n.name:
                stored.add(n.name)
        elif isinstance(n, ast.Import):
            stored.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
            for a in n.names:
                imported.update(_packages(a.name))
        elif isinstance(n, ast.ImportFrom):
            stored.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
            if n.module and not n.level:
                imported.update(_packages(n.module))
    return loaded, stored, imported


def _packages(dotted: str) -> list[str]:
    """The modules ``import a.b.c`` loads: ``a``, ``a.b``, ``a.b.c``."""
    parts = dotted.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def _plain_literal(node: ast.AST) -> bool:
    """An expected side that can be shown as written: literals, and builtins applied to them."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in _BUILTIN_NAMES:
            return False
        if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def _where(at: ast.AST) -> dict:
    return {"lineno": at.lineno, "col_offset": at.col_offset, "end_lineno": getattr(at, "end_lineno", None),
            "end_col_offset": getattr(at, "end_col_offset", None)}


def _call(name: str, at: ast.AST, *args: ast.expr) -> ast.Call:
    """``name(*args)``, placed where ``at`` is (the compiler needs every node placed; placing
    the new nodes here spares a pass over the whole tree)."""
    where = _where(at)
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load(), **where), args=list(args), keywords=[], **where)


def _number(j: int, at: ast.AST) -> ast.Constant:
    return ast.Constant(j, **_where(at))


class _Instrument(ast.NodeTransformer):
    """Rewrites every ``assert`` so that a failure can say what was compared, without
    changing what it evaluates: ``assert t, m`` becomes ``__execrl_enter__(j)`` then
    ``assert t', __execrl_fail__(j, m)``, where ``t'`` is ``t`` with the values of the
    program's calls (sites) and of the compared side noted as they are computed."""

    def __init__(self, free: set[str], asserts: list[_AssertInfo], n_sites: list[int], at: int | None = None) -> None:
        self.free, self.asserts, self.n_sites, self.at = free, asserts, n_sites, at

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        j = len(self.asserts) if self.at is None else self.at
        sites: list[list] = []
        test = _Sites(self.free, sites, self.n_sites).visit(node.test)
        expected = None
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
                and _plain_literal(test.comparators[0])):
            expected = test.comparators[0]
            test.left = _call("__execrl_got__", test.left, _number(j, test.left), test.left)
        if self.at is None:
            self.asserts.append(_AssertInfo(expected, sites))
        else:  # the number reserved for this assert when its test was prepared
            self.asserts[j] = _AssertInfo(expected, sites)
        msg = _call("__execrl_fail__", node, _number(j, node), *([node.msg] if node.msg is not None else []))
        return [ast.copy_location(ast.Expr(_call("__execrl_enter__", node, _number(j, node))), node),
                ast.copy_location(ast.Assert(test=test, msg=msg), node)]


class _Sites(ast.NodeTransformer):
    """Notes the value of each outermost call of a program's name inside an assert."""

    def __init__(self, free: set[str], sites: list, n_sites: list[int]) -> None:
        self.free, self.sites, self.n_sites = free, sites, n_sites

    def visit_Call(self, node: ast.Call) -> ast.AST:
        root = node.func
        while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
            root = root.value if not isinstance(root, ast.Call) else root.func
        if isinstance(root, ast.Name) and root.id in self.free:
            k = self.n_sites[0]
            self.n_sites[0] += 1
            self.sites.append([k, node])
            return _call("__execrl_site__", node, _number(k, node), node)
        return self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node  # evaluated later, elsewhere: not this assert's value

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda


class _Test:
    __slots__ = ("source", "code", "names", "error", "plain")

    def __init__(self, source: str, code: Any, names: frozenset[str], error: tuple | None = None) -> None:
        self.source, self.code, self.names, self.error = source, code, names, error
        self.plain: _PlainCall | None = None


class _PlainCall:
    """A test ``assert name(literal, ...) == literal`` (no setup code), prepared without
    compiling it: its call as the message the test would send (``text``, or ``None`` when
    its arguments hold containers, which ``make_args`` then builds afresh for every
    candidate with the test's own expressions), the expected value, the number of its
    assert, and its tree, compiled only when a candidate's name is not a function of the
    program (then the test runs as written)."""

    __slots__ = ("name", "text", "make_args", "expected", "j", "tree")

    def __init__(self, name: str, text: str, make_args: Any, expected: Any, j: int, tree: ast.Module) -> None:
        self.name, self.text, self.make_args, self.expected, self.j, self.tree = \
            name, text, make_args, expected, j, tree


_LITERAL_SCALARS = (int, float, complex, str, bytes, bool, type(None))
BATCH_MAX_CALLS = 256
BATCH_MAX_BYTES = 1 << 16


def _literal(node: ast.AST) -> bool:
    """A literal that names nothing (its value is the same at every run of the test)."""
    if isinstance(node, ast.Constant):
        return type(node.value) in _LITERAL_SCALARS
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(_literal(v) for v in node.values)
    return False


def _plain_call_assert(tree: ast.Module) -> tuple[str, ast.expr] | None:
    """``assert name(literal, ...) == literal``: the called name and the expected literal."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    node = tree.body[0]
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.left, ast.Call) and isinstance(test.left.func, ast.Name)
            and not test.left.keywords and all(_literal(a) for a in test.left.args)
            and _literal(test.comparators[0])):
        return None
    if node.msg is not None and not (isinstance(node.msg, ast.Constant) and type(node.msg.value) is str):
        return None
    name = test.left.func.id
    if name in _JUDGE_MODULES or name.startswith("__"):
        return None
    return name, test.comparators[0]


def _content(v: Any) -> Any:
    """What a literal tells the program, whatever its container types: a tuple's items are
    those of the list ``[1, 2]`` (the program can rebuild one from the other); equal
    contents compare equal (``1 == 1.0`` as in ``==``)."""
    return _contents(v, [])


def _contents(v: Any, out: list) -> Any:
    """``_content(v)``; appends to ``out`` the content of ``v`` and of every value inside it
    (the items of its lists, tuples, sets and dicts; a frozenset's items are not listed), in
    one walk."""
    t = type(v)
    if t is int or t is str or t is float or t is bool or v is None:  # most items: themselves
        out.append(v)
        return v
    if isinstance(v, (list, tuple)):
        c = ("seq", tuple([_contents(x, out) for x in v]))
    elif isinstance(v, set):
        c = ("set", frozenset([_contents(x, out) for x in v]))
    elif isinstance(v, frozenset):
        c = ("set", frozenset([_contents(x, []) for x in v]))
    elif isinstance(v, dict):
        c = ("map", frozenset([(_contents(a, out), _contents(b, out)) for a, b in v.items()]))
    elif isinstance(v, (bytes, bytearray)):
        c = ("bytes", bytes(v))
    else:
        c = v
    out.append(c)
    return c


def _number_forms(x: float | int) -> set[str]:
    """A number's text forms: ``3`` → {"3", "3.0"}; ``2.5`` → {"2.5"}."""
    forms = {str(x), repr(x)}
    try:
        f = float(x)
    except (OverflowError, ValueError):
        return forms
    if f == f and f not in (float("inf"), float("-inf")):
        forms.add(repr(f))
        if f.is_integer():
            forms.add(str(int(f)))
    return forms


def _forms(c: Any) -> set[str]:
    """The text forms of a content (``_content``) that a program could turn it into with a plain
    type conversion: a string and its bytes (latin-1 or UTF-8), a number and its digits, a
    sequence of strings and their concatenation, a sequence or set and its items in any order
    (sorted), a dict and its pairs. Two contents with a form in common may carry each other."""
    t = type(c)
    if c is None:
        return {"None"}
    if t is bool:
        return {str(c)} | _number_forms(int(c))
    if t is int or t is float:
        return _number_forms(c)
    if t is str:
        forms = {c}
        try:
            forms |= _number_forms(float(c)) if len(c) < 64 else set()
        except ValueError:
            pass
        return forms
    if t is tuple and len(c) == 2 and c[0] == "bytes":
        forms = {c[1].decode("latin-1")}
        try:
            forms.add(c[1].decode("utf-8"))
        except UnicodeDecodeError:
            pass
        return forms
    if t is tuple and len(c) == 2 and c[0] in ("seq", "set", "map"):
        items = list(c[1])
        if c[0] == "map":  # its pairs, as `list(d.items())` gives them
            reps = sorted(min(_forms(("seq", pair))) for pair in items)
        else:
            reps = sorted(min(_forms(x)) for x in items)
        forms = {"\x1d" + "\x1f".join(reps) + "\x1d"}
        texts = [x for x in items if type(x) is str]
        if items and len(texts) == len(items):
            forms.add("".join(sorted(texts)))
            if c[0] == "seq":
                forms.add("".join(texts))
        return forms
    return {repr(c)}


class Problem:
    """A problem as the judge runs it."""

    def __init__(self, spec: dict) -> None:
        self.mode = spec["mode"]
        self.asserts: list[_AssertInfo] = []
        self.setup: _Test | None = None
        self.tests: list[_Test] = []
        self.imported: set[str] = set()
        self.batch_calls: list[str] = []
        self.batch_frame = b""
        self.batch_complete = False
        self.n_sites = [0]
        self.setup_classes: list[str] = []
        if self.mode == "call":
            self.entry_point = spec["entry_point"]
            self.calls = [(t["args"], t["expected"]) for t in spec["tests"]]
            return
        setup_src = spec.get("setup") or ""
        trees = []
        try:
            setup_tree = ast.parse(setup_src) if setup_src.strip() else None
        except (SyntaxError, ValueError) as e:
            setup_tree = None
            self.setup = _Test(setup_src, None, frozenset(), ("SyntaxError", f"invalid setup code: {e}", ""))
        for src in spec["tests"]:
            try:
                trees.append(ast.parse(src))
            except (SyntaxError, ValueError) as e:
                trees.append(e)
        shapes = [None if isinstance(t, Exception) or setup_src.strip() else _plain_call_assert(t) for t in trees]
        values = _literal_values([None if shape is None else tree.body[0].test for shape, tree in zip(shapes, trees)])
        stored: set[str] = set()
        setup_loaded: set[str] = set()
        n_sites = self.n_sites
        if setup_tree is not None:
            # the classes the setup defines (``ListNode``): the program's names too, as in one
            # interpreter (``_SetupClass``); nothing else of the setup's reaches the run
            self.setup_classes = [n.name for n in setup_tree.body if isinstance(n, ast.ClassDef)]
            setup_loaded, stored, imported = _names(setup_tree)
            setup_loaded -= stored
            self.imported |= imported
            free = setup_loaded - _BUILTIN_NAMES
            tree = _Instrument(free, self.asserts, n_sites).visit(setup_tree)
            self.setup = _Test(setup_src, compile(tree, "<setup>", "exec", dont_inherit=True),
                               frozenset(setup_loaded))
        plain_args: list[tuple] = []
        side = _JudgeSide(-1)
        for src, tree, shape, value in zip(spec["tests"], trees, shapes, values):
            if isinstance(tree, Exception):
                self.tests.append(_Test(src, None, frozenset(),
                                        ("SyntaxError", f"invalid test: {tree}", f"SyntaxError: invalid test: {tree}")))
                continue
            if value is not None:
                plain = self._plain(src, tree, shape[0], value, side)
                if plain is not None:
                    plain_args.append(value[1])
                    continue
            loaded, own, imported = _names(tree)
            self.imported |= imported
            names = (loaded - own - stored) | setup_loaded
            free = names - _BUILTIN_NAMES
            tree = _Instrument(free, self.asserts, n_sites).visit(tree)
            self.tests.append(_Test(src, compile(tree, "<test>", "exec", dont_inherit=True), frozenset(names)))
        self._plan_batch(plain_args)

    def _plain(self, src: str, tree: ast.Module, name: str, value: tuple, side: _JudgeSide) -> _PlainCall | None:
        """A plain call test, prepared without compiling it (see ``_PlainCall``)."""
        make_args, args, expected = value
        ex = _Exchange()
        try:
            text = _dumps(["c", {"g": name}, [side.enc(a, ex) for a in args], []])
        except Exception:  # noqa: BLE001 - not a value this path can hold: the test runs as written
            return None
        test = tree.body[0].test
        j = len(self.asserts)
        k = self.n_sites[0]
        self.n_sites[0] += 1
        self.asserts.append(_AssertInfo(test.comparators[0], [[k, test.left]]))
        entry = _Test(src, None, frozenset((name,)))
        entry.plain = _PlainCall(name, text, make_args if ex.table else None, expected, j, tree)
        self.tests.append(entry)
        return entry.plain

    def test_code(self, test: _Test) -> Any:
        """The compiled test; a plain call test is compiled when first needed (its assert
        keeps the number reserved for it)."""
        if test.code is None:
            plain = test.plain
            free = {plain.name} - _BUILTIN_NAMES
            tree = _Instrument(free, self.asserts, self.n_sites, at=plain.j).visit(plain.tree)
            test.code = compile(tree, "<test>", "exec", dont_inherit=True)
        return test.code

    def _plan_batch(self, plain_args: list[tuple]) -> None:
        """The calls of the tests that come first, when they are plain calls of one name with
        literal arguments (``assert f(3, [1, 2]) == 7``): the judge sends them with the
        program (see ``_ChildSide.serve_batch``), so that the run answers them without a
        round trip each. They are the very messages the tests will send. A test's arguments
        reach the run before the earlier tests' calls are answered, so the batch stops
        before a test whose arguments hold a value that is, or converts to, an earlier test's
        expected value (equal content, or a text form in common, ``_forms``: ``b'hELLO'``
        for ``'hELLO'``, ``'cba'`` for ``['c', 'b', 'a']``, ``'42'`` for ``42``, ``(2, 1)`` for
        ``[1, 2]``): that value never reaches the run before its call has returned, as
        without the batch."""
        name, calls, size = None, [], 0
        expected: list = []
        expected_forms: set = set()
        for test, args in zip(self.tests, plain_args):
            plain = test.plain
            if plain is None or (name is not None and plain.name != name) or len(calls) >= BATCH_MAX_CALLS:
                break
            try:
                if expected:
                    inside: list = []
                    for a in args:
                        _contents(a, inside)
                    if any(c in expected for c in inside):
                        break
                    if any(not expected_forms.isdisjoint(_forms(c)) for c in inside):
                        break
                content = _content(plain.expected)
                forms = _forms(content)
            except Exception:  # noqa: BLE001 - not a literal this check can hold
                break
            size += len(plain.text)
            if size > BATCH_MAX_BYTES:
                break
            name = plain.name
            calls.append(plain.text)
            expected.append(content)
            expected_forms |= forms
        self.batch_complete = bool(calls) and len(calls) == len(self.tests)
        if calls:
            self.batch_calls = calls
            # ``_dumps(["b", name, [each call's message], complete])``, with each message's text as it is
            data = f'["b",{_dumps(name)},[{",".join(calls)}],{"true" if len(calls) == len(self.tests) else "false"}]'
            data = data.encode("ascii")
            self.batch_frame = _STRUCT_LEN.pack(len(data) + 1) + b"J" + data


_NO_ARGUMENTS = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                              defaults=[])


def _scalar(node: ast.expr) -> bool:
    """A literal number, string, bytes, bool or None (possibly signed): a value without
    identity or construction order of its own to keep."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant)


def _literal_values(tests: list[ast.Compare | None]) -> list[tuple | None]:
    """For each ``name(literal, ...) == literal`` (``None`` for other tests): a function
    that builds the arguments with the test's own expressions (``lambda: (a, b)``: the same
    bytecode, so the same objects, down to a set's table), the arguments it built, and the
    expected value; one compile for the whole problem. Arguments that are all scalars need
    no function (nothing of theirs can be changed or named by an answer): they and the
    expected value are read from the tree, without compiling. ``None`` for a test whose
    literals cannot be built (it then runs as written, and raises there)."""
    nodes: list = []
    read: dict[int, tuple] = {}
    for i, t in enumerate(tests):
        if t is None:
            nodes.append(None)
            continue
        if all(_scalar(a) for a in t.left.args):
            try:
                read[i] = (None, tuple(ast.literal_eval(a) for a in t.left.args), ast.literal_eval(t.comparators[0]))
                nodes.append(None)
                continue
            except Exception:  # noqa: BLE001 - e.g. an unhashable set item: built as the test builds it
                pass
        where = _where(t)
        make = ast.Lambda(_NO_ARGUMENTS, ast.Tuple(list(t.left.args), ast.Load(), **where), **where)
        nodes.append(ast.Tuple([make, t.comparators[0]], ast.Load(), **where))
    present = [n for n in nodes if n is not None]
    if not present:
        return [read.get(i) for i in range(len(tests))]

    def evaluate(elts: list[ast.expr]) -> list:
        code = compile(ast.Expression(ast.List(elts, ast.Load(), **_where(elts[0]))), "<tests>", "eval",
                       dont_inherit=True)
        return [(make, make(), expected) for make, expected in eval(code, {"__builtins__": {}})]

    try:
        values = iter(evaluate(present))
        return [read.get(i) if n is None else next(values) for i, n in enumerate(nodes)]
    except Exception:  # noqa: BLE001 - one of them cannot be built: each on its own
        out = []
        for i, n in enumerate(nodes):
            try:
                out.append(read.get(i) if n is None else evaluate([n])[0])
            except Exception:  # noqa: BLE001
                out.append(None)
        return out


# --------------------------------------------------------------------------------------
# Running one candidate
# --------------------------------------------------------------------------------------

class _Names(dict):
    """The tests' namespace: what the setup and the tests bind, then the program's global
    names (looked up in the run when used), then the builtins."""

    def __missing__(self, name: str) -> Any:
        return self["__execrl_resolve__"](name)


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
        that very name (any other stays the program's). The judge never imports a module
        because the program names it: importing runs the module's code (a module object the
        program names ``unittest.__main__`` would make the judge run test discovery)."""
        if name not in self.problem.imported and not (
                name in _STARTUP_MODULES and name.split(".")[0] in getattr(sys, "stdlib_module_names", ())):
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
(``_worker._judge_view``): the setup and the tests work in it, sharing its files with the
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

        os.close(fd)
        _leave_run_dir()


def judge_main(fd: int, cfg: dict) -> None:
    """Serve the controller: compile programs, judge candidates; one message at a time."""
    import os

    sock = _socket.socket(fileno=fd)
    problems: dict[str, Problem] = {}
    fd_space = _socket.CMSG_SPACE(_FD.size)
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

