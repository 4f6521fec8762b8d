"""The program's side of the exchange (``_ChildSide``): in the run's process, it does what the
judge asks (call a function, get an attribute, run an operator) on the program's objects,
and encodes what only this side has (the program's objects as handles, subclasses of plain
types with their plain content).
"""

from __future__ import annotations

import builtins
import operator as _operator
import sys
import time

from execrl.sandbox._child_exit import _WARMING, _exit_status, _flush, _WarmDone
from execrl.sandbox._child_kept import (_DICT_TYPES, _ITERATORS, _KEPT_TYPES, _SCALAR_TYPES, _KeptInStep)
from execrl.sandbox._child_program import (_NOT_PLAIN, _builtin_base, _builtin_base_of_class, _exc_name,
                                           _exc_record, _plain_scalar, _type_name)
from execrl.sandbox._child_refs import _BatchResult, _JudgeRef
from execrl.sandbox._exchange import (_MAX_DEPTH, _MSG_LIMIT, MAX_VALUE_BYTES, TOO_DEEP, TOO_LARGE,
                                      ProtocolError, _bool, _bytearray, _bytes, _bytes_copy, _chk_list, _chk_str,
                                      _complex, _complex_copy, _Counter, _defaultdict, _deque, _dict, _dict_items,
                                      _dumps, _Exchange, _float, _float_copy, _frozenset, _fset_iter, _getattr,
                                      _getpid, _hasattr, _id, _int, _int_copy, _isinstance, _len, _list, _list_iter,
                                      _NoneType, _OrderedDict, _os_exit, _range, _RLock, _set, _set_iter, _setattr,
                                      _shallow, _Side, _str, _str_copy, _text, _tuple, _tuple_iter, _type)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

_CLEAN_BUILTINS = dict(builtins.__dict__)
_DEEP_CONTAINERS = (_list, _tuple, _dict, _set, _frozenset, _deque)
"""Containers that, past ``_MAX_DEPTH``, stay in the run noted ``TOO_DEEP`` (never compared)."""



_PLAIN_BASES = ((_tuple, _tuple_iter, False), (_list, _list_iter, True), (_frozenset, _fset_iter, False),
                (_set, _set_iter, True))
_OPS = {name: _getattr(_operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
    "matmul", "neg", "pos", "abs", "invert", "index", "getitem", "setitem", "delitem", "eq", "ne", "lt", "le",
    "gt", "ge", "concat")}
_OPS.update(len=len, iter=iter, next=next, repr=repr, str=str, hash=hash, format=format, int=int, float=float,
            complex=complex, round=round, reversed=reversed, isinstance=isinstance, issubclass=issubclass,
            divmod=divmod, contains=_operator.contains, truth=None)


def _array_copy(v):
    """A numpy array's plain content for the judge's own copy (``numpy.array_equal`` in the
    test): ``[dtype, nested list, shape]``, for an array of bools or numbers."""
    numpy = sys.modules.get("numpy")
    if numpy is None or _type(v) is not numpy.ndarray:
        raise TypeError(f"{_type_name(_type(v))!r} object is not a numpy array")
    dt = v.dtype
    if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None or v.size > _ARRAY_COPY_LIMIT:
        raise TypeError("a numpy array of this dtype or size is not copied")
    return [dt.str, v.tolist(), _list(v.shape)]


_ARRAY_COPY_LIMIT = 1 << 16
_OPS["array"] = _array_copy


_SCALAR_BASES = ((_int, _int_copy), (_float, _float_copy), (_str, _str_copy), (_bytes, _bytes_copy),
                 (_complex, _complex_copy))

def _truth(v):
    """An object's truth value when the program's code does not decide it; a class that
    defines ``__bool__`` or ``__len__`` would, so its objects have none here."""
    t = _type(v)
    for name in ("__bool__", "__len__"):
        if _hasattr(t, name):
            return {"nb": _type_name(t)}
    return True

