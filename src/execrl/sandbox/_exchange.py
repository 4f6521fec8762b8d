"""The value exchange both sides share: the judge process and a program's run each hold one
``_Side`` of a socket, and send values, requests and answers through it.

Wire format between the executor and the worker (both directions): 4-byte big-endian length
+ JSON. Replies carry the captured byte streams after the JSON header (lengths in the header).
The messages between the judge and a run, and the encoding of values in them, are described
below (``_Side``). Everything here runs in the worker, in every run and in the judge process:
it imports nothing of the package's but its own siblings, and resolves builtins through a
private snapshot, so a program that patches ``builtins`` cannot change it.
"""

from __future__ import annotations

import builtins
import json
import os
import signal
import struct
import sys
import time
from json.encoder import c_make_encoder, encode_basestring_ascii
from json.scanner import c_make_scanner

import _thread

# Every function below resolves builtins through this private snapshot (CPython binds a
# function's builtins when it is created), so a candidate that patches the ``builtins``
# module (``isinstance``, ``getattr``, ``print``, ...) cannot change how the harness runs.
__builtins__ = dict(builtins.__dict__)

_LEN = struct.Struct(">I")
RESULT_FD = 997  # the child's result channel is moved here (close-on-exec)
_FD = struct.Struct("i")  # one file descriptor in an SCM_RIGHTS message
_JUDGE_CPU = struct.Struct("=dd")
"""The judge's CPU time for a compile request, and its own CPU time in all (before the reply)."""

_os_write, _os_exit, _os_read = os.write, os._exit, os.read
_MSG_LIMIT = 600

HARNESS_ERROR_TYPES = frozenset({
    "Timeout", "ProtocolViolation", "ProcessExited", "OutputLimitExceeded", "JudgeError", "JudgeLimitExceeded",
    "WorkerCrashed", "PrepareError", "ValueTooLarge", "ValueTooDeep",
    "Nondeterministic",  # the code game's verdict on a program whose runs differ (execrl.training.code_game)
}) | frozenset(s.name for s in signal.Signals)
"""The error types the sandbox (and the code game) give their own verdicts, a killing signal's
name among them: the watch counts them, and a refinement prompt states them. A program's own
exception class of such a name is told as ``NAME (the program's class)``."""


def _text(x, limit=_MSG_LIMIT) -> str:
    try:
        s = x if _type(x) is _str else _str(x)
    except BaseException:  # noqa: BLE001 - candidate-defined __str__
        s = "<unprintable>"
    return s if _len(s) <= limit else s[:limit] + "..."


# --------------------------------------------------------------------------------------
# Values exchanged between the judge and the program's process (both sides use this code;
# the judge process runs it too, see _judge_side).
#
# A message is a JSON list. Values are JSON scalars (int below 2**62, float incl. NaN and
# infinities, str, bool, null) or one-key objects:
#   {"l": [...]} list, {"t": [...]} tuple, {"d": [[k, v], ...]} dict, {"s": [...]} set,
#   {"f": [...]} frozenset, {"y": hex} bytearray, {"b": hex} bytes, {"c": [re, im]} complex,
#   {"i": hex} large int, {"r": [start, stop, step]} range, {"C": pairs} Counter,
#   {"O": pairs} OrderedDict, {"D": [factory, pairs]} defaultdict, {"Q": [items, maxlen]}
#   deque, {"K": [...]}, {"V": [...]}, {"I": pairs} a dict's keys, values, items (views of
#   a copy), {"T": [kind, fields]} a date, naive datetime or time, or timedelta ({"T": [kind,
#   fields, [days, seconds, microseconds, name]]} a datetime or time with a fixed-offset
#   ``timezone``), {"Z": [start, stop, step]} a slice,
#   {"A": [typecode, items]} array.array, {"F": [num, den]} Fraction, {"M": text} Decimal, {"N": [dtype, value]} a numpy
#   scalar (bool, integer, float or complex: the same numpy type on the other side),
#   {"@": k} the k-th container of this exchange again (identity: aliasing, cycles, and a
#   result that *is* an argument), numbered in the order containers are first met;
#   {"h": [n, type]} an object that stays in the program's process (a handle; its
#   operations are sent there), {"S": [n, type, base]} a subclass of a plain container (its
#   plain content, and a handle for the rest), {"j": n} an object that stays in the judge,
#   {"g": name} one of the program's global names, {"B": name} a builtin, {"m": name} a module.
# --------------------------------------------------------------------------------------

