"""The child side: what runs in a forked run, around the candidate program.

Everything here executes after fork, in the run's process. Records written by the child on
its result fd are JSON lines:

    ["c", etype, message, trace]        the program does not compile
    ["l", etype, message, trace]        the program (or setup code) raised while loading
    ["v", i, [enc, ...]]                test i: encoded values of its probes (or call result)
    ["u", i, type_name, repr]           test i: a probe value is not a plain value
    ["e", i, etype, message, trace]     test i raised
    ["r", i, entries, exc]              test i (replayed): the values its recorded expressions
                                        took, in order ([k, "v", enc], [k, "u", type, repr],
                                        [k, "x", etype, message, trace, builtin base], and
                                        ["a", j] / ["z", j] around assert j), and the exception
                                        that ended the test outside them, if any
    ["d", n, token]                     the harness finished all n tests (written last)
"""

from __future__ import annotations

import builtins
import gc
import marshal
import operator as _operator
import os
import sys
import time
import weakref

from execrl.sandbox._child_refs import _BatchResult, _JudgeRef
from execrl.sandbox._exchange import (_GENERATOR_TYPES, _MAX_DEPTH, _STRUCT_LEN, MAX_VALUE_BYTES, RESULT_FD, TOO_DEEP,
                                      TOO_LARGE,
                                      ProtocolError, _bool, _bytearray, _bytes, _bytes_copy, _chk_list,
                                      _chk_str, _complex, _complex_copy, _Counter, _defaultdict, _deque, _dict,
                                      _dict_items, _dumps, _Exchange, _float, _float_copy, _frozenset,
                                      _fset_iter, _getattr, _getpid, _getrefcount, _hasattr, _id, _int,
                                      _int_copy, _isinstance, _len, _list, _list_iter, _NoneType, _OrderedDict,
                                      _os_exit, _os_write, _range, _RLock, _set, _set_iter, _setattr, _shallow,
                                      _Side, _str, _str_copy, _text, _tuple, _tuple_iter, _type, _unchanged)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

# --------------------------------------------------------------------------------------
# Child side: runs the candidate. Everything here executes after fork.
# --------------------------------------------------------------------------------------

_CLEAN_BUILTINS = dict(builtins.__dict__)


def _emit(record) -> None:
    """A record on the result channel (``stdio`` runs: how the program ended)."""
    try:
        data = (_dumps(record) + "\n").encode("utf-8", "surrogatepass")
    except Exception:  # noqa: BLE001
        data = b'["u",-1,"unencodable record",""]\n'
    view = memoryview(data)
    while view:
        n = _os_write(RESULT_FD, view)
        view = view[n:]


def _exc_name(e) -> str:
    try:
        return _type(e).__name__
    except BaseException:  # noqa: BLE001
        return "BaseException"


def _format_exc(e, sources: dict) -> str:
    frames = []
    tb = getattr(e, "__traceback__", None)
    try:
        while tb is not None:
            co = tb.tb_frame.f_code
            if co.co_filename in sources:
                frames.append((co.co_filename, tb.tb_lineno, co.co_name))
            tb = tb.tb_next
    except BaseException:  # noqa: BLE001
        pass
    lines = ["Traceback (most recent call last):"] if frames else []
    if _len(frames) > 8:
        lines.append(f"  ... {_len(frames) - 8} more frames")
        frames = frames[-8:]
    for fn, ln, name in frames:
        lines.append(f'  File "{fn}", line {ln}, in {name}')
        src = sources[fn]
        if _type(src) is _str:
            src = src.splitlines()
        if src and 0 < ln <= _len(src):
            lines.append("    " + src[ln - 1].strip()[:200])
    lines.append(f"{_exc_name(e)}: {_text(e)}")
    return "\n".join(lines)


def _syntax_trace(e) -> str:
    text = (getattr(e, "text", None) or "").rstrip("\n")
    lines = [f'  File "<solution>", line {getattr(e, "lineno", "?")}']
    if text:
        lines.append("    " + text.strip()[:200])
    lines.append(f"{_exc_name(e)}: {_text(getattr(e, 'msg', e))}")
    return "\n".join(lines)


def compile_candidate(code: str):
    """Compile the program; return (code object, None) or (None, "c" record)."""
    try:
        return compile(code, "<solution>", "exec", dont_inherit=True), None
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ValueError (NUL bytes), MemoryError, ...
        return None, ["c", _exc_name(e), _text(getattr(e, "msg", e)), _syntax_trace(e)]