class _ChildSide(_KeptInStep, _Side):
    """The program's side: runs what the judge asks for on the program's objects (keeping
    the containers the program holds in step with the judge's copies: ``_KeptInStep``)."""

    # A level of the program's function calling a test's that calls it back costs the run's
    # harness 7 (measured); one of them is left counted, so that with the program's own frame a
    # level costs 2, as under plain Python, where the test's frame and the program's share one
    # stack: 495 levels of the two calling each other before a RecursionError (plain: 498).
    NESTED_FRAMES = 6

    HASHES = True

    def __init__(self, fd: int, sources: dict):
        super().__init__(fd)
        self.g: dict = {}
        self.kinds: dict = {}
        self.sources = sources
        self.shadows: dict = {}  # lent number -> (object, base type, its last content)
        self.pid = _getpid()
        self.lock = None  # made with the first object of the judge's the run holds (``dec_other``)

    def finish(self):
        if _WARMING[0]:  # the warm-up (``warm_up``) runs this class itself, in the template
            raise _WarmDone
        _flush()
        _os_exit(0)

    def _write(self, data: bytes) -> None:
        if _getpid() != self.pid:
            self.forked_child_ends(None)
        _Side._write(self, data)

    def forked_child_ends(self, e) -> None:
        """A process the program forked, its call ended (``sys.exit(0)`` in the child after
        ``os.fork()``): it ends as it would under plain Python, where the exception ends the
        child's copy of the test; it never answers the judge in the run's place."""
        if _getpid() != self.pid:
            _flush()
            _os_exit(0 if e is None else _exit_status(e) if isinstance(e, SystemExit) else 1)

    # ---- encoding what only this side has ------------------------------------------------
    def other(self, v, ex, depth):
        t = _type(v)
        if t is _JudgeRef:
            return {"j": _JudgeRef._execrl_n.__get__(v)}
        mod = _getattr(t, "__module__", "")
        # a numpy scalar as the same numpy scalar in the judge: ``isinstance(r, int)`` is
        # false for ``numpy.int64``, ``r is True`` for ``numpy.bool_``, as in Python
        scalar = self.numpy_scalar(v, t)
        if scalar is not None:
            return {"N": [scalar[0], self.enc(scalar[1], ex, depth)]}
        if t is _type:
            name = _getattr(v, "__name__", None)
            if _type(name) is _str and not name.startswith("_") and _CLEAN_BUILTINS.get(name) is v:
                return {"B": name}  # ``type(x) == int`` in the test
            if issubclass(v, BaseException):
                key = self._class_key(v)
                if key is not None:  # ``except Stack.Empty`` in the test: the judge's stand-in
                    return {"X": [key, _builtin_base_of_class(v)]}
        for base, copy in _SCALAR_BASES:
            if _isinstance(v, base):  # a subclass (an IntEnum, a str subclass): its plain value, not its type
                return {"S": [self.lend(v), _type_name(t), self.enc(copy(v), ex, depth)]}
        if depth <= _MAX_DEPTH:
            if _isinstance(v, _dict):  # Counter & co. of a subclass of theirs, or any dict subclass
                n = self.lend(v)
                plain = _dict(_dict_items(v))
                self.shadows[n] = (v, _dict, _shallow(v))
                return {"S": [n, _type_name(t), self.enc(plain, ex, depth)]}
            for base, items, mutable in _PLAIN_BASES:
                if _isinstance(v, base):
                    n = self.lend(v)
                    plain = base(items(v))
                    if mutable:
                        self.shadows[n] = (v, base, _shallow(v))
                    return {"S": [n, _type_name(t), self.enc(plain, ex, depth)]}
        if mod == "numpy" and _hasattr(v, "item") and _getattr(v, "ndim", 1) == 0:
            item = v.item()
            if _type(item) is not t:  # (a longdouble's item is itself: it stays a handle)
                return self.enc(item, ex, depth)
        if depth > _MAX_DEPTH and _isinstance(v, _DEEP_CONTAINERS):
            return {"h": [self.lend(v), _type_name(t), TOO_DEEP]}
        return {"h": [self.lend(v), _type_name(t)]}

    def dec_other(self, tag, val, ex):
        if tag == "h":
            return self.lent_object(val[0] if _type(val) is _list and val else val)
        if tag == "j":
            ref = self.proxies.get(val)
            if ref is None:
                if _type(val) is not _int:
                    raise ProtocolError("bad judge reference")
                if self.lock is None:  # before the program holds anything of the judge's to call
                    self.lock = _RLock()
                ref = self.proxies[val] = _JudgeRef(self, val)
            return ref
        if tag == "g":
            return self.g[_chk_str(val)]
        if tag == "B":
            return _CLEAN_BUILTINS[_chk_str(val)]
        if tag == "m":
            return __import__(_chk_str(val), fromlist=["_"])
        raise ProtocolError(f"unknown tag {tag!r}")

    # ---- serving the judge --------------------------------------------------------------
    def serve(self) -> None:
        while True:
            # before waiting for the judge, which may be waiting for these; a request already
            # here (the calls sent with the program) takes them with its first answer, in one
            # write (the judge sent it without waiting for them)
            if self.held and not self.buf:
                self._write(self.held)
                self.held = b""
            req = self.recv()
            if req[0] == "x":
                self.finish()
            if req[0] == "u":
                self.apply_kept(req)
                continue
            if req[0] == "p":
                self.charge_peer(req)
                continue
            if req[0] == "b":
                self.serve_batch(req)
                continue
            self.send_text(self.serve_one(req))

    def serve_batch(self, req) -> None:
        """Calls the judge sent ahead (``["b", name, [call, ...], last]``: the calls of the
        tests that come first, in their order, each a plain call of ``name`` with literal
        arguments), answered one by one as if each had come alone. The batch stops (``["z"]``:
        the judge sends the rest itself) unless ``name`` is a function of the program, and
        after an answer that lent the judge an object: the judge may then ask about it before
        the next test's call, as it would without the batch. When the calls are those of all
        the tests (``last``) and all were answered, the run ends as on ``["x"]``: the judge
        holds only plain values of its, so it has nothing more to ask."""
        if _len(req) not in (3, 4) or _type(req[1]) is not _str:
            raise ProtocolError("malformed batch")
        calls = _chk_list(req[2])
        served = 0
        lent_before = _len(self.lent)
        if self.kinds.get(req[1]) == "f":
            name = req[1]
            target = {"g": name}
            for call in calls:
                if _type(call) is not _list or not call or call[0] != "c":
                    raise ProtocolError("malformed batch")
                lent = _len(self.lent)
                if _scalar_call(call, target):
                    # what ``serve_one`` does for it, without decoding: scalars are their own
                    # values, and a call with no container to copy in has none to copy out
                    try:
                        v = self.g[name](*call[2])
                    except BaseException as e:  # noqa: BLE001 - the program's exception, reported as such
                        text = self._answer_error(e, _Exchange(), None)
                    else:
                        ex = _Exchange()
                        # (a scalar holds no container: nothing of it can be kept)
                        kept = () if _type(v) in _SCALAR_TYPES else self._kept(v, ex)
                        text = self._answer(v, ex, None, kept)
                        del v
                else:
                    text = self.serve_one(call)
                self.send_text(text)
                served += 1
                if _len(self.lent) != lent:
                    break
        if served < _len(calls):
            self.send_text('["z"]')
        elif _len(req) == 4 and req[3] is True and _len(self.lent) == lent_before:
            # the calls of every test, and no object lent: the judge asks nothing more (after
            # a last answer that lent one, the judge may ask about it: it ends the run then)
            self.finish()

    def serve_one(self, req) -> str:
        ex = _Exchange()
        state = [None]
        try:
            v = self._perform(req, ex, state)
        except BaseException as e:  # noqa: BLE001 - the program's exception, reported as such
            return self._answer_error(e, ex, state[0])
        kept = self._kept(v, ex)
        if state[0]:
            held = self._held_arguments(v, ex, state[0])
            if held:
                kept = kept + held
        return self._answer(v, ex, state[0], kept)

    def _perform(self, req, ex: _Exchange, state: list):
        op = req[0]
        dec = self.dec
        if op == "c":
            fn = dec(req[1], ex)
            args = [dec(a, ex) for a in _chk_list(req[2])]
            kwargs = {_chk_str(k): dec(a, ex) for k, a in _chk_list(req[3])}
            state[0] = self.snapshot(ex)
            return fn(*args, **kwargs)
        if op == "o":
            fn = _OPS[req[1]]
            args = [dec(a, ex) for a in _chk_list(req[2])]
            state[0] = self.snapshot(ex)
            if fn is None:
                return _truth(args[0])
            return fn(*args)
        if op == "a":
            return _getattr(dec(req[1], ex), _chk_str(req[2]))
        if op == "s":
            obj, value = dec(req[1], ex), dec(req[3], ex)
            state[0] = self.snapshot(ex)
            _setattr(obj, _chk_str(req[2]), value)
            return None
        if op == "d":
            delattr(dec(req[1], ex), _chk_str(req[2]))
            return None
        if op == "n":
            return self.g[_chk_str(req[1])]
        if op == "t":
            return self._batch(dec(req[1], ex), req[2])
        if op == "k":
            name, args = _chk_str(req[1]), [dec(a, ex) for a in _chk_list(req[2])]
            # as for "c": the arguments' new content goes back with the answer, so a result that is
            # an argument changed in place (``x.sort(); return x``) is judged as it is now
            state[0] = self.snapshot(ex)
            return self._entry(name, args)
        raise ProtocolError(f"unknown request {op!r}")

    def _batch(self, it, n):
        """Up to ``n`` next items of an iterator (fewer once one takes a while), then how it
        ended: ``None`` (more may follow), ``"s"`` (exhausted) or the exception it raised,
        which the judge raises when the items before it are used up."""
        items = []
        end = None
        start = time.thread_time()
        for _ in _range(n if _type(n) is _int and 0 < n <= 4096 else 1):
            try:
                items.append(next(it))
            except StopIteration as e:
                # a generator's ``return value``: the test's ``yield from`` and ``e.value`` read it
                end = "s" if e.value is None else e
                break
            except BaseException as e:  # noqa: BLE001
                end = e  # recorded with the answer (``_end``), its values encoded in its exchange
                break
            if time.thread_time() - start > 0.002:
                break
        return _BatchResult(items, end)

    def _entry(self, name: str, args: list):
        g = self.g
        sol = g.get("Solution")
        if _isinstance(sol, _type) and _hasattr(sol, name):
            fn = _getattr(sol(), name)
        else:
            fn = g[name]
        # a generator or iterator is returned as itself: it equals no expected list, as under
        # TACO's call harness (``output == expected``, a tuple read as a list)
        return fn(*args)

    def _class_key(self, t):
        """The judge's key for the program's exception class ``t``: its global name, or the
        qualified name of a class of the program's that is not a global (``Stack.Empty``)."""
        for name, v in self.g.items():
            if v is t:
                return name
        try:
            if t.__module__ == "__main__" and _type(t.__qualname__) is _str:
                return _text(t.__qualname__, 200)
        except BaseException:  # noqa: BLE001 - a candidate's metaclass
            pass
        return None

    def _exc_detail(self, e, depth: int, rex: _Exchange | None = None, text: str | None = None):
        """What the test may read of an exception besides its type and text: its arguments
        and attributes (plain scalars as themselves; with ``rex``, the exchange of the answer
        that carries the exception, any other value encoded as a returned one is: ``"A"``,
        ``"D"``), its class when the standard library's (``json.JSONDecodeError``), the
        exception it was raised from (``__cause__``)."""
        try:
            full = BaseException.args.__get__(e)
            args = [_plain_scalar(a) for a in full] if _len(full) <= 16 else None
            encoded_args = None
            if args is not None and _NOT_PLAIN in args:
                args = None
                if rex is not None and _small(full):
                    encoded_args = self.enc(_list(full), rex)
            attrs, encoded_attrs = [], []
            for k, v in _list(_dict(object.__getattribute__(e, "__dict__")).items())[:32]:
                if _type(k) is not _str or k.startswith("_"):
                    continue
                plain = _plain_scalar(v)
                if plain is not _NOT_PLAIN:
                    attrs.append([k, plain])
                elif rex is not None and _small(v):
                    encoded_attrs.append([k, self.enc(v, rex)])
            t = _type(e)
            cls = None
            mod = t.__module__
            stdlib = getattr(sys, "stdlib_module_names", ())
            if _type(mod) is _str and mod != "builtins" and mod.split(".")[0] in stdlib:
                found = sys.modules.get(mod)
                for part in _str(t.__qualname__).split("."):
                    found = _getattr(found, "__dict__", {}).get(part)
                if found is t:  # the module's own class, not one that names the module as its own
                    cls = [mod, _text(t.__qualname__, 200)]
            cause = None
            c = BaseException.__cause__.__get__(e)
            if c is not None and depth > 1:
                cause = [_exc_name(c), _text(c), "", _builtin_base(c), self._class_key(_type(c)),
                         self._exc_detail(c, depth - 1, rex)]
            detail = {"a": args, "d": attrs, "c": cls, "k": cause}
            if encoded_args is not None:
                detail["A"] = encoded_args
            if encoded_attrs:
                detail["D"] = encoded_attrs
            if text is not None:
                detail["s"] = text
            return detail
        except BaseException:  # noqa: BLE001 - a candidate's exception that resists: its text only
            return None

    def _answer(self, v, ex: _Exchange, snap, kept=()) -> str:
        self.tell_cpu()
        rex = ex.follow()
        if _type(v) is _BatchResult:
            head = ["r", self.enc(v.items, rex), self.updates(snap, rex), self._refresh(rex)]
            head.append(self._end(v.end, rex))
        else:
            head = ["r", self.enc(v, rex), self.updates(snap, rex), self._refresh(rex)]
            if snap and _type(v) in _ITERATORS:
                # an iterator made from the test's containers (a generator's arguments): they
                # are kept in step while it runs, as the test's own objects would change
                kept = _list(kept) + [ex.table[k] for k in snap if _type(ex.table[k]) in _KEPT_TYPES]
            if kept:  # [k, n]: the response's k-th container is the program's object n, kept in step
                pairs = []
                for o in kept:
                    k = rex.seen.get(_id(o))
                    if k is not None and rex.table[k] is o:
                        pairs.append([k, self.lend(o)])
                head += [None, pairs]
        try:
            text = _dumps(head)
        except (TypeError, ValueError, RecursionError):
            text = None
        if kept and text is not None and _len(text) <= MAX_VALUE_BYTES:
            for k, n in head[5]:
                o = rex.table[k]
                self.shadows[n] = (o, _dict if _type(o) in _DICT_TYPES else _type(o), _shallow(o))
        if text is None or _len(text) > MAX_VALUE_BYTES:
            rex = ex.follow()
            note = TOO_LARGE if text is not None else "value not encodable"
            if _type(v) is _BatchResult:  # each item a handle: the batch stays a list of items
                value = {"l": [{"h": [self.lend(x), _type_name(_type(x)), note]} for x in v.items]}
                head = ["r", value, self.updates(snap, rex), self._refresh(rex)]
                head.append(self._end(v.end, rex))
            else:
                head = ["r", {"h": [self.lend(v), _type_name(_type(v)), note]}, self.updates(snap, rex),
                        self._refresh(rex)]
            text = _dumps(head)
        return text

    def _exception_head(self, e) -> tuple[list, str | None]:
        """``[type, message, trace, builtin bases]`` of the program's exception, and its whole
        text (up to ``EXCEPTION_TEXT_LIMIT``) where the message cut it: the test's ``str(e)``."""
        text = _text(e, EXCEPTION_TEXT_LIMIT)
        record = _exc_record(e, self.sources, text[:_MSG_LIMIT] + "..." if _len(text) > _MSG_LIMIT else text)
        return record, (text if _len(text) > _MSG_LIMIT else None)

    def _end(self, end, rex: _Exchange):
        """How a batch of an iterator's items ended, as the answer carries it: None (more may
        follow), ``"s"`` (exhausted), or the exception it raised (a ``StopIteration`` with a
        generator's return value) recorded with its values encoded in the answer's exchange."""
        if end is None or _type(end) is _str:
            return end
        record, text = self._exception_head(end)
        return record + [self._class_key(_type(end)), self._exc_detail(end, 3, rex, text)]

    def _answer_error(self, e, ex: _Exchange, snap) -> str:
        self.forked_child_ends(e)
        self.tell_cpu()
        rex = ex.follow()
        try:
            record, text = self._exception_head(e)
            updates = self.updates(snap, rex)
            refresh = self._refresh(rex)
            # the detail's values are encoded after the updates: the judge decodes them in this order
            return _dumps(["e", *record, updates, refresh, self._class_key(_type(e)),
                           self._exc_detail(e, 3, rex, text)])
        except BaseException:  # noqa: BLE001 - e.g. the updates cannot be encoded
            return _dumps(["e", *_exc_record(e, self.sources), [], [], None])



