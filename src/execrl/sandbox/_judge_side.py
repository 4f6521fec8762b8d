"""The judge's side of the conversation with one run (``_JudgeSide``): requests the
program's calls and operations, decodes what the run sends back.
"""

from __future__ import annotations

import builtins
import copy
import io
import json
import re
import sys
import threading
import types
from collections import Counter, OrderedDict, defaultdict, deque

from execrl.sandbox._exchange import (_MAX_DEPTH, _STRUCT_LEN, PeerGone, ProtocolError, _dumps, _Exchange, _shallow,
                                      _Side, _unchanged)
from execrl.sandbox._judge_compare import _short
from execrl.sandbox._judge_generators import _GENERATOR, _SCALAR_ITERATORS, _TUPLE_ITERATOR, _unseen_iterator
from execrl.sandbox._judge_proxies import (_CANDIDATE_EXITS, _KEPT_DICTS, _SHADOW_TYPES, _SHADOWS, JUDGE_MADE,
                                           CandidateExit, Remote, ValueTooDeep, ValueTooLarge, _assign,
                                           shadow_type, too_deep)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

_PLAIN_CONTAINERS = frozenset({list, tuple, dict, set, frozenset, deque, Counter, OrderedDict, defaultdict})
"""The test's containers that, past ``_MAX_DEPTH``, are refused rather than lent to the program."""

_SHOWN_STDLIB = frozenset({types.SimpleNamespace, re.Pattern, re.Match, io.StringIO, io.BytesIO})
"""Classes of the standard library whose objects, lent by a test, show the program their public
attributes and methods (a pattern's ``findall``, a ``StringIO``'s ``read``, a namespace's
fields): they hold only what the test put in them. A ``SimpleNamespace`` takes the program's
assignments too."""


_DESCRIPTIVE = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})
"""What any object of the test's tells the program of itself (a decorator of the program's
names the test's function, ``functools.wraps`` copies them): names and text, nothing to call."""


def _class_data(t: type, target, name: str) -> bool:
    """Whether ``name`` read on ``target`` would be a data attribute of its class (not its own,
    not a method, property or slot, not None): a setup's table of answers read through an
    instance (``Case(0, 0).registry``), which the rule that no attribute of the setup's classes
    reaches the run covers too."""
    own = getattr(target, "__dict__", None)
    if type(own) is dict and name in own:
        return False
    for klass in t.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            # a class-level default of None (``left = None`` of a tree's node) tells nothing
            return not (value is None or callable(value) or hasattr(type(value), "__get__"))
    return False


def _shown_attribute(target, name: str, assigned: bool) -> bool:
    """Whether the program may read (or, ``assigned``, set or delete) attribute ``name`` of the
    test's object ``target``: its ``_DESCRIPTIVE`` names; any name but a dunder of the test's own
    objects (a class of the test's or the setup's: ``_items`` as in Python; ``__globals__`` and
    the like never); a public one of ``_SHOWN_STDLIB``'s. Nothing else of the judge's shows its
    attributes."""
    if name in _DESCRIPTIVE:
        return not assigned
    if name in ("format", "format_map"):  # a template walks attribute paths from its arguments
        return False
    t = type(target)
    if t in JUDGE_MADE:  # named as the program's classes (``__main__``), made by the judge
        return False
    if getattr(t, "__module__", None) == "__main__":
        return not name.startswith("__") and (assigned or not _class_data(t, target, name))
    if t in _SHOWN_STDLIB and not name.startswith("_"):
        return t is types.SimpleNamespace or not assigned
    return False


# --------------------------------------------------------------------------------------
# The judge's side of the conversation with one run
# --------------------------------------------------------------------------------------

class _Gone(BaseException):
    """The run ended (exited, was killed or timed out) during a test."""


class _Violation(BaseException):
    """The run sent something that is not a valid answer."""