def _load_program(compiled, sources: dict):
    """Execute the compiled candidate as ``__main__``: (its globals, None), or (None, its
    exception as ``[type, message, trace]``) when loading raised (``SystemExit`` too)."""
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    module.__file__ = "solution.py"  # as for ``python solution.py``
    sys.modules["__main__"] = module
    g = module.__dict__
    try:
        exec(compiled, g)
    except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, ... all count
        return None, [_exc_name(e), _text(e), _format_exc(e, sources)]
    return g, None


def _type_name(t) -> str:
    try:
        name = t.__name__
        return name if _type(name) is _str else "object"
    except BaseException:  # noqa: BLE001 - a candidate's metaclass
        return "object"


_NOT_PLAIN = object()


def _plain_scalar(v):
    """``v`` when it crosses as itself in an exception's detail (None, bool, a small int, a
    finite float, a short str), else ``_NOT_PLAIN``."""
    t = _type(v)
    if v is None or t is _bool or (t is _str and _len(v) <= 2000):
        return v
    if t is _int and -(1 << 62) < v < (1 << 62):
        return v
    if t is _float and v == v and v not in (float("inf"), float("-inf")):
        return v
    return _NOT_PLAIN


def _exc_record(e, sources: dict) -> list:
    return [_exc_name(e), _text(e), _format_exc(e, sources), _builtin_base(e)]


def _builtin_base(e) -> str:
    """The nearest builtin exception class of ``e`` (the judge raises that one)."""
    try:
        for cls in _type(e).__mro__:
            if cls.__module__ == "builtins":
                return cls.__name__
    except BaseException:  # noqa: BLE001
        pass
    return "Exception"


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