EXCEPTION_TEXT_LIMIT = 1 << 16
"""Characters of the program's exception's text that reach the test's ``str(e)``."""
EXCEPTION_VALUE_UNITS = 100_000
"""How much of an exception's arguments and attributes is sent with it (``_small``): an item of
a container is one unit, 64 characters of a string or bytes one more. A larger one is left out
(its text stays): encoding it would cost the run's time and the message's size."""


def _small(v) -> bool:
    """Whether ``v`` holds at most ``EXCEPTION_VALUE_UNITS`` (plain containers walked, anything
    else one unit: it crosses as a handle)."""
    budget = EXCEPTION_VALUE_UNITS
    stack = [v]
    while stack:
        x = stack.pop()
        t = _type(x)
        budget -= 1
        if t is _str or t is _bytes or t is _bytearray:
            budget -= _len(x) // 64
        elif t in (_list, _tuple, _set, _frozenset, _deque):
            if _len(x) > budget:
                return False
            stack.extend(x)
        elif t is _dict:
            if 2 * _len(x) > budget:
                return False
            for k, item in _dict_items(x):
                stack.append(k)
                stack.append(item)
        if budget < 0:
            return False
    return True


def _scalar_call(call: list, target: dict) -> bool:
    """``["c", target, [scalar, ...], []]``: a call of ``target`` with scalar arguments only."""
    if _len(call) != 4 or call[1] != target or call[3] != [] or _type(call[2]) is not _list:
        return False
    for a in call[2]:
        if _type(a) not in _SCALAR_TYPES:
            return False
    return True


def _global_kinds(g: dict) -> dict:
    """What each of the program's global names holds, for the judge's namespace: a module
    (``m:`` its name), a plain value (``v``, read when used), an exception class (``x:`` its
    builtin base) or anything else (``f``, a handle)."""
    out = {}
    for name, v in _list(g.items()):
        if _type(name) is not _str or name.startswith("__"):
            continue
        t = _type(v)
        if t is _ModuleType:
            out[name] = "m:" + _text(_getattr(v, "__name__", name), 200)
        elif t in _PLAIN_TYPES:
            out[name] = "v"
        elif t is _type and issubclass(v, BaseException):
            out[name] = "x:" + _builtin_base_of_class(v)
        else:
            out[name] = "f"
    return out



_ModuleType = type(sys)
_PLAIN_TYPES = frozenset({_int, _str, _float, _bool, _NoneType, _list, _tuple, _dict, _set, _frozenset, _bytes,
                          _bytearray, _complex, _range, _Counter, _OrderedDict, _defaultdict, _deque})