class Unencodable(Exception):
    pass


class ProtocolError(Exception):
    """The peer sent something that is not a valid message."""


class PeerGone(EOFError):
    """The peer closed the conversation (it exited or was killed)."""


_type, _isinstance, _len, _format, _repr, _id = type, isinstance, len, format, repr, id
_int, _float, _str, _bytes, _bool = int, float, str, bytes, bool
_list, _tuple, _dict, _set, _frozenset, _bytearray, _complex = list, tuple, dict, set, frozenset, bytearray, complex
_range, _getattr, _setattr, _hasattr, _callable = range, getattr, setattr, hasattr, callable
_slice = slice
_NoneType = type(None)
_list_iter, _tuple_iter, _set_iter, _fset_iter = list.__iter__, tuple.__iter__, set.__iter__, frozenset.__iter__
_dict_items = dict.items
_dict_keys = dict.keys
_getpid = os.getpid
_RLock = _thread.RLock
_getrecursionlimit, _setrecursionlimit = sys.getrecursionlimit, sys.setrecursionlimit
_hash = hash
_int_copy, _float_copy, _str_copy, _bytes_copy = int.__int__, float.__float__, str.__str__, bytes.__bytes__
_complex_copy = complex.__complex__
_GENERATOR_TYPES = (type((lambda: (yield))()), type(map(None, ())), type(zip()), type(filter(None, ())),
                    type(reversed([])), type(iter(range(0))), type(enumerate(())))
import collections as _collections  # noqa: E402 - preloaded anyway
_Counter, _OrderedDict, _defaultdict, _deque = (_collections.Counter, _collections.OrderedDict,
                                               _collections.defaultdict, _collections.deque)
_MUTABLE = (_list, _dict, _set, _bytearray, _Counter, _OrderedDict, _defaultdict, _deque)
# an OrderedDict's own order (``move_to_end`` changes it; ``dict.items`` would not show it)
_odict_items, _odict_keys = _OrderedDict.items, _OrderedDict.keys
_KEYS_VIEW, _VALUES_VIEW, _ITEMS_VIEW = _type({}.keys()), _type({}.values()), _type({}.items())
_BIG = 1 << 62
_NUMPY_KINDS = frozenset("biufc")
"""numpy scalars sent as themselves: booleans, integers, floats, complex numbers."""
_MAX_DEPTH = 300
"""Containers nested deeper cross no further (encoding recurses, two frames a level, under
the recursion limit of plain Python's 1000): the program's deeper value stays in its run as a
handle noted ``TOO_DEEP``, the test's is refused (``ValueTooDeep``); neither is compared."""
_STRUCT_LEN = struct.Struct(">I")
_cpu_time = time.process_time  # (a program that rebinds ``time.process_time`` does not change it)
_getrefcount = sys.getrefcount
CPU_TIMER_SLACK = (1.05, 0.02)
"""The CPU-time signal fires at ``1.05 * budget + 0.02 s``: past the budget, so a run the
signal ends, or one that catches or blocks it and exits, has used more than its budget by
the measure the verdict reads (``Worker.run_one``: a run whose CPU time reaches the budget
timed out, however it ended). The CPU time the kernel reports can lag the timer's clock by
more than this slack on a loaded machine (~9% measured), so the verdict reads the timer's
clock too (``_forker.limit_clock``)."""


def cpu_timer(budget: float) -> float:
    """The CPU-time timer's setting for what is left of a budget (``CPU_TIMER_SLACK``)."""
    return budget * CPU_TIMER_SLACK[0] + CPU_TIMER_SLACK[1]


MACHINE_FREE_ENV = {"TZ": "UTC0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Environment of the worker, its judge and every run, so that what a program computes does not
depend on the host: local time is UTC whatever the host's ``/etc/localtime`` (``UTC0``, a POSIX
zone string, reads no zoneinfo file, which a host may lack or differ in), and numpy's BLAS
starts one thread, not one per host core (threads count against ``max_processes``)."""
RUN_STACK_BYTES = 8 << 20
"""The C stack of the worker, its judge and every run, and the stack of every thread they start:
Linux's usual default, whatever ``ulimit -s`` the job that started the executor had (a deep
``lru_cache`` recursion passes at 16 MiB and crashes at 8)."""
RUN_CPU_COUNT = 4
"""The core count a program sees (``os.cpu_count()``, ``os.sched_getaffinity(0)``): the standard
library sizes its default pools by it, and against the fixed ``max_processes`` a pool of one
thread or process per core passes on a small host and fails on a large one."""


def run_stack_bytes() -> int:
    """RUN_STACK_BYTES, or this process's hard stack limit where it is lower (it cannot be raised)."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    return RUN_STACK_BYTES if hard == resource.RLIM_INFINITY or hard < 0 else min(RUN_STACK_BYTES, hard)