class _ChildSide(_Side):
    """The program's side: runs what the judge asks for on the program's objects."""

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
        if mod == "fractions" and t is _getattr(sys.modules.get("fractions"), "Fraction", None):
            return {"F": [self.enc(v.numerator, ex, depth), self.enc(v.denominator, ex, depth)]}
        if mod == "decimal" and t is _getattr(sys.modules.get("decimal"), "Decimal", None):
            return {"M": _str(v)}
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

    def _held_arguments(self, v, ex: _Exchange, snap) -> list:
        """The test's lists, dicts and sets (the request's arguments) that the program still
        holds after the call (``Logger(out)`` keeps ``out``, later calls append to it): kept in
        step both ways, as a result the program holds is (``_kept``), so the test sees what
        later calls do to them. Found from reference counts, less those this exchange's own
        containers, the call's snapshot and the result hold, and the harness's own
        (``_HELD_BASE``, measured once)."""
        return [o for o, excess in _argument_references(ex.table, snap, v)
                if excess > _HELD_BASE and _id(o) not in self.lent_ids]

    def _kept(self, v, ex: _Exchange) -> list:
        """The lists, dicts and sets of a result (not the request's own arguments) that the
        program holds elsewhere too (its own list returned, an attribute, a memo): the judge's
        copies of these stay in step with them both ways (``apply_kept``, ``_refresh``), as if
        the test held the program's object. Found from reference counts, less the references
        inside the result and the harness's own two to the result (the caller's variable and
        this parameter); a result too large to walk is not looked at."""
        t = _type(v)
        if t not in _WALKED:
            return []
        if _WALKED.isdisjoint(map(_type, v.values() if t in _DICT_TYPES else v)):
            # no container inside (most results): only the result itself can be the program's
            if t not in _KEPT_TYPES or any(o is v for o in ex.table):
                return []
            # references: the caller's variable, this parameter, the argument of getrefcount
            return [v] if _getrefcount(v) > 3 else []
        x = None
        args = {_id(o) for o in ex.table}
        parents: dict = {}
        found = []
        visited = set()
        stack = [v]
        budget = _KEPT_WALK_LIMIT
        while stack:
            o = stack.pop()
            if _id(o) in visited:
                continue
            visited.add(_id(o))
            t = _type(o)
            if t in _KEPT_TYPES and _id(o) not in args:
                found.append(o)
            items = o.values() if t in _DICT_TYPES else o
            for x in items:
                if _type(x) in _WALKED:
                    parents[_id(x)] = parents.get(_id(x), 0) + 1
                    stack.append(x)
            budget -= _len(o)
            if budget < 0:
                return []
        o = x = items = None
        kept = []
        count = _getrefcount
        for o in found:  # references: ``found``, ``o``, the argument of getrefcount
            if count(o) > 3 + parents.get(_id(o), 0) + (2 if o is v else 0):
                kept.append(o)
        if not kept:
            return kept
        # what the program reaches through a container it holds, it holds too
        ids = {_id(o) for o in found}
        marked = {_id(o) for o in kept}
        stack = _list(kept)
        while stack:
            o = stack.pop()
            for x in (o.values() if _type(o) in _DICT_TYPES else o):
                if _type(x) in _WALKED and _id(x) in visited and _id(x) not in marked:
                    marked.add(_id(x))
                    stack.append(x)
                    if _id(x) in ids:
                        kept.append(x)
        return kept

    def apply_kept(self, msg):
        """``["u", [[k, content], ...], [n, ...], [n, ...]]``: the test changed its copies of the
        program's containers (the k-th of the last list; the program's objects take the new
        content, a kept container in it as itself), and no longer holds those of the second list
        (no longer kept in step)."""
        if _len(msg) != 4:
            raise ProtocolError("malformed update")
        # the contents are numbered after the kept containers ``msg[3]`` (``{"@": k}``: the k-th)
        table = []
        for n in _chk_list(msg[3]):
            kept = self.shadows.get(n) if _type(n) is _int else None
            if kept is None or _type(kept[0]) not in _KEPT_TYPES:
                raise ProtocolError("an update of no kept container")
            table.append(kept[0])
        ex = _Exchange()
        for entry in _chk_list(msg[1]):
            k, content = _chk_list(entry)
            if _type(k) is not _int or not 0 <= k < _len(table):
                raise ProtocolError("an update of no kept container")
            ex.table = _list(table)
            self.apply_updates([[k, content]], ex)
        for n in _chk_list(msg[3]):
            obj = self.shadows[n][0]
            self.shadows[n] = (obj, self.shadows[n][1], _shallow(obj))
        for n in _chk_list(msg[2]):
            kept = self.shadows.get(n) if _type(n) is _int else None
            if kept is not None and _type(kept[0]) in _KEPT_TYPES:
                del self.shadows[n]

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
            return self._entry(_chk_str(req[1]), [dec(a, ex) for a in _chk_list(req[2])])
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
            except StopIteration:
                end = "s"
                break
            except BaseException as e:  # noqa: BLE001
                end = _exc_record(e, self.sources) + [self._class_key(_type(e)), self._exc_detail(e, 3)]
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
        v = fn(*args)
        if _isinstance(v, _GENERATOR_TYPES):
            v = _list(v)
        return v

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

    def _exc_detail(self, e, depth: int):
        """What the test may read of an exception besides its type and text: its arguments
        and attributes when they are plain scalars, its class when the standard library's
        (``json.JSONDecodeError``), the exception it was raised from (``__cause__``)."""
        try:
            args = BaseException.args.__get__(e)
            args = [_plain_scalar(a) for a in args] if _len(args) <= 16 else None
            if args is not None and _NOT_PLAIN in args:
                args = None
            attrs = []
            for k, v in _list(_dict(object.__getattribute__(e, "__dict__")).items())[:32]:
                v = _plain_scalar(v)
                if _type(k) is _str and not k.startswith("_") and v is not _NOT_PLAIN:
                    attrs.append([k, v])
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
                         self._exc_detail(c, depth - 1)]
            return {"a": args, "d": attrs, "c": cls, "k": cause}
        except BaseException:  # noqa: BLE001 - a candidate's exception that resists: its text only
            return None

    def _refresh(self, ex: _Exchange) -> list:
        """New content of the program's container subclasses the judge holds a copy of."""
        out = []
        for n, (obj, base, before) in self.shadows.items():
            if not _unchanged(before, obj):
                plain = _dict(_dict_items(obj)) if base is _dict else base(obj)
                out.append([n, self.enc(plain, ex, 1)])
                self.shadows[n] = (obj, base, _shallow(obj))
        return out

    def _answer(self, v, ex: _Exchange, snap, kept=()) -> str:
        self.tell_cpu()
        rex = ex.follow()
        if _type(v) is _BatchResult:
            head = ["r", self.enc(v.items, rex), self.updates(snap, rex), self._refresh(rex), v.end]
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
                head = ["r", value, self.updates(snap, rex), self._refresh(rex), v.end]
            else:
                head = ["r", {"h": [self.lend(v), _type_name(_type(v)), note]}, self.updates(snap, rex),
                        self._refresh(rex)]
            text = _dumps(head)
        return text

    def _answer_error(self, e, ex: _Exchange, snap) -> str:
        self.forked_child_ends(e)
        self.tell_cpu()
        rex = ex.follow()
        try:
            return _dumps(["e", *_exc_record(e, self.sources), self.updates(snap, rex), self._refresh(rex),
                           self._class_key(_type(e)), self._exc_detail(e, 3)])
        except BaseException:  # noqa: BLE001 - e.g. the updates cannot be encoded
            return _dumps(["e", *_exc_record(e, self.sources), [], [], None])


