"""Generators: when the items of the program's iterator may travel in batches without
changing what the test can see (the judge reads which code consumes them), and the tests'
namespace (``_Names``).
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from execrl.sandbox._judge_compare import LentObject

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

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
                or not isinstance(frame.f_locals.get(".0"), LentObject):
            return False
        call = _consumer_call(outer.f_code, outer.f_lasti)
        return (call is not None and call[1][0] == "genexpr" and call[1][1] is frame.f_code
                and any(_lookup(outer, call[0], side) is b for b in _DRAINING))
    call = _consumer_call(frame.f_code, frame.f_lasti)
    if call is None or call[1][0] == "genexpr":
        return False
    if not isinstance(_lookup(frame, call[1][1], side), LentObject):
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


_UNSHARED_SOURCE_REFS = _source_refs(x for x in range(1))


class _Names(dict):
    """The tests' namespace: what the setup and the tests bind, then the program's global
    names (looked up in the run when used), then the builtins."""

    def __missing__(self, name: str) -> Any:
        return self["__execrl_resolve__"](name)