def machine_free_process() -> None:
    """Make this process (and what it forks) see the same machine on every host: the stack
    limit and thread stack size (RUN_STACK_BYTES), the core count (RUN_CPU_COUNT), and the time
    zone from MACHINE_FREE_ENV (already in the environment) read again."""
    import _thread
    import resource

    stack = run_stack_bytes()
    resource.setrlimit(resource.RLIMIT_STACK, (stack, resource.getrlimit(resource.RLIMIT_STACK)[1]))
    _thread.stack_size(stack)
    count = RUN_CPU_COUNT
    os.cpu_count = lambda: count
    if hasattr(os, "process_cpu_count"):
        os.process_cpu_count = lambda: count
    real_affinity = os.sched_getaffinity

    def sched_getaffinity(pid, /):
        return set(range(count)) if pid in (0, os.getpid()) else real_affinity(pid)

    os.sched_getaffinity = sched_getaffinity
    time.tzset()


MAX_VALUE_BYTES = 32 << 20
"""A result whose encoding is larger stays in the program's process as a handle noted
``TOO_LARGE``, which the judge refuses to compare with a test's value (``ValueTooLarge``)."""
TOO_LARGE, TOO_DEEP = "value too large", "value too deep"
MAX_MESSAGE_BYTES = 64 << 20
"""A larger message is a protocol error."""


def _no_default(o):
    raise TypeError("not a JSON value")


_c_encode = c_make_encoder(None, _no_default, encode_basestring_ascii, None, ":", ",", False, False, True)


def _dumps(obj) -> str:
    """JSON through the C encoder only (no Python-level code a candidate could patch)."""
    return "".join(_c_encode(obj, 0))


_scan_json = c_make_scanner(json.JSONDecoder())


def _json_loads(text: str):
    """JSON through the C scanner only: ``json.loads`` is Python code that calls the builtin
    ``len``, which a program may have replaced."""
    try:
        obj, end = _scan_json(text, 0)
    except StopIteration:
        raise ValueError("malformed JSON") from None
    if end != _len(text):
        raise ValueError("extra data after a JSON value")
    return obj


class _Exchange:
    """The numbering of one request and its response: containers in the order first met."""

    __slots__ = ("table", "seen")

    def __init__(self):
        self.table = []
        self.seen = {}

    def follow(self):
        """The response's numbering: it continues this request's, so a result can name an
        argument (``{"@": k}``)."""
        nxt = _Exchange()
        nxt.table = _list(self.table)
        nxt.seen = {_id(o): k for k, o in enumerate(self.table)}
        return nxt


def _shallow(obj):
    """What a container holds, by identity (to tell whether a call changed it)."""
    t = _type(obj)
    if t is _bytearray:
        return _bytes(obj)
    if _isinstance(obj, _dict):
        return _tuple(_dict_items(obj))
    return _tuple(obj)


def _unchanged(before, obj) -> bool:
    now = _shallow(obj)
    if _type(now) is _bytes:
        return now == before
    if _len(now) != _len(before):
        return False
    for a, b in zip(now, before):
        if a is not b and not (_type(a) is _tuple and _type(b) is _tuple and _len(a) == 2
                               and a[0] is b[0] and a[1] is b[1]):
            return False
    return True


