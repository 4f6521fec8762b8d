"""The program's objects, seen from the judge: ``Remote`` handles whose operations are sent
to the run, the program's exceptions and containers as the test sees them.
"""

from __future__ import annotations

import builtins
import sys
import weakref
from collections import Counter, OrderedDict, defaultdict, deque
from typing import Any

from execrl.sandbox._exchange import _MAX_DEPTH, MAX_VALUE_BYTES, TOO_DEEP, TOO_LARGE
from execrl.sandbox._judge_compare import LentObject, _short, stable_text
from execrl.sandbox._judge_generators import _takes_every_item

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

# --------------------------------------------------------------------------------------
# The program's objects, seen from the judge
# --------------------------------------------------------------------------------------

class NotPlainValue(AssertionError):
    """The truth value of the program's object would be decided by the program's code."""


class ValueTooLarge(Exception):
    """The program's value is too large to cross to the tests (its encoding over
    ``MAX_VALUE_BYTES``): it is never compared, so a test comparing it errs, naming the limit."""


class ValueTooDeep(Exception):
    """A value nested deeper than ``_MAX_DEPTH`` containers: the program's is never compared,
    the test's is never sent to the program."""


def too_deep(what: str) -> ValueTooDeep:
    return ValueTooDeep(f"{what} nests containers deeper than the sandbox's limit of {_MAX_DEPTH} levels "
                        "on a value that crosses between the tests and the program")


class CandidateExit(BaseException):
    """``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit`` raised by the program: it
    ends the test, and test code cannot catch it with ``except Exception``."""


_CANDIDATE_EXITS = {c.__name__: type(c.__name__, (c, CandidateExit), {"__module__": "builtins"})
                    for c in (SystemExit, KeyboardInterrupt, GeneratorExit)}
"""The program's ``SystemExit`` (...) as the test sees it: ``except SystemExit`` catches it; one
that leaves the test stops the tests, as it stops ``python`` (``_Candidate.run_asserts``)."""


