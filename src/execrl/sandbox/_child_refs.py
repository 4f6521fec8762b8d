"""The judge's objects as a run holds them (``_JudgeRef``: a function or object the test
passed to the program, whose every use is a request to the judge), and a generator's batch of
items (``_BatchResult``).
"""

from __future__ import annotations

import builtins

from execrl.sandbox._exchange import ProtocolError, _deque, _Exchange, _getattr, _isinstance, _len, _list, _str, _type

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``


class _BatchResult:
    __slots__ = ("items", "end")

    def __init__(self, items, end):
        self.items, self.end = items, end


class _JudgeRef:
    """An object of the judge's (a function or object the test passed to the program): every
    operation on it is asked of the judge, which runs it on its side."""

    __slots__ = ("_execrl_side", "_execrl_n", "_execrl_buf", "_execrl_size")

    def __init__(self, side, n):
        _JudgeRef._execrl_side.__set__(self, side)
        _JudgeRef._execrl_n.__set__(self, n)
        _JudgeRef._execrl_buf.__set__(self, None)
        _JudgeRef._execrl_size.__set__(self, 1)

    def _execrl_ask(self, msg: list, ex: _Exchange):
        side = _JudgeRef._execrl_side.__get__(self)
        snap = side.snapshot(ex)  # our containers the judge's code may change
        # one request at a time on the socket: the program's threads calling the test's
        # function would interleave their requests and read each other's answers
        with side.lock:
            reply = side.call_peer(msg)
        rex = ex.follow()
        if reply[0] == "e":
            side.apply_updates(reply[5], rex)
            side.apply_shadow_updates(reply[6], rex)
            base = _str(reply[4])
            cls = _getattr(builtins, base, None)
            if not (_isinstance(cls, _type) and issubclass(cls, BaseException)):
                cls = Exception
            raise cls(_str(reply[2]))
        value = side.dec(reply[1], rex)
        side.apply_updates(reply[2], rex)
        side.apply_shadow_updates(reply[3], rex)
        del snap
        return value

    def _execrl_op(self, name, *operands):
        side = _JudgeRef._execrl_side.__get__(self)
        ex = _Exchange()
        return _JudgeRef._execrl_ask(self, ["o", name, [side.enc(x, ex) for x in (self, *operands)]], ex)

    def __call__(self, *args, **kwargs):
        side = _JudgeRef._execrl_side.__get__(self)
        ex = _Exchange()
        msg = ["c", side.enc(self, ex), [side.enc(a, ex) for a in args],
               [[k, side.enc(v, ex)] for k, v in kwargs.items()]]
        return _JudgeRef._execrl_ask(self, msg, ex)

    def __getattr__(self, name):
        side = _JudgeRef._execrl_side.__get__(self)
        ex = _Exchange()
        return _JudgeRef._execrl_ask(self, ["a", side.enc(self, ex), name], ex)

    def __setattr__(self, name, value):  # ``node.next = head`` on a node of the setup's class
        side = _JudgeRef._execrl_side.__get__(self)
        ex = _Exchange()
        _JudgeRef._execrl_ask(self, ["s", side.enc(self, ex), name, side.enc(value, ex)], ex)

    def __delattr__(self, name):
        side = _JudgeRef._execrl_side.__get__(self)
        ex = _Exchange()
        _JudgeRef._execrl_ask(self, ["d", side.enc(self, ex), name], ex)

    def __instancecheck__(self, instance):  # ``isinstance(x, ListNode)``, the class the judge's
        return _JudgeRef._execrl_op(self, "isinstance", instance)

    def __iter__(self):
        return _JudgeRef._execrl_op(self, "iter")

    def __next__(self):
        """The next item of the test's iterator: the judge sends one per request, or a batch
        where reading ahead cannot be seen (``_JudgeSide.take``)."""
        buf = _JudgeRef._execrl_buf.__get__(self)
        if buf:
            try:
                return buf.popleft()
            except IndexError:  # another of the program's threads took the last one
                pass
        n = _JudgeRef._execrl_size.__get__(self)
        if n == 0:  # the judge's iterator ended after the last batch
            _JudgeRef._execrl_size.__set__(self, 1)
            raise StopIteration
        got = _JudgeRef._execrl_op(self, "take", n)
        if _type(got) is not _list or _len(got) != 2 or _type(got[0]) is not _list:
            raise ProtocolError("malformed items")
        items, end = got
        _JudgeRef._execrl_size.__set__(self, 0 if end == "s" else n * 2 if n < 2048 else n)
        if not items:
            if end != "s":
                raise ProtocolError("malformed items")
            _JudgeRef._execrl_size.__set__(self, 1)
            raise StopIteration
        buf = _deque(items)
        _JudgeRef._execrl_buf.__set__(self, buf)
        return buf.popleft()

    def __len__(self):
        return _JudgeRef._execrl_op(self, "len")

    def __getitem__(self, key):
        return _JudgeRef._execrl_op(self, "getitem", key)

    def __contains__(self, item):
        return _JudgeRef._execrl_op(self, "contains", item)

    def __bool__(self):
        return _JudgeRef._execrl_op(self, "truth")

    def __repr__(self):
        return _JudgeRef._execrl_op(self, "repr")

    def __eq__(self, other):
        return _JudgeRef._execrl_op(self, "eq", other)

    def __ne__(self, other):
        return _JudgeRef._execrl_op(self, "ne", other)

    def __lt__(self, other):
        return _JudgeRef._execrl_op(self, "lt", other)

    def __le__(self, other):
        return _JudgeRef._execrl_op(self, "le", other)

    def __gt__(self, other):
        return _JudgeRef._execrl_op(self, "gt", other)

    def __ge__(self, other):
        return _JudgeRef._execrl_op(self, "ge", other)

    def __hash__(self):
        return _JudgeRef._execrl_op(self, "hash")

    # ``copy.copy(head)`` of the test's object: the judge copies it. Through ``__reduce_ex__``,
    # not ``__copy__``: ``itertools.tee`` copies an iterator that has a ``__copy__`` where Python
    # buffers the test's own (a generator cannot be copied, a ``map``'s copy shares its source).
    def __reduce_ex__(self, protocol):
        return _copy_of, (self,)

    def __deepcopy__(self, memo):
        return _copy_of(self, "deepcopy")


def _copy_of(ref, op="copy"):
    """The judge's copy (``op``: or deep copy) of the test's object ``ref``; of an iterator the
    judge read ahead, with the items the run holds and the program has not read yet first, as
    the original has them."""
    copy = _JudgeRef._execrl_op(ref, op)
    buf = _JudgeRef._execrl_buf.__get__(ref)
    if _type(copy) is _JudgeRef and buf:
        _JudgeRef._execrl_buf.__set__(copy, _deque(buf))
        _JudgeRef._execrl_size.__set__(copy, _JudgeRef._execrl_size.__get__(ref))
    return copy


# The handle's own class attributes would answer for the test's object: its ``__doc__`` and
# ``__module__`` are asked of the judge (``functools.wraps`` of a test's function reads them).
_JudgeRef.__doc__ = property(lambda self: _JudgeRef.__getattr__(self, "__doc__"))
_JudgeRef.__module__ = property(lambda self: _JudgeRef.__getattr__(self, "__module__"))
