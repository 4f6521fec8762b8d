"""How the run's process ends: as ``python solution.py`` ends (threads joined, ``atexit``
handlers run, ``__main__`` finalized, output flushed, the exit status ``SystemExit`` gives),
and a process the program forked ends as under plain Python without speaking for the run.
"""

from __future__ import annotations

import builtins
import gc
import os
import sys

from execrl.sandbox._exchange import _int, _int_copy, _isinstance, _os_exit, _str, _text, _type

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

_WARMING = [False]  # the template runs the harness in ``warm_up``


class _WarmDone(Exception):
    pass


def _flush() -> None:
    for stream in (getattr(sys, "stdout", None), sys.__stdout__, getattr(sys, "stderr", None), sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def _flush_std_files() -> bool:
    """CPython's ``flush_std_files`` at exit: ``sys.stdout``, then ``sys.stderr``, each unless it
    is None or closed. False when a flush failed (the program closed descriptor 1 under a
    buffered ``print``, or set a stream whose ``flush`` raises): ``python solution.py`` then
    exits with status 120 (``Py_RunMain``), however its output read until then."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None:
            continue
        try:
            closed = bool(stream.closed)
        except BaseException:  # noqa: BLE001 - CPython counts a stream it cannot ask as open
            closed = False
        if closed:
            continue
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            flushed = False
    return flushed


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


PROGRAM_FILE_MARKERS = ("multiprocessing", "ProcessPool", "__file__", "inspect", "linecache")
"""Words of a program that may read its own file (``_write_program_file``)."""


def _write_program_file(code: str) -> None:
    """Put the program at ``solution.py`` in its working directory, the ``__file__`` it runs
    as: ``multiprocessing``'s ``spawn`` and ``forkserver`` start methods run the main module's
    file again in every new process (as ``__mp_main__``), as they do for ``python solution.py``;
    ``inspect.getsource`` and ``open(__file__)`` read it. Only for programs that name one of
    ``PROGRAM_FILE_MARKERS``: other runs do not pay for the file."""
    try:
        fd = os.open("solution.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, code.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
    except OSError:  # beyond the file size limit: such a program cannot spawn, like any other
        pass
