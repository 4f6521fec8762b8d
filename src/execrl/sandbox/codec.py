"""Strict decoding of values observed in the sandbox (the encoder runs in the child).

The child sends return values as JSON built only from exact builtin types: ``None``,
``bool``, ``int``, ``float``, ``str`` as themselves; anything else as a one-key object
``{"l": [...]}`` (list), ``"t"`` (tuple), ``"d"`` (dict, as ``[key, value]`` pairs),
``"s"`` (set), ``"f"`` (frozenset), ``"b"`` (bytes, hex), ``"y"`` (bytearray, hex),
``"c"`` (complex, ``[re, im]``) and ``"i"`` (a large int, hex). Decoding rebuilds plain
builtin objects, so comparing them in the judge never runs candidate code.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 130


class DecodeError(ValueError):
    """The child sent something that is not a valid encoded value."""


def decode(x: Any, depth: int = 0) -> Any:
    t = type(x)
    if t is str or t is bool or t is float or t is int or x is None:
        return x
    if depth > MAX_DEPTH:
        raise DecodeError("value nested too deeply")
    if t is not dict or len(x) != 1:
        raise DecodeError(f"unexpected {t.__name__} in encoded value")
    ((tag, val),) = x.items()
    d = depth + 1
    try:
        if tag == "l":
            return [decode(v, d) for v in _list(val)]
        if tag == "t":
            return tuple(decode(v, d) for v in _list(val))
        if tag == "d":
            out = {}
            for pair in _list(val):
                k, v = _list(pair)
                out[decode(k, d)] = decode(v, d)
            return out
        if tag == "s":
            return {decode(v, d) for v in _list(val)}
        if tag == "f":
            return frozenset(decode(v, d) for v in _list(val))
        if tag == "b":
            return bytes.fromhex(_str(val))
        if tag == "y":
            return bytearray.fromhex(_str(val))
        if tag == "c":
            re_, im = _list(val)
            if type(re_) not in (int, float) or type(im) not in (int, float):
                raise DecodeError("bad complex")
            return complex(re_, im)
        if tag == "i":
            return int(_str(val), 16)
    except (TypeError, ValueError) as e:  # unhashable member, bad hex, wrong arity
        raise DecodeError(str(e)) from e
    raise DecodeError(f"unknown tag {tag!r}")


def _list(v: Any) -> list:
    if type(v) is not list:
        raise DecodeError("expected a list")
    return v


def _str(v: Any) -> str:
    if type(v) is not str:
        raise DecodeError("expected a string")
    return v


def loads_record(line: bytes) -> list:
    """Parse one record line from the child; raises DecodeError on anything malformed."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise DecodeError(f"malformed record: {e}") from e
    if type(rec) is not list or not rec or type(rec[0]) is not str:
        raise DecodeError("record is not a tagged list")
    return rec