class Remote(LentObject):
    """An object of the program's that stays in its run: what the test does with it is done
    there (by a request over the run's socket)."""

    __slots__ = ("_execrl_side", "_execrl_ref", "_execrl_tname", "_execrl_note", "_execrl_buf", "_execrl_end", "_execrl_batch", "_execrl_hash", "__weakref__")

    def __init__(self, side: Any, ref: dict, tname: str = "object", note: str = "") -> None:
        for name, value in (("_execrl_side", side), ("_execrl_ref", ref), ("_execrl_tname", tname), ("_execrl_note", note), ("_execrl_buf", None),
                            ("_execrl_end", None), ("_execrl_batch", 1), ("_execrl_hash", None)):
            object.__setattr__(self, name, value)

    def _execrl_op(self, name: str, *operands: Any) -> Any:
        return Remote._execrl_side.__get__(self).request_op(name, operands)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Remote._execrl_side.__get__(self).request_call(self, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # numpy's protocols are never the program's: ``__array_interface__`` would have the
        # judge's numpy read its own memory at an address the program names
        if name.startswith(("_execrl", "__array", "__dlpack")):
            raise AttributeError(name)
        return Remote._execrl_side.__get__(self).request_attr(self, name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """The judge's copy of the program's numpy array (of bools or numbers), for numpy in
        the test (``numpy.array_equal(f(x), expected)``, ``(f(x) == expected).all()``)."""
        side = Remote._execrl_side.__get__(self)
        got = self._execrl_op("array", self)
        numpy = side.numpy()
        if type(got) is not list or len(got) != 3 or type(got[0]) is not str or type(got[2]) is not list:
            raise TypeError("not a numpy array")
        dt = numpy.dtype(got[0]) if got[0][:1] in "<>|=" and len(got[0]) <= 4 else None
        if dt is None or dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None:
            raise TypeError("not a numpy array")
        out = numpy.array(got[1], dtype=dt).reshape([int(n) for n in got[2]])
        return out if dtype is None else out.astype(dtype)

    def __mro_entries__(self, bases: tuple) -> tuple:
        ref = Remote._execrl_ref.__get__(self)
        name = ref["g"] if type(ref) is dict and type(ref.get("g")) is str else Remote._execrl_tname.__get__(self)
        raise TypeError(f"a test cannot subclass the program's class {_short(name, 80)}: it lives in the "
                        "program's process (a stated difference of the sandbox: see docs/sandbox.md)")

    def __setattr__(self, name: str, value: Any) -> None:
        Remote._execrl_side.__get__(self).request_set(self, name, value)

    def __delattr__(self, name: str) -> None:
        Remote._execrl_side.__get__(self).request_del(self, name)

    def __repr__(self) -> str:
        return self._execrl_op("repr", self)

    def __str__(self) -> str:
        return self._execrl_op("str", self)

    def __len__(self) -> int:
        return self._execrl_op("len", self)

    def __iter__(self) -> Any:
        return self._execrl_op("iter", self)

    def __next__(self) -> Any:
        buf = Remote._execrl_buf.__get__(self)
        if buf:
            return buf.popleft()
        end = Remote._execrl_end.__get__(self)
        if end is None:
            side = Remote._execrl_side.__get__(self)
            # one item per request, so that the program's generator runs no further than the
            # test has asked (its side effects happen when they would in Python); in growing
            # batches only for a consumer that takes every item without running the test's
            # code in between (``_takes_every_item``)
            n = 1
            if _takes_every_item(side, sys._getframe(1)):
                n = Remote._execrl_batch.__get__(self)
                object.__setattr__(self, "_execrl_batch", min(2 * n, 1024))
            items, end = side.request_batch(self, n)
            if items:
                buf = deque(items)
                object.__setattr__(self, "_execrl_buf", buf)
                object.__setattr__(self, "_execrl_end", end)
                return buf.popleft()
        object.__setattr__(self, "_execrl_end", None)  # delivered: the next call asks the run again
        Remote._execrl_side.__get__(self).drain = None
        if end == "s" or end is None:
            raise StopIteration
        if isinstance(end, BaseException):  # decoded with its answer (``_JudgeSide.ask``)
            raise end
        raise Remote._execrl_side.__get__(self).candidate_exception(end)

    def __length_hint__(self) -> int:
        """Asked by ``list()``, ``tuple()``, ``sorted()``, ``str.join`` and ``list.extend``
        before they take every item of the iterator in one go, with no code of the test's in
        between: its items may then come in batches (``__next__``)."""
        frame = sys._getframe(1)
        Remote._execrl_side.__get__(self).drain = (frame, frame.f_lasti)
        return 0

    def __getitem__(self, key: Any) -> Any:
        return self._execrl_op("getitem", self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._execrl_op("setitem", self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._execrl_op("delitem", self, key)

    def __contains__(self, item: Any) -> bool:
        # decided here, on the items the program's object yields: the test's value stays here
        return any(x is item or x == item for x in self)

    def __bool__(self) -> bool:
        value = self._execrl_op("truth", self)
        if value is True:
            return True
        raise NotPlainValue(f"got {describe(self)}")

    def _execrl_refuse_comparison(self) -> None:
        note = Remote._execrl_note.__get__(self)
        if note == TOO_LARGE:
            raise ValueTooLarge(f"the program's {Remote._execrl_tname.__get__(self)} is over the sandbox's "
                                f"{MAX_VALUE_BYTES >> 20} MiB limit on a value that crosses to the tests")
        if note == TOO_DEEP:
            raise too_deep(f"the program's {Remote._execrl_tname.__get__(self)}")

    def _execrl_elementwise(self, other: Any) -> bool:
        """The program's numpy array against a test's list or number: numpy compares them item
        by item (``(f(x) == [0, 25]).all()``), here on the judge's copy (``__array__``)."""
        return Remote._execrl_tname.__get__(self) == "ndarray" and type(other) in (list, tuple, int, float, bool, complex)

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, Remote):
            return self._execrl_op("eq", self, other)
        self._execrl_refuse_comparison()
        if self._execrl_elementwise(other):
            return self.__array__() == other
        return NotImplemented

    def __ne__(self, other: Any) -> Any:
        if isinstance(other, Remote):
            return self._execrl_op("ne", self, other)
        if self._execrl_elementwise(other):
            return self.__array__() != other
        # the program's own __ne__ would need the test's value (it stays here), and "not equal
        # to a plain value" would pass any object: neither side of the verdict is taken
        raise NotPlainValue(f"compared {describe(self)} with != to a plain value")

    def __lt__(self, other: Any) -> Any:
        if not isinstance(other, Remote):
            raise _refused("<", self, other)
        return self._execrl_op("lt", self, other)

    def __le__(self, other: Any) -> Any:
        if not isinstance(other, Remote):
            raise _refused("<=", self, other)
        return self._execrl_op("le", self, other)

    def __gt__(self, other: Any) -> Any:
        if not isinstance(other, Remote):
            raise _refused(">", self, other)
        return self._execrl_op("gt", self, other)

    def __ge__(self, other: Any) -> Any:
        if not isinstance(other, Remote):
            raise _refused(">=", self, other)
        return self._execrl_op("ge", self, other)

    def __hash__(self) -> int:
        """The program's hash of its object (sent with it as an item of a set or a dict key,
        else asked once): a set of the program's points holds them as the program's own
        does. An equal hash never makes the test's value equal to the program's object
        (``__eq__`` above): a plain value is never found in a set by a program's object."""
        h = Remote._execrl_hash.__get__(self)
        if h is None:
            h = self._execrl_op("hash", self)
            if type(h) is not int:
                raise TypeError(f"unhashable type: {Remote._execrl_tname.__get__(self)!r}")
            object.__setattr__(self, "_execrl_hash", h)
        return h

    def __format__(self, spec: str) -> str:
        return self._execrl_op("format", self, spec)  # the program's __format__, for f"{x}" too

    def __instancecheck__(self, instance: Any) -> bool:
        return self._execrl_op("isinstance", instance, self)

    def __subclasscheck__(self, cls: Any) -> bool:
        return self._execrl_op("issubclass", cls, self)

    def __enter__(self) -> Any:
        return self.__getattr__("__enter__")()

    def __exit__(self, etype: Any, value: Any, tb: Any) -> Any:
        suppress = self.__getattr__("__exit__")(etype, value, tb)
        if etype is not None and (isinstance(value, (AssertionError, ValueTooLarge, ValueTooDeep))
                                  or hasattr(value, "execrl_candidate") or hasattr(value, "execrl_refusal")):
            # the program's ``__exit__`` never decides a check: a failing assert of the test's,
            # the program's own exception, or the sandbox's refusal to compute with the
            # program's object leaves the ``with`` block whatever it answers
            return False
        return suppress

    def __reversed__(self) -> Any:
        return self._execrl_op("reversed", self)

    def __round__(self, ndigits: Any = None) -> Any:
        return self._execrl_op("round", self) if ndigits is None else self._execrl_op("round", self, ndigits)


# The handle's own class attributes would answer for the program's object: its ``__doc__`` and
# ``__module__`` are asked of the run like any other attribute (a function without a docstring
# has None, as in Python).
Remote.__doc__ = property(lambda self: self.__getattr__("__doc__"))
Remote.__module__ = property(lambda self: self.__getattr__("__module__"))


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
        return self._execrl_op(op, self, other)

    def reflected(self, other):
        if not isinstance(other, Remote):
            raise _refused(op, self, other)
        return self._execrl_op(op, other, self)

    return forward, reflected


def _refused(op: str, remote: Remote, other: Any) -> TypeError:
    error = TypeError(f"operator {op.rstrip('_')!r} between the program's {Remote._execrl_tname.__get__(remote)} object "
                      f"and the test's {type(other).__name__} value is not computed by the program")
    error.execrl_refusal = True  # never the program's ``__exit__`` to suppress (``Remote.__exit__``)
    return error


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or", "xor",
              "matmul"):
    _fwd, _rev = _binary(_name + "_" if _name in ("and", "or") else _name)
    setattr(Remote, f"__{_name}__", _fwd)
    setattr(Remote, f"__r{_name}__", _rev)
for _name in ("neg", "pos", "abs", "invert", "index", "int", "float", "complex"):
    setattr(Remote, f"__{_name}__", (lambda op: lambda self: self._execrl_op(op, self))(_name))
Remote.__divmod__, Remote.__rdivmod__ = _binary("divmod")
del _name, _fwd, _rev


def _shadow_type(base: type, name: str | None = None) -> type:
    """A plain container holding the content of the program's object of a subclass of
    ``base`` (a namedtuple, a ``Counter`` subclass, a ``list`` subclass, an ``IntEnum``):
    compared, indexed and iterated as its plain content (so a subclass's ``__eq__`` never
    decides a test), its other attributes and methods asked of the run, and so are its text
    (``repr``, ``str``, ``format``: the program's own, as ``print`` shows it) and, for a dict,
    a missing key (the program's ``__missing__``). Named as the program's class."""

    def remote(self):
        return self.__dict__["_execrl_remote"]

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(remote(self), name)

    def __repr__(self):
        try:
            return repr(remote(self))
        except BaseException:  # noqa: BLE001 - the run is gone: the content's text
            return base.__repr__(base(self))

    def __str__(self):
        try:
            return str(remote(self))
        except BaseException:  # noqa: BLE001
            return base.__str__(base(self))

    def __format__(self, spec):
        return format(remote(self), spec)

    methods = {"__getattr__": __getattr__, "__repr__": __repr__, "__str__": __str__, "__format__": __format__}
    if base is dict:
        methods["__missing__"] = lambda self, key: remote(self)[key]
    name = name or f"{base.__name__}_of_the_program"
    return type(name, (base,), dict(methods, __qualname__=name, __module__="__main__"))


_SHADOW_BASES = (tuple, list, dict, set, frozenset, int, float, str, bytes, complex)
_SHADOWS = {base: _shadow_type(base) for base in _SHADOW_BASES}
_SHADOW_TYPES = weakref.WeakSet(_SHADOWS.values())
"""Every shadow type, the named ones of a candidate's (``shadow_type``) while it is judged."""
JUDGE_MADE = weakref.WeakSet(set(_SHADOW_TYPES) | set(_CANDIDATE_EXITS.values()))
"""Classes the judge makes and names as the program's (``__module__`` ``__main__``): shadows, the
program's exception stand-ins (``_JudgeSide.exception_class``), its exits. Not the test's own
classes, so their objects show the program no attribute (``_judge_side._shown_attribute``).
Weak: a candidate's stand-ins go with it (a judge judges many candidates)."""
NAMED_SHADOWS_PER_CANDIDATE = 1024


def shadow_type(base: type, name: str, named: dict) -> type:
    """The shadow type of ``base`` named as the program's class (``type(x).__name__``), made
    once per candidate (``named``: its side's, ``(base, name) -> type``), so a name never
    depends on what candidates the judge saw before; past ``NAMED_SHADOWS_PER_CANDIDATE``
    names, the unnamed one."""
    key = (base, name)
    cls = named.get(key)
    if cls is None:
        if len(named) >= NAMED_SHADOWS_PER_CANDIDATE:
            return _SHADOWS[base]
        cls = named[key] = _shadow_type(base, name)
        _SHADOW_TYPES.add(cls)
        JUDGE_MADE.add(cls)
    return cls


_KEPT_DICTS = (dict, Counter, OrderedDict, defaultdict)


def _assign(container: Any, value: Any) -> None:
    """Give a list, dict or set of the judge's the content ``value``."""
    if isinstance(container, list):
        container[:] = value
    else:
        container.clear()
        container.update(value)


def describe(v: Any) -> str:
    """A value for a message: its repr, short; a program's object by its type and its repr
    (without a memory address)."""
    if isinstance(v, Remote):
        note = Remote._execrl_note.__get__(v)
        if not note:
            try:
                shown = repr(v)
            except BaseException:  # noqa: BLE001 - the run is gone, or its __repr__ failed
                shown = ""
            note = _short(stable_text(shown), 200) if isinstance(shown, str) else ""
        tname = Remote._execrl_tname.__get__(v)
        article = "an" if tname[:1] in "aeiouAEIOU" else "a"
        return f"{article} {tname} object ({note}), not a plain value"
    try:
        return _short(stable_text(repr(v)))
    except BaseException:  # noqa: BLE001 - an int too large to print; a value holding a handle of a run that ended
        return f"<{type(v).__name__}>"