class _Side:
    """One side of the conversation: the connection, the objects it lends the peer (by
    number) and the proxies of the objects the peer lends it."""

    EXPORT = "h"  # tag of the objects this side lends
    NESTED_FRAMES = 0
    """This side's frames between a frame of the program's (or a test's) that called the peer and
    the next such frame a request of the peer's runs here: the recursion limit grows by them
    while a nested request is served, so that code recursing through both processes (a test's
    function memoized by the program's decorator) goes as deep as under plain Python."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = _bytearray()
        self.held = b""  # frames to send with the next one
        self.lent: dict = {}
        self.lent_ids: dict = {}
        self.proxies: dict = {}
        self.budget = None  # the candidate's CPU-time budget, shared by the run and the judge
        self.cpu_start = 0.0  # this process's CPU time when the candidate started
        self.cpu_told = 0.0  # the CPU time last told to the peer

    # ---- framing --------------------------------------------------------------------
    def send_raw(self, kind: bytes, data: bytes, more: bytes = b"") -> None:
        """One frame (and ``more``, frames already made, in the same write)."""
        data = self.held + _STRUCT_LEN.pack(_len(data) + 1) + kind + data + more
        self.held = b""
        self._write(data)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = _os_write(self.fd, view)
            except (BrokenPipeError, ConnectionResetError):
                raise PeerGone() from None
            view = view[n:]

    def send(self, msg) -> None:
        self.send_raw(b"J", _dumps(msg).encode("ascii"))

    def _fill(self, n: int) -> None:
        buf = self.buf
        while _len(buf) < n:
            try:
                chunk = _os_read(self.fd, max(n - _len(buf), 1 << 16))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise PeerGone()
            buf += chunk

    def recv_raw(self):
        self._fill(4)
        (n,) = _STRUCT_LEN.unpack(self.buf[:4])
        if n == 0 or n > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"a message of {n} bytes")
        self._fill(4 + n)
        kind, data = _bytes(self.buf[4:5]), _bytes(self.buf[5:4 + n])
        del self.buf[:4 + n]
        return kind, data

    def recv(self):
        kind, data = self.recv_raw()
        if kind != b"J":
            raise ProtocolError("unexpected binary message")
        try:
            msg = _json_loads(data.decode("ascii"))
        except (ValueError, RecursionError, UnicodeDecodeError) as e:
            raise ProtocolError(f"malformed message: {_text(e, 100)}") from None
        if _type(msg) is not _list or not msg or _type(msg[0]) is not _str:
            raise ProtocolError("a message is not a tagged list")
        return msg

    # ---- requests and answers -----------------------------------------------------------
    def send_text(self, text: str) -> None:
        self.send_raw(b"J", text.encode("ascii"))

    def call_peer(self, msg):
        """Send a request and serve the peer's nested requests (a call back into this side)
        until its answer arrives."""
        self.send(msg)
        while True:
            reply = self.recv()
            tag = reply[0]
            if tag == "r" or tag == "e":
                return reply
            if tag == "x":
                self.finish()
            if tag == "u":
                self.apply_kept(reply)
                continue
            if tag == "p":
                self.charge_peer(reply)
                continue
            self.send_text(self.serve_nested(reply))

    def serve_nested(self, req) -> str:
        """``serve_one`` for a request that came while this side waited for an answer, with
        ``NESTED_FRAMES`` more recursion allowed. The limit is lowered by them afterwards,
        from whatever the code served set it to (its own ``sys.setrecursionlimit``)."""
        bump = self.NESTED_FRAMES
        _setrecursionlimit(_getrecursionlimit() + bump)
        try:
            return self.serve_one(req)
        finally:
            try:
                _setrecursionlimit(_getrecursionlimit() - bump)
            except BaseException:  # noqa: BLE001 - a limit the served code lowered below the depth
                pass

    def finish(self):  # pragma: no cover - each side defines it
        raise PeerGone()

    def apply_kept(self, msg):  # pragma: no cover - the program's side defines it
        raise ProtocolError("unexpected update")

    # ---- one CPU-time budget for the run and the judge together ----------------------------
    def charge_peer(self, msg) -> None:
        """``["p", seconds]``: the CPU time the peer used for this candidate so far. This
        process's CPU-time timer is set to what is left of the candidate's budget (a run
        that spun for most of it leaves the judge the rest, and the other way round)."""
        if _len(msg) != 2 or _type(msg[1]) not in (_int, _float) or not msg[1] >= 0:
            raise ProtocolError("malformed CPU-time report")
        if self.budget is None:
            return
        left = self.budget - msg[1] - (_cpu_time() - self.cpu_start)
        signal.setitimer(signal.ITIMER_PROF, max(cpu_timer(left), 0.001))

    def tell_cpu(self) -> None:
        """Tell the peer (with the next frame) this process's CPU time for the candidate, once
        it has grown by a twentieth of the budget since last told."""
        if self.budget is None:
            return
        used = _cpu_time() - self.cpu_start
        if used - self.cpu_told >= self.budget / 20:
            self.cpu_told = used
            text = _dumps(["p", used]).encode("ascii")
            self.held += _STRUCT_LEN.pack(_len(text) + 1) + b"J" + text

    def serve_one(self, req) -> str:  # pragma: no cover - each side defines it
        raise ProtocolError("unexpected request")

    # ---- objects lent to the peer -------------------------------------------------------
    def lend(self, v) -> int:
        n = self.lent_ids.get(_id(v))
        if n is None:
            n = _len(self.lent)
            self.lent[n] = v
            self.lent_ids[_id(v)] = n
        return n

    def lent_object(self, n):
        try:
            return self.lent[n]
        except (KeyError, TypeError):
            raise ProtocolError(f"no object {n!r} was lent") from None

    # ---- encoding -----------------------------------------------------------------------
    def enc(self, v, ex: _Exchange, depth: int = 0):
        t = _type(v)
        if t is _str or t is _bool or t is _float or v is None:
            return v
        if t is _int:
            return v if -_BIG < v < _BIG else {"i": _format(v, "x")}
        k = ex.seen.get(_id(v))
        if k is not None and ex.table[k] is v:
            return {"@": k}
        if depth > _MAX_DEPTH:
            return self.other(v, ex, depth)
        d = depth + 1
        enc = self.enc
        if t is _list:
            self._number(v, ex)
            return {"l": [enc(x, ex, d) for x in v]}
        if t is _tuple:
            self._number(v, ex)
            return {"t": [enc(x, ex, d) for x in v]}
        if t is _dict:
            self._number(v, ex)
            return {"d": self._keyed([[enc(a, ex, d), enc(b, ex, d)] for a, b in v.items()], v)}
        if t is _set:
            self._number(v, ex)
            return {"s": self._hashed([enc(x, ex, d) for x in v], v)}
        if t is _frozenset:
            self._number(v, ex)
            return {"f": self._hashed([enc(x, ex, d) for x in v], v)}
        if t is _bytes:
            return {"b": v.hex()}
        if t is _bytearray:
            self._number(v, ex)
            return {"y": v.hex()}
        if t is _complex:
            return {"c": [v.real, v.imag]}
        if t is _range:
            return {"r": [v.start, v.stop, v.step]}
        if t is _slice:
            return {"Z": [enc(v.start, ex, d), enc(v.stop, ex, d), enc(v.step, ex, d)]}
        if t is _Counter:
            self._number(v, ex)
            return {"C": self._keyed([[enc(a, ex, d), enc(b, ex, d)] for a, b in _dict_items(v)], v)}
        if t is _OrderedDict:
            self._number(v, ex)
            return {"O": self._keyed([[enc(a, ex, d), enc(b, ex, d)] for a, b in _odict_items(v)], v)}
        if t is _defaultdict:
            self._number(v, ex)
            return {"D": [enc(v.default_factory, ex, d),
                          self._keyed([[enc(a, ex, d), enc(b, ex, d)] for a, b in _dict_items(v)], v)]}
        if t is _deque:
            self._number(v, ex)
            return {"Q": [[enc(x, ex, d) for x in v], v.maxlen]}
        module = _type_module(t)
        if module == "datetime":  # a date, a time, a span: as values (``date + timedelta``)
            when = _datetime_value(v, t)
            if when is not None:
                return when
        if module == "array" and t is _getattr(sys.modules.get("array"), "array", None):
            return {"A": [v.typecode, [enc(x, ex, d) for x in v.tolist()]]}
        if module == "fractions" and t is _getattr(sys.modules.get("fractions"), "Fraction", None):
            return {"F": [enc(v.numerator, ex, d), enc(v.denominator, ex, d)]}
        if module == "decimal" and t is _getattr(sys.modules.get("decimal"), "Decimal", None):
            return {"M": _str(v)}
        # a dict's view, as a view of a copy of the dict: ``f().keys() == {...}`` compares as a
        # set, as in Python (the copy does not follow later changes of the program's dict)
        if t is _KEYS_VIEW:
            keys = _list(v)
            return {"K": self._hashed([enc(x, ex, d) for x in keys], keys)}
        if t is _VALUES_VIEW:
            return {"V": [enc(x, ex, d) for x in v]}
        if t is _ITEMS_VIEW:
            pairs = _list(v)
            encoded = [[enc(a, ex, d), enc(b, ex, d)] for a, b in pairs]
            self._hashed([p[0] for p in encoded], [p[0] for p in pairs])
            return {"I": encoded}
        return self.other(v, ex, depth)

    HASHES = False  # whether the objects this side lends as set items and dict keys carry their hash

    def _hashed(self, items: list, values) -> list:
        """``items``, the encoded ``values`` of a set: an object lent (an ``{"h": [n, type, note]}``)
        gets its hash as a fourth element, so that the peer's copy of the set holds it where the
        program's hash puts it (a set of points, equal by the program's ``__eq__``)."""
        if self.HASHES:
            for r, x in zip(items, values):
                if _type(r) is _dict and "h" in r:
                    h = r["h"]
                    if _len(h) == 2:
                        h.append("")
                    h.append(_hash(x))
        return items

    def _keyed(self, pairs: list, d) -> list:
        if self.HASHES:
            keys = _odict_keys(d) if _isinstance(d, _OrderedDict) else _dict_keys(d)
            self._hashed([p[0] for p in pairs], _list(keys))
        return pairs

    @staticmethod
    def _number(v, ex: _Exchange) -> None:
        ex.seen[_id(v)] = _len(ex.table)
        ex.table.append(v)

    def other(self, v, ex, depth):  # pragma: no cover - each side defines it
        raise Unencodable(_type(v).__name__)

    def contents(self, v, ex: _Exchange):
        """The content of a mutable container, for an update after a call."""
        enc = self.enc
        t = _type(v)
        if t is _bytearray:
            return v.hex()
        if _isinstance(v, _OrderedDict):
            return self._keyed([[enc(a, ex, 1), enc(b, ex, 1)] for a, b in _odict_items(v)], v)
        if _isinstance(v, _dict):
            return self._keyed([[enc(a, ex, 1), enc(b, ex, 1)] for a, b in _dict_items(v)], v)
        if _isinstance(v, (_set, _frozenset)):
            return self._hashed([enc(x, ex, 1) for x in v], v)
        return [enc(x, ex, 1) for x in v]

    def updates(self, snap, ex: _Exchange) -> list:
        """The new content of the containers of a request (its arguments) that the call
        changed (``snap`` from ``snapshot``), numbered in the response's exchange ``ex``:
        copied in, copied out, the same objects on the other side."""
        out = []
        if not snap:
            return out
        for k, before in snap.items():
            obj = ex.table[k]
            if not _unchanged(before, obj):
                out.append([k, self.contents(obj, ex)])
        return out

    # ---- decoding -----------------------------------------------------------------------
    def dec(self, x, ex: _Exchange):
        t = _type(x)
        if t is _str or t is _int or t is _float or t is _bool or x is None:
            return x
        if t is not _dict or _len(x) != 1:
            raise ProtocolError(f"unexpected {t.__name__} in a value")
        ((tag, val),) = x.items()
        dec = self.dec
        table = ex.table
        try:
            if tag == "l":
                out = []
                table.append(out)
                out.extend([dec(i, ex) for i in _chk_list(val)])
                return out
            if tag == "t":
                k = _len(table)
                table.append(None)
                out = _tuple([dec(i, ex) for i in _chk_list(val)])
                table[k] = out
                return out
            if tag == "d" or tag == "C" or tag == "O":
                out = {} if tag == "d" else _Counter() if tag == "C" else _OrderedDict()
                table.append(out)
                for pair in _chk_list(val):
                    a, b = _chk_list(pair)
                    key = dec(a, ex)
                    out[key] = dec(b, ex)
                return out
            if tag == "s" or tag == "f":
                k = _len(table)
                table.append(None)
                items = [dec(i, ex) for i in _chk_list(val)]
                out = self.make_set(items, tag == "f")
                table[k] = out
                return out
            if tag == "@":
                if _type(val) is not _int or not 0 <= val < _len(table) or table[val] is None:
                    raise ProtocolError("a reference to no container")
                return table[val]
            if tag == "b":
                return _bytes.fromhex(_chk_str(val))
            if tag == "y":
                out = _bytearray.fromhex(_chk_str(val))
                table.append(out)
                return out
            if tag == "i":
                return _int(_chk_str(val), 16)
            if tag == "c":
                re_, im = _chk_list(val)
                if _type(re_) not in (_int, _float) or _type(im) not in (_int, _float):
                    raise ProtocolError("bad complex")
                return _complex(re_, im)
            if tag == "r":
                a, b, c = _chk_list(val)
                if _type(a) is not _int or _type(b) is not _int or _type(c) is not _int:
                    raise ProtocolError("bad range")
                return _range(a, b, c)
            if tag == "Z":
                a, b, c = _chk_list(val)
                return _slice(dec(a, ex), dec(b, ex), dec(c, ex))
            if tag == "D":
                factory, pairs = _chk_list(val)
                out = _defaultdict()
                table.append(out)
                out.default_factory = dec(factory, ex)
                for pair in _chk_list(pairs):
                    a, b = _chk_list(pair)
                    key = dec(a, ex)
                    out[key] = dec(b, ex)
                return out
            if tag == "Q":
                items, maxlen = _chk_list(val)
                if maxlen is not None and _type(maxlen) is not _int:
                    raise ProtocolError("bad deque")
                out = _deque(maxlen=maxlen)
                table.append(out)
                out.extend([dec(i, ex) for i in _chk_list(items)])
                return out
            if tag == "K":
                return _dict.fromkeys([dec(i, ex) for i in _chk_list(val)]).keys()
            if tag == "V":
                return _dict(enumerate([dec(i, ex) for i in _chk_list(val)])).values()
            if tag == "I":
                out = {}
                for pair in _chk_list(val):
                    a, b = _chk_list(pair)
                    key = dec(a, ex)
                    out[key] = dec(b, ex)
                return out.items()
            if tag == "A":
                code, items = _chk_list(val)
                if code not in _ARRAY_CODES:
                    raise ProtocolError("bad array")
                import array
                return array.array(code, [dec(i, ex) for i in _chk_list(items)])
            if tag == "T":
                parts = _chk_list(val)
                if _len(parts) not in (2, 3):
                    raise ProtocolError("bad date or time")
                kind, fields = parts[0], _chk_list(parts[1])
                if kind not in _DATETIME_FIELDS or _len(fields) != _DATETIME_FIELDS[kind] \
                        or not all(_type(x) is _int for x in fields) \
                        or (_len(parts) == 3 and kind not in ("datetime", "time")):
                    raise ProtocolError("bad date or time")
                import datetime
                tz = _timezone(datetime, parts[2]) if _len(parts) == 3 else None
                if kind == "datetime":
                    return datetime.datetime(*fields[:7], tzinfo=tz, fold=fields[7])
                if kind == "time":
                    return datetime.time(*fields[:4], tzinfo=tz, fold=fields[4])
                return _getattr(datetime, kind)(*fields)
            if tag == "F":
                from fractions import Fraction
                num, den = _chk_list(val)
                if _type(num) not in (_int, _dict) or _type(den) not in (_int, _dict):
                    raise ProtocolError("bad fraction")
                return Fraction(dec(num, ex), dec(den, ex))
            if tag == "M":
                from decimal import Decimal
                return Decimal(_chk_str(val))
            if tag == "N":
                dtype, value = _chk_list(val)
                value = dec(value, ex)
                if _type(value) not in (_bool, _int, _float, _complex):
                    raise ProtocolError("bad numpy scalar")
                kind = self.numpy().dtype(_chk_str(dtype))
                if kind.kind not in _NUMPY_KINDS:
                    raise ProtocolError("bad numpy scalar")
                return kind.type(value)
        except (TypeError, ValueError, ZeroDivisionError) as e:  # unhashable key, bad hex, arity
            raise ProtocolError(f"malformed value: {_text(e, 100)}") from None
        return self.dec_other(tag, val, ex)

    def dec_other(self, tag, val, ex):  # pragma: no cover - each side defines it
        raise ProtocolError(f"unknown tag {tag!r}")

    @staticmethod
    def numpy():
        """numpy, for a numpy scalar the peer sent (the peer's process has it loaded)."""
        import numpy
        return numpy

    @staticmethod
    def numpy_scalar(v, t):
        """``[dtype, value]`` of a numpy scalar that travels as one (``{"N": ...}``), else None."""
        if _getattr(t, "__module__", "") != "numpy":
            return None
        kind = _getattr(_getattr(v, "dtype", None), "kind", None)
        numpy = sys.modules.get("numpy")
        if kind not in _NUMPY_KINDS or numpy is None or not _isinstance(v, numpy.generic):
            return None
        item = v.item()
        if _type(item) not in (_bool, _int, _float, _complex):  # longdouble: no plain value holds it
            return None
        return [_str_copy(v.dtype.str), item]

    @staticmethod
    def make_set(items, frozen: bool):
        """The set, iterating in the sender's order where one of two constructions gives it: a
        set's order depends on how it was built (``set(list)`` grows its table item by item, a
        literal or ``set.update(set)`` sizes it at once), and a test may depend on that order."""
        out = _set(items)
        if _len(out) > 1 and any(a is not b for a, b in zip(out, items)):
            merged = _set()
            merged.update(out)
            if not any(a is not b for a, b in zip(merged, items)):
                out = merged
        return _frozenset(out) if frozen else out

    def apply_updates(self, updates, ex: _Exchange) -> None:
        """Copy out: give the containers of a request the content the peer's call left them."""
        if _type(updates) is not _list:
            raise ProtocolError("malformed updates")
        for entry in updates:
            k, content = _chk_list(entry)
            if _type(k) is not _int or not 0 <= k < _len(ex.table):
                raise ProtocolError("an update of no container")
            obj = ex.table[k]
            t = _type(obj)
            try:
                if t is _bytearray:
                    obj[:] = _bytes.fromhex(_chk_str(content))
                elif _isinstance(obj, _dict):
                    pairs = [(self.dec(a, ex), self.dec(b, ex)) for a, b in (_chk_list(p) for p in _chk_list(content))]
                    obj.clear()
                    obj.update(pairs)
                elif t is _list:
                    obj[:] = [self.dec(i, ex) for i in _chk_list(content)]
                elif t is _set or t is _deque:
                    items = [self.dec(i, ex) for i in _chk_list(content)]
                    obj.clear()
                    obj.extend(items) if t is _deque else obj.update(items)
                else:
                    raise ProtocolError("an update of an immutable container")
            except (TypeError, ValueError) as e:
                raise ProtocolError(f"malformed update: {_text(e, 100)}") from None

    @staticmethod
    def snapshot(ex: _Exchange):
        """What the mutable containers of a decoded request hold (see ``updates``)."""
        snap = None
        for k, obj in enumerate(ex.table):
            if _type(obj) in _MUTABLE:
                if snap is None:
                    snap = {}
                snap[k] = _shallow(obj)
        return snap


_type_module = type.__dict__["__module__"].__get__  # a class's module, read without its metaclass's code
_DATETIME_FIELDS = {"date": 3, "datetime": 8, "time": 5, "timedelta": 3}
_ARRAY_CODES = frozenset("bBuhHiIlLqQfdw")


def _datetime_value(v, t):
    """``{"T": [kind, fields]}`` for a ``datetime`` date, naive datetime or time, or timedelta
    (exactly those classes), ``{"T": [kind, fields, zone]}`` for a datetime or time whose
    ``tzinfo`` is a ``timezone`` (a fixed offset), else None."""
    dt = sys.modules.get("datetime")
    if dt is None:
        return None
    if t is dt.date:
        return {"T": ["date", [v.year, v.month, v.day]]}
    if t is dt.timedelta:
        return {"T": ["timedelta", [v.days, v.seconds, v.microseconds]]}
    if t is dt.datetime or t is dt.time:
        tz = v.tzinfo
        if tz is None:
            zone = None
        elif _type(tz) is dt.timezone:  # a fixed offset (``timezone.utc``), its name if it was given one
            offset, *name = tz.__getinitargs__()
            zone = [offset.days, offset.seconds, offset.microseconds, name[0] if name else None]
        else:
            return None  # another tzinfo (``zoneinfo``) has rules no value carries
        if t is dt.datetime:
            fields = [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold]
        else:
            fields = [v.hour, v.minute, v.second, v.microsecond, v.fold]
        return {"T": [t.__name__, fields] if zone is None else [t.__name__, fields, zone]}
    return None


def _timezone(datetime, zone):
    """The fixed-offset ``timezone`` of ``[days, seconds, microseconds, name]`` (``_datetime_value``)."""
    days, seconds, microseconds, name = _chk_list(zone)
    if not (_type(days) is _int and _type(seconds) is _int and _type(microseconds) is _int) \
            or not (name is None or _type(name) is _str):
        raise ProtocolError("bad time zone")
    offset = datetime.timedelta(days, seconds, microseconds)
    return datetime.timezone(offset) if name is None else datetime.timezone(offset, name)


def _chk_list(v) -> list:
    if _type(v) is not _list:
        raise ProtocolError("expected a list")
    return v


def _chk_str(v) -> str:
    if _type(v) is not _str:
        raise ProtocolError("expected a string")
    return v