class _JudgeSide(_Side):
    # What a level of a test's function calling the program's that calls it back costs here,
    # the test's frame included (the harness's frames and the C calls counted with them;
    # measured): the judge never binds first, and the run's limit decides, which the program's
    # own ``sys.setrecursionlimit`` raises as it raises plain Python's (_ChildSide's).
    NESTED_FRAMES = 11

    def __init__(self, fd: int, kinds: dict | None = None) -> None:
        super().__init__(fd)
        self.kinds = kinds or {}
        self.shadows: dict = {}
        self.named_shadows: dict = {}  # (base, the program's class name) -> its shadow type (``shadow_type``)
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
        # A test's threads call the program at once (``ThreadPoolExecutor.map(f, ...)``): one
        # request and its answer at a time on the one socket; reentrant, for the run's calls
        # back into a test's function that call the program again.
        self.lock = threading.RLock()

    # ---- values: what only this side has -------------------------------------------------
    def other(self, v, ex, depth):
        t = type(v)
        if t is Remote:
            return Remote._execrl_ref.__get__(v)
        if t in _SHADOW_TYPES:
            return Remote._execrl_ref.__get__(v.__dict__["_execrl_remote"])
        if t is type(sys):
            return {"m": v.__name__}
        scalar = self.numpy_scalar(v, t)
        if scalar is not None:
            return {"N": [scalar[0], self.enc(scalar[1], ex, depth)]}
        name = getattr(v, "__name__", None)
        if isinstance(name, str) and getattr(builtins, name, None) is v:
            return {"B": name}
        if isinstance(v, type) and not self.known_class(v):
            # a class the test's code made on the way (``namedtuple``, ``Enum``'s functional API,
            # ``types.new_class``, perhaps of the program's names and methods, while it served the
            # program): lent, its objects would be the judge's with the program's ``__eq__``
            raise MadeClass("the program may not receive a class the judge made for it")
        if depth > _MAX_DEPTH and t in _PLAIN_CONTAINERS:
            raise too_deep(f"the test's {t.__name__}")
        if depth == 0 and (t is _GENERATOR or t in _SCALAR_ITERATORS or t is _TUPLE_ITERATOR) \
                and _an_argument() and sys.getrefcount(v) <= _TEMPORARY_REFS and _unseen_iterator(v):
            n = self.lend(v)
            self.read_ahead.add(n)
            return {"j": n}
        return {"j": self.lend(v)}

    def known_class(self, cls: type) -> bool:
        """Whether ``cls`` is a class the setup or the tests bound to a name (or one inside such a
        class), a module's own class (found under its name in the module it names), or one the
        judge made (``JUDGE_MADE``: no method of the program's): not one made on the way."""
        try:
            if cls in JUDGE_MADE:
                return True
        except TypeError:  # a metaclass's ``__eq__`` without a hash
            return False
        qualname, module_name = type.__dict__["__qualname__"].__get__(cls), type.__dict__["__module__"].__get__(cls)
        if type(qualname) is not str or type(module_name) is not str or "<" in qualname:
            return False
        parts = qualname.split(".")
        if module_name == "__main__":
            found = dict.get(self.setup_ns, parts[0])
        else:
            module = sys.modules.get(module_name)
            found = getattr(module, parts[0], None) if module is not None else None
        for part in parts[1:]:
            found = getattr(found, part, None) if isinstance(found, type) else None
        return found is cls

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
                object.__setattr__(remote, "_execrl_hash", val[3])
            return remote
        if tag == "S":
            if type(val) is not list or len(val) != 3 or type(val[0]) is not int:
                raise ProtocolError("bad shadow")
            n, tname = val[0], val[1]
            k = len(ex.table)
            base = self.dec(val[2], ex)
            shadow = self.shadows.get(n)
            if shadow is not None and type(base) in (list, dict, set) and isinstance(shadow, type(base)):
                # sent again (a second call of the test's function): what the program's object
                # holds now, which the test sees and the copy-out starts from
                _assign(shadow, base)
                if n in self.kept:
                    self.kept[n] = _shallow(shadow)
            if shadow is None:
                if type(base) not in _SHADOWS:
                    raise ProtocolError("bad shadow")
                name = tname.rsplit(".", 1)[-1] if type(tname) is str and tname else None
                cls = shadow_type(type(base), name, self.named_shadows) if name and name.isidentifier() else _SHADOWS[type(base)]
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
            self.send_text(self.serve_nested(reply))

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
                raised = self.candidate_exception(reply[1:5] + reply[7:9], rex=rex)
            else:
                if len(reply) < 4:
                    raise ProtocolError("malformed answer")
                first = len(rex.table)
                value = self.dec(reply[1], rex)
                self.apply_updates(reply[2], rex)
                self.refresh(reply[3], rex)
                end = reply[4] if len(reply) > 4 else None
                if type(end) is list:  # a batch's end: the exception it met, its values in this exchange
                    end = self.candidate_exception(end, rex=rex)
                if len(reply) > 5:
                    value = self.track(reply[5], rex, value, first)
                return value, end
        except PeerGone:
            self.ended = _Gone()
            raise self.ended from None
        except (ValueTooLarge, ValueTooDeep, MadeClass):  # the sandbox's limits and refusals, named to the test
            raise
        except Exception as e:  # noqa: BLE001 - whatever the run's answer made the harness raise
            # (a malformed value, a date out of range, a class name ``type`` refuses): never
            # the program's exception, which is raised below
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
        with self.lock:
            ex = _Exchange()
            enc = self.enc
            msg = ["c", enc(target, ex), [enc(a, ex) for a in args], [[k, enc(v, ex)] for k, v in kwargs.items()]]
            return self.ask(msg, ex)[0]

    def request_op(self, name, operands):
        with self.lock:
            ex = _Exchange()
            return self.ask(["o", name, [self.enc(x, ex) for x in operands]], ex)[0]

    def request_attr(self, target, name):
        with self.lock:
            ex = _Exchange()
            return self.ask(["a", self.enc(target, ex), name], ex)[0]

    def request_set(self, target, name, value):
        with self.lock:
            ex = _Exchange()
            self.ask(["s", self.enc(target, ex), name, self.enc(value, ex)], ex)

    def request_del(self, target, name):
        with self.lock:
            ex = _Exchange()
            self.ask(["d", self.enc(target, ex), name], ex)

    def request_batch(self, target, n):
        with self.lock:
            ex = _Exchange()
            items, end = self.ask(["t", self.enc(target, ex), n], ex)
        if type(items) is not list:
            raise _Violation("malformed batch")
        return items, end

    def request_global(self, name):
        with self.lock:
            return self.ask(["n", name], _Exchange())[0]

    def request_entry(self, name, args):
        with self.lock:
            ex = _Exchange()
            return self.ask(["k", name, [self.enc(a, ex) for a in args]], ex)[0]

    def exception_class(self, key: str, base: str) -> type:
        """The judge's stand-in for the program's exception class ``key`` (a global name, or
        the qualified name of a nested class: ``Stack.Empty``), a subclass of the builtin
        ``base``; one per key, so that the test's ``except`` catches what the program raises."""
        cls = self.exceptions.get(key)
        if cls is None:
            bases = tuple(_exception_base(n) for n in base.split(",")[:16])
            bases = tuple(b for b in bases if b is not None) or (Exception,)
            name = key.rpartition(".")[2] or "Exception"
            # str(e) is the program's (its own ``__str__``), recorded when it was raised
            namespace = {"__module__": "__main__", "__qualname__": key, "__str__": _candidate_text}
            try:
                cls = type(name, bases, namespace)
            except TypeError:  # bases of conflicting layouts (``OSError`` and ``ValueError``): the first
                cls = type(name, bases[:1], namespace)
            except ValueError:  # a name ``type`` refuses (a NUL, a lone surrogate): the class keeps its bases
                cls = type("Exception", bases[:1], {**namespace, "__qualname__": "Exception"})
            self.exceptions[key] = cls
            JUDGE_MADE.add(cls)
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

    def candidate_exception(self, record, depth: int = 0, rex=None) -> BaseException:
        """The program's exception, raised in the test as its nearest builtin class (so
        ``except ValueError`` works), as the judge's stand-in for the program's own class, or
        as the standard library's class (the judge's own ``json.JSONDecodeError``); with the
        program's arguments and attributes (plain scalars; any value when the answer's
        exchange ``rex`` decodes what the run encoded), and its ``__cause__``."""
        if type(record) is not list or len(record) < 4:
            return _Violation("malformed exception record")
        etype, msg, trace, base = (str(x)[:2000] for x in record[:4])
        gname = record[4] if len(record) > 4 and type(record[4]) is str else None
        detail = record[5] if len(record) > 5 and type(record[5]) is dict else {}
        cls = self.exception_class(gname[:200], base) if gname else self._stdlib_class(detail.get("c"))
        if cls is None:
            base = base.partition(",")[0]
            cls = getattr(builtins, base, None)
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                cls = Exception
            elif not issubclass(cls, Exception):
                cls = _CANDIDATE_EXITS.get(base, CandidateExit)
        args = detail.get("a")
        args = tuple(args) if type(args) is list and all(type(a) in _DETAIL_TYPES for a in args) else (msg,)
        # decoded in the order the run encoded them: the arguments, the attributes, the cause's
        if rex is not None and "A" in detail:
            decoded = self.dec(detail["A"], rex)
            if type(decoded) is not list:
                raise ProtocolError("malformed exception arguments")
            args = tuple(decoded)
        encoded_attrs = detail.get("D") if rex is not None else None
        more_attrs = [[k, self.dec(v, rex)] for k, v in _chk_pairs(encoded_attrs)] if encoded_attrs else []
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
        for k, v in more_attrs:
            if k.isidentifier() and not k.startswith(("_", "execrl")) and not hasattr(type(exc), k):
                exc.__dict__[k] = v
        cause = detail.get("k")
        if cause is not None and depth < 3:
            c = self.candidate_exception(cause, depth + 1, rex)
            if not isinstance(c, _Violation):
                exc.__cause__ = c
        exc.execrl_candidate = (etype, msg, trace)
        long_text = detail.get("s")
        exc.execrl_text = long_text if type(long_text) is str else msg
        return exc

    # ---- the run's requests (a call back into an object the test passed) --------------
    def serve_one(self, req) -> str:
        ex = _Exchange()
        # what the request's containers held before the test's code ran: its plain ones
        # (``snapshot``) and the copies of the program's list, dict and set subclasses
        state = [None, None]
        try:
            value = self._perform(req, ex, state)
        except (_Gone, _Violation):
            raise
        except BaseException as e:  # noqa: BLE001 - the test's code raised: the program sees it
            base = next((c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins"), "Exception")
            return self._error_answer(type(e).__name__, str(e), base, ex, state)
        rex = ex.follow()
        try:
            # copied out: what the test's function did to the program's containers it was handed
            # (``fn(data)`` appending to ``data``) reaches the program's objects, as in Python
            answer = ["r", self.enc(value, rex), self.updates(state[0], rex), self.shadow_updates(state[1], rex)]
        except MadeClass as e:  # in the value or a container copied out: the program's error
            return self._error_answer("TypeError", str(e), "TypeError", ex, state)
        return json.dumps(answer)

    def _error_answer(self, name: str, text: str, base: str, ex, state) -> str:
        rex = ex.follow()
        try:
            updates, shadows = self.updates(state[0], rex), self.shadow_updates(state[1], rex)
        except MadeClass:  # a class made on the way in a container: its changes stay here
            updates = shadows = []
        return json.dumps(["e", name, _short(text), "", base, updates, shadows, None])

    @staticmethod
    def shadow_snapshot(ex) -> list | None:
        """The copies of the program's list, dict and set subclasses in a request, with what
        they hold (``shadow_updates``)."""
        found = None
        for obj in ex.table:
            if type(obj) in _SHADOW_TYPES and isinstance(obj, (list, dict, set)):
                if found is None:
                    found = []
                found.append((obj, _shallow(obj)))
        return found

    def shadow_updates(self, snap, rex) -> list:
        """``[[n, content], ...]``: the copies of the program's container subclasses that the
        test's code changed (``n`` the program's object), numbered in the answer ``rex``."""
        out = []
        for obj, before in snap or ():
            if not _unchanged(before, obj):
                n = Remote._execrl_ref.__get__(obj.__dict__["_execrl_remote"])["h"]
                plain = dict(dict.items(obj)) if isinstance(obj, dict) else list(obj) if isinstance(obj, list) else set(obj)
                out.append([n, self.enc(plain, rex)])
        return out

    def _perform(self, req, ex, state):
        op = req[0]
        # What the program calls, reads, sets or operates on is an object the judge lent it (a
        # test's function, object or iterator): never a value it sends, nor what an operation on
        # one makes. The judge's ``type`` called with the program's arguments (or ``type[int]``)
        # would make a class whose ``__eq__`` is the program's, deciding a test's check; a string
        # the judge holds as a copy of the program's has a ``format`` that walks any attribute
        # path from a handle to the tests' expected values.
        subject = req[2][0] if op == "o" and len(req) == 3 and type(req[2]) is list and req[2] else \
            req[1] if op in ("c", "a", "s", "d") and len(req) >= 2 else None
        if op in ("c", "a", "s", "d", "o") and not _lent(subject):
            raise TypeError("the program may only use the judge's objects the tests handed it")
        if op == "c" and len(req) == 4:
            target = self.dec(req[1], ex)
            if _makes_classes(target):
                raise TypeError("the program may not make classes in the judge")
            args = [self.dec(a, ex) for a in req[2]]
            kwargs = {str(k): self.dec(v, ex) for k, v in req[3]}
            state[0] = self.snapshot(ex)
            state[1] = self.shadow_snapshot(ex)
            return self.call_with_socket_free(target, args, kwargs)
        if op == "a" and len(req) == 3:
            target = self.dec(req[1], ex)
            name = str(req[2])
            if not _shown_attribute(target, name, assigned=False):
                raise AttributeError(name)
            return getattr(target, name)
        if op in ("s", "d") and len(req) == (4 if op == "s" else 3):  # ``node.next = head`` in the program
            target = self.dec(req[1], ex)
            name = str(req[2])
            if not _shown_attribute(target, name, assigned=True):
                raise AttributeError(name)
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

    def call_with_socket_free(self, target, args, kwargs):
        """A test's function called for the program, other threads free to use the socket
        meanwhile: the function may hand work to a thread that calls the program (a pool's
        ``submit(g, x).result()``) and wait for it. That thread's request and answer come and go
        whole before this thread takes the socket back to answer (the run serves them as
        requests nested in its own call)."""
        lock = self.lock
        if not lock._is_owned():
            return target(*args, **kwargs)
        state = lock._release_save()
        try:
            return target(*args, **kwargs)
        finally:
            lock._acquire_restore(state)

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


def _exception_base(name: str) -> type | None:
    """The builtin exception class ``name`` as a stand-in's base: the judge's exits for
    ``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit`` (a subclass of the program's
    ends the tests as in Python, and ``except Exception`` does not catch it)."""
    if name in _CANDIDATE_EXITS:
        return _CANDIDATE_EXITS[name]
    b = getattr(builtins, name, None)
    return b if isinstance(b, type) and issubclass(b, Exception) else None


def _chk_pairs(v) -> list:
    """``[[name, encoded], ...]`` of an exception's attributes, or a ProtocolError."""
    if type(v) is not list or not all(type(kv) is list and len(kv) == 2 and type(kv[0]) is str for kv in v):
        raise ProtocolError("malformed exception attributes")
    return v


def _candidate_text(self) -> str:
    """``str()`` of the program's exception, as the program's own ``__str__`` gave it."""
    recorded = self.__dict__.get("execrl_text")
    return recorded if type(recorded) is str else BaseException.__str__(self)


class MadeClass(TypeError):
    """A class the test's code made (``known_class``) about to reach the program: a
    ``TypeError`` in the program (a request's answer) or in the test (its call of the program),
    never a protocol violation of the program's."""


def _makes_classes(target) -> bool:
    """Whether calling ``target`` could make a class, or reach the judge's own machinery: a
    metaclass (``type``, ``ABCMeta``), an alias of one (``type[0]`` a test's key function made),
    or a class or function of the sandbox's. A test's own classes and functions, and the
    standard library's (``Counter`` handed to the program as a factory), are called as in Python."""
    if isinstance(target, types.GenericAlias):
        target = target.__origin__
    if isinstance(target, type):
        try:  # (only a class is asked of the weak set: an unhashable callable object would raise)
            if issubclass(target, type) or target in JUDGE_MADE:
                return True
        except TypeError:  # a metaclass's ``__eq__`` without a hash
            return True
    module = getattr(target, "__module__", None)
    owner = getattr(type(target), "__module__", None)
    return any(type(m) is str and m.startswith("execrl.") for m in (module, owner))


def _lent(encoded) -> bool:
    """Whether an encoded value names an object the judge lent the run (``{"j": n}``)."""
    return type(encoded) is dict and len(encoded) == 1 and "j" in encoded


_REVERSE_OPS = {"iter": iter, "next": next, "len": len, "repr": repr, "hash": hash, "truth": bool,
                "getitem": lambda a, b: a[b], "contains": lambda a, b: b in a, "eq": lambda a, b: a == b,
                "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
                "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
                "isinstance": lambda cls, v: isinstance(v, cls), "copy": copy.copy, "deepcopy": copy.deepcopy}


class _SetupClass:
    """Lent to the run in place of a class the setup defines (the setup runs after the
    program loads): the run's requests naming it name the class (``_JudgeSide.setup_class``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


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
del _counter