_DICT_TYPES = frozenset({_dict, _Counter, _OrderedDict, _defaultdict})
_DEEP_CONTAINERS = (_list, _tuple, _dict, _set, _frozenset, _deque)
"""Containers that, past ``_MAX_DEPTH``, stay in the run noted ``TOO_DEEP`` (never compared)."""
_KEPT_TYPES = _DICT_TYPES | {_list, _set}
"""Containers of a result kept in step with the program's object when the program holds it."""
_WALKED = _KEPT_TYPES | {_tuple, _frozenset, _deque}
import itertools as _itertools  # noqa: E402 - preloaded anyway
_ITERATORS = frozenset(_GENERATOR_TYPES) | {_type(iter(x)) for x in ([], {}, _set(), {}.values(), {}.items())} | {
    _getattr(_itertools, n) for n in ("chain", "islice", "cycle", "accumulate", "starmap", "takewhile", "dropwhile",
                                      "filterfalse", "compress", "zip_longest", "pairwise", "groupby")}
"""Results that read the containers they were made from as they go (a generator's arguments)."""
_KEPT_WALK_LIMIT = 100_000
_SCALAR_TYPES = frozenset({_str, _int, _float, _bool, _NoneType})
"""What a JSON scalar decodes to: the value itself (``_Side.dec``)."""


def _argument_references(table: list, snap, v) -> list:
    """``(container, references)`` for each list, dict and set of a request's ``table``: its
    reference count less those the table, its containers, the snapshot ``snap`` and the
    result ``v`` (one level down) hold."""
    inner: dict = {}

    def note(x) -> None:
        if _type(x) in _KEPT_TYPES:
            inner[_id(x)] = inner.get(_id(x), 0) + 1

    for p in table:
        if _type(p) in _WALKED:
            for x in (p.values() if _type(p) in _DICT_TYPES else p):
                note(x)
    for before in snap.values():
        if _type(before) is _tuple:
            for x in before:
                if _type(x) is _tuple and _len(x) == 2:  # a dict's (key, value) pair
                    note(x[1])
                else:
                    note(x)
    if _type(v) in _WALKED:
        for x in (v.values() if _type(v) in _DICT_TYPES else v):
            note(x)
    out = []
    count = _getrefcount
    for o in table:
        if _type(o) in _KEPT_TYPES and o is not v:
            out.append((o, count(o) - inner.get(_id(o), 0)))
    return out


_HELD_BASE = _argument_references([[]], {}, None)[0][1]
"""The references of an argument the program does not hold (the table's, the loop's, the
count's own): one more means the program holds it."""


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


def _builtin_base_of_class(cls) -> str:
    try:
        for c in cls.__mro__:
            if c.__module__ == "builtins":
                return c.__name__
    except BaseException:  # noqa: BLE001
        pass
    return "Exception"


_ModuleType = type(sys)
_PLAIN_TYPES = frozenset({_int, _str, _float, _bool, _NoneType, _list, _tuple, _dict, _set, _frozenset, _bytes,
                          _bytearray, _complex, _range, _Counter, _OrderedDict, _defaultdict, _deque})
SOCK_FD = 998
"""The child's end of its conversation with the judge (close-on-exec)."""


# what a call of the program's adds over ``_run_served``'s depth: measured so that a plain
# call test (``assert f(998) == ...``, served by ``serve_batch``) recurses exactly as deep as
# under ``python prog.py``; other calls go one frame deeper (``serve_one``): one level less
_SERVE_FRAMES = 2
_RECURSION_LIMIT = sys.getrecursionlimit()  # plain Python's (the warm-up runs here too: not cumulative)


