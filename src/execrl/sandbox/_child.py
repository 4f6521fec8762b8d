"""The run's entry points: ``_run_served`` (``assert`` and ``call`` mode: the program serves
the judge) and ``_run_stdio`` (the program runs as ``__main__``), around the candidate program.

Everything here executes after fork, in the run's process. The rest of the run's side is in
``_child_program`` (compiling and loading the program, its exceptions as records),
``_child_side`` (serving the judge's requests), ``_child_kept`` (containers kept in step with
the judge's copies), ``_child_refs`` (the judge's objects the program holds) and
``_child_exit`` (ending the process as ``python solution.py`` ends). Records written by the child on
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
import marshal
import sys
import weakref

from execrl.sandbox._child_exit import (_end_forked_child, _exit_as_python_does, _exit_status, _finalize_main,
                                        _flush, _flush_std_files)
from execrl.sandbox._child_program import _emit, _exc_name, _format_exc, _load_program, register_source
from execrl.sandbox._child_side import _ChildSide, _global_kinds
from execrl.sandbox._exchange import _STRUCT_LEN, _dict, _dumps, _getpid, _len, _os_exit, _str, _text, _tuple, _type

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

SOCK_FD = 998
"""The child's end of its conversation with the judge (close-on-exec)."""
_INT_DIGITS = sys.get_int_max_str_digits()
_DIGITS_KEY = "__int_max_str_digits__"  # in the greeting, beside the globals (none of which starts with "__")

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
    register_source(sources)
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
    # Py_FinalizeEx flushes sys.stdout and sys.stderr before modules are finalized and again
    # after; a failed flush makes the exit status 120, and the run did not end normally.
    flushed = _flush_std_files()
    main = weakref.ref(module)
    del module
    _finalize_main(main)
    flushed_again = _flush_std_files()
    _flush()
    if not (flushed and flushed_again):
        _os_exit(120)
    _emit(["d", 0, token])
