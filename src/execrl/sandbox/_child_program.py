"""The program in its run: compiled, loaded as ``__main__``, and its exceptions told as the
records the child writes (``_child`` lists them); ``_emit`` writes one on the result channel.
"""

from __future__ import annotations

import builtins
import sys

from execrl.sandbox._exchange import (HARNESS_ERROR_TYPES, RESULT_FD, _bool, _dumps, _float, _id, _int, _len, _os_write,
                                      _str, _str_copy, _text, _type)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``


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
    """The name of ``e``'s class, as the verdict's ``error_type``; a class of the program's named as
    one of the sandbox's own verdicts (``Timeout``, ``SIGKILL``) is told apart from it."""
    try:
        t = _type(e)
        name = _str_copy(_NAME(t))  # a plain str: the program may make its class's name a str subclass
    except BaseException:  # noqa: BLE001
        return "BaseException"
    if _id(t) not in _BUILTIN_EXCEPTIONS and name in HARNESS_ERROR_TYPES:
        name = f"{name[:100]} (the program's class)"
    return name if _len(name) <= 200 else name[:200] + "..."


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


def register_source(sources: dict) -> None:
    """``inspect.getsource`` of the program's own functions, for a program that names
    ``inspect`` or ``linecache``: its lines in ``linecache`` under the name it was compiled with
    (no other run pays for the import)."""
    code = sources.get("<solution>")
    if code is not None and ("inspect" in code or "linecache" in code):
        import linecache
        linecache.cache["<solution>"] = (len(code), None, code.splitlines(True), "<solution>")


def _load_program(compiled, sources: dict):
    """Execute the compiled candidate as ``__main__``: (its globals, None), or (None, its
    exception as ``[type, message, trace]``) when loading raised (``SystemExit`` too)."""
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    module.__file__ = "solution.py"  # as for ``python solution.py``
    sys.modules["__main__"] = module
    register_source(sources)
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


def _exc_record(e, sources: dict, text: str | None = None) -> list:
    """``[type, message, trace, builtin bases]`` of an exception (``text``: its message, when
    already taken)."""
    return [_exc_name(e), _text(e) if text is None else text, _format_exc(e, sources), _builtin_base(e)]


_BUILTIN_EXCEPTIONS = {id(c): c for c in builtins.__dict__.values() if _type(c) is _type and issubclass(c, BaseException)}
"""The interpreter's own exception classes, by identity, taken before a program runs: a class of
the program's is never one of them, whatever its ``__module__``, its name or its metaclass say."""
_MRO = _type.__dict__["__mro__"].__get__
_NAME = _type.__dict__["__name__"].__get__


def _builtin_base(e) -> str:
    """The builtin exception classes ``e`` is an instance of (the judge raises its stand-in of
    them, or the first): ``_builtin_base_of_class``."""
    return _builtin_base_of_class(_type(e))


def _builtin_base_of_class(cls) -> str:
    """The nearest builtin exception classes of ``cls``, comma-separated, in its MRO's order,
    none a base of another: ``KeyError,ValueError`` for ``class E(KeyError, ValueError)``, so
    that the test's ``except ValueError`` catches it as under plain Python."""
    found = []
    try:
        for c in _MRO(cls):
            if _BUILTIN_EXCEPTIONS.get(id(c)) is c and not any(issubclass(f, c) for f in found):
                found.append(c)
    except BaseException:  # noqa: BLE001
        pass
    return ",".join(_NAME(c) for c in found[:16]) or "Exception"