def _stack_depth(frame) -> int:
    """The number of frames from ``frame`` down to the bottom of the stack."""
    n = 0
    while frame is not None:
        n += 1
        frame = frame.f_back
    return n


def _served_limit(depth: int) -> int:
    """The recursion limit for a ``_run_served`` at ``depth`` frames from the bottom of the
    stack: plain Python's, raised by the harness's own frames, so that the program recurses
    as deep as under ``python prog.py`` (before, 988 levels where plain Python reaches 998)."""
    return _RECURSION_LIMIT + depth + _SERVE_FRAMES


def _discount_harness_frames() -> None:
    """Set the caller's recursion limit (``_served_limit``) from its depth (the warm-up; a run
    gets it from the forker, which counts its frames once: walking them in every run made a
    frame object of each, ~18 page faults per run)."""
    sys.setrecursionlimit(_served_limit(_stack_depth(sys._getframe(1))))


def _run_served(code: str, token: str, side: _ChildSide | None = None, limit: int | None = None,
                budget: float | None = None) -> None:
    """The program's process in ``assert`` and ``call`` mode: load the program the judge
    compiled, then do what the judge asks (call a function, get an attribute, ...) until it
    says it is done. The tests themselves run in the judge; nothing here is a verdict.
    ``limit``: the recursion limit that discounts the harness's frames, when known
    beforehand (``Worker.served_limit``); ``budget``: the candidate's CPU-time budget."""
    sources = {"<solution>": code}
    if limit is None:
        _discount_harness_frames()
    else:
        sys.setrecursionlimit(limit)
    if side is None:
        side = _ChildSide(SOCK_FD, sources)
        side.budget = budget
    try:
        kind, data = side.recv_raw()
        if kind != b"P":
            side.finish()
        compiled = marshal.loads(data)
        del data
        setup_classes = None
        if _type(compiled) is _tuple:  # with the classes the setup defines (see below)
            compiled, setup_classes = compiled
    except BaseException:  # noqa: BLE001 - the judge is gone or could not compile the program
        side.finish()
    g, failure = _load_program(compiled, sources)
    if failure is not None:
        _flush()
        try:
            side.send(["l", *failure])
        except BaseException:  # noqa: BLE001
            pass
        side.finish()
    side.g = g
    try:
        side.kinds = _global_kinds(g)
        if _type(setup_classes) is _dict:
            # the setup's classes (``ListNode``), which plain Python's setup code binds in the
            # program's namespace after the program loaded: names the program does not bind
            # are the judge's classes (its objects are then the test's kind of object)
            for name, n in _dict.items(setup_classes):
                if _type(name) is _str and name not in g:
                    g[name] = side.dec_other("j", n, None)
        greeting = side.kinds
        digits = sys.get_int_max_str_digits()
        if digits != _INT_DIGITS:  # the program's ``sys.set_int_max_str_digits(0)``: the test's ``str()`` too
            greeting = _dict(greeting)
            greeting[_DIGITS_KEY] = _str(digits)
        # held until the first answer (or the first wait for a request): one write for both; a
        # run that ends before it loses both, which the judge cannot tell from losing the answer
        text = _dumps(["g", greeting]).encode("ascii")
        side.held = _STRUCT_LEN.pack(_len(text) + 1) + b"J" + text
        side.serve()
    except BaseException:  # noqa: BLE001 - the judge is gone (or the program broke this harness)
        pass
    side.finish()


def _run_stdio(code: str, compiled, token: str) -> None:
    """Run the program as ``__main__``; return only after the harness's own end-of-run record
    was written. Every other way out ends the process with a non-zero status: a program that
    wrote a forged record and then made the harness's own record fail (closing the result
    descriptor, then raising) ends as ``python solution.py`` does, with status 1."""
    sources = {"<solution>": code}
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    module.__file__ = "solution.py"
    sys.modules["__main__"] = module
    run_pid = _getpid()
    try:
        exec(compiled, module.__dict__)
    except SystemExit as e:
        status = _exit_status(e)
        if _getpid() != run_pid:
            _end_forked_child(status)
        if status:
            _flush()
            _emit(["l", "SystemExit", _text(e.code), f"SystemExit: {_text(e.code)}"])
            _os_exit(status)
    except BaseException as e:  # noqa: BLE001
        if _getpid() != run_pid:
            try:
                sys.stderr.write(_format_exc(e, sources) + "\n")
            except BaseException:  # noqa: BLE001
                pass
            _end_forked_child(1)
        _flush()
        _emit(["l", _exc_name(e), _text(e), _format_exc(e, sources)])
        _os_exit(1)
    if _getpid() != run_pid:
        _end_forked_child(0)
    _exit_as_python_does()
    main = weakref.ref(module)
    del module
    _finalize_main(main)
    _flush()
    _emit(["d", 0, token])


