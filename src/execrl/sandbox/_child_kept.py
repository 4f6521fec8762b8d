"""Containers kept in step: the lists, dicts and sets of a result (or of a call's arguments)
that the program still holds, whose copies in the judge follow the program's objects both
ways, as if the test held the program's own object. Found from reference counts.
"""

from __future__ import annotations

import builtins
import itertools as _itertools

from execrl.sandbox._exchange import (_GENERATOR_TYPES, ProtocolError, _bool, _chk_list, _Counter, _defaultdict,
                                      _deque, _dict, _dict_items, _Exchange, _float, _frozenset, _getattr,
                                      _getrefcount, _id, _int, _len, _list, _NoneType, _OrderedDict, _set,
                                      _shallow, _str, _tuple, _type, _unchanged)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``
_slice, _isinstance = slice, isinstance

_DICT_TYPES = frozenset({_dict, _Counter, _OrderedDict, _defaultdict})
_KEPT_TYPES = _DICT_TYPES | {_list, _set}
"""Containers of a result kept in step with the program's object when the program holds it."""
_WALKED = _KEPT_TYPES | {_tuple, _frozenset, _deque}
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


class _KeptInStep:
    """The program's side (``_ChildSide``): finding the containers the program holds, and
    keeping them in step with the judge's copies (``shadows``: lent number -> (object, base
    type, its last content))."""

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

    def apply_shadow_updates(self, entries, ex: _Exchange) -> None:
        """``[[n, content], ...]`` in the judge's answer: a test's function changed its copy of
        the program's list, dict or set subclass ``n`` (a callback appending to the program's
        ``History(list)``); the program's object takes the new content (``_refresh`` is the way
        back)."""
        for entry in _chk_list(entries):
            n, content = _chk_list(entry)
            kept = self.shadows.get(n) if _type(n) is _int else None
            if kept is None:
                raise ProtocolError("an update of no container of the program's")
            obj, base, _ = kept
            value = self.dec(content, ex)
            if base is _list and _type(value) is _list:
                _list.__setitem__(obj, _slice(None), value)
            elif base is _set and _type(value) is _set:
                _set.clear(obj)
                _set.update(obj, value)
            elif base is _dict and _type(value) is _dict:
                cls = _OrderedDict if _isinstance(obj, _OrderedDict) else _dict  # its order kept by its own methods
                cls.clear(obj)
                cls.update(obj, value)
            else:
                raise ProtocolError("an update of another kind of container")
            self.shadows[n] = (obj, base, _shallow(obj))

    def _refresh(self, ex: _Exchange) -> list:
        """New content of the program's container subclasses the judge holds a copy of."""
        out = []
        for n, (obj, base, before) in self.shadows.items():
            if not _unchanged(before, obj):
                plain = _dict(_dict_items(obj)) if base is _dict else base(obj)
                out.append([n, self.enc(plain, ex, 1)])
                self.shadows[n] = (obj, base, _shallow(obj))
        return out