def _finalize_main(main) -> None:
    """What the interpreter's finalization does with ``__main__`` (CPython's ``Py_FinalizeEx``):
    output is flushed and, where the program left the collector on, garbage collected; then
    ``__main__`` leaves ``sys.modules``. Its globals, which the program's functions and classes
    reference (a cycle), are then garbage of their own: one more collection runs the
    ``__del__`` of the objects only they held, in the order they were made, with every global
    still bound (a finalizer printing through ``sys`` or a global's value prints as under
    ``python``). A module something else still holds has its globals set to None, names with
    one leading underscore first (``_PyModule_ClearDict``). ``main``: a weak reference, so that
    nothing here keeps the module alive."""
    _flush()
    try:
        if gc.isenabled():
            gc.collect()
        if sys.modules.get("__main__") is main():
            del sys.modules["__main__"]
        gc.collect()
        module = main()
        if module is None:
            return
        names = module.__dict__
        del module
        for single_underscore in (True, False):
            for name in list(names):
                if _type(name) is not _str or names.get(name) is None or name == "__builtins__":
                    continue
                if not single_underscore or (name[:1] == "_" and name[1:2] != "_"):
                    names[name] = None
    except BaseException:  # noqa: BLE001 - as at exit: a finalizer's error is ignored
        pass


def _end_forked_child(status: int) -> None:
    """A process the program forked reached the end of ``__main__`` (``sys.exit(0)`` in the
    child after ``os.fork()``): it ends as under plain Python (its threads and ``atexit``
    handlers run, its output is flushed, its status is its own) and never writes the run's
    end-of-run record: only the run's own process reports how the run ended."""
    _exit_as_python_does()
    _flush()
    _os_exit(status)


def _exit_status(e) -> int:
    """The exit status of ``python solution.py`` that ends with ``SystemExit`` ``e``
    (CPython's ``_Py_HandleSystemExit``): 0 for ``None``; for an ``int`` (a subclass
    included: ``bool``) its value as a C ``long`` (-1 when it does not fit) modulo 256; for
    anything else (``0.0``, ``0j``, ``Decimal(0)``, ``numpy.int64(0)``) 1, after printing it
    to stderr."""
    try:
        code = e.code
    except BaseException:  # noqa: BLE001 - a subclass's property raised
        return 1
    if code is None:
        return 0
    if _isinstance(code, _int):
        value = _int_copy(code)
        return (value if -(1 << 63) <= value < (1 << 63) else -1) & 0xFF
    try:
        sys.stderr.write(_text(code) + "\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


_INT_DIGITS = sys.get_int_max_str_digits()
_DIGITS_KEY = "__int_max_str_digits__"  # in the greeting, beside the globals (none of which starts with "__")
_WARMING = [False]  # the template runs the harness in ``warm_up``


def _exit_as_python_does() -> None:
    """What the interpreter does after ``__main__`` ends: wait for non-daemon threads (a
    common pattern runs ``main`` in a thread with a larger stack), then run ``atexit``
    handlers (fast-I/O classes flush their buffer there). Their output is the program's."""
    if _WARMING[0]:  # the template itself: shutting threading down (or emptying atexit) would stay so
        return
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001 - as at exit: reported, not fatal
            pass
    try:
        import atexit
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass


def _write_program_file(code: str) -> None:
    """Put the program at ``solution.py`` in its working directory, the ``__file__`` it runs
    as: ``multiprocessing``'s ``spawn`` and ``forkserver`` start methods run the main module's
    file again in every new process (as ``__mp_main__``), as they do for ``python solution.py``.
    Only for programs that mention the module: other runs do not pay for the file."""
    try:
        fd = os.open("solution.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, code.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
    except OSError:  # beyond the file size limit: such a program cannot spawn, like any other
        pass


def _flush() -> None:
    for stream in (getattr(sys, "stdout", None), sys.__stdout__, getattr(sys, "stderr", None), sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


class _WarmDone(Exception):
    pass
