"""Sandbox worker: a long-lived process pair that forks one child per candidate run.

:class:`execrl.sandbox.Executor` runs this file in a fresh ``python -s -P`` (from a code
object it compiled: see ``executor._BOOT``) with ``CONFIG`` as the argument. It deliberately
imports nothing from the package: the worker is the template every candidate is forked from,
so it is kept small (fork cost on the target machines grows by ~50 us per MB of private
memory) and it never holds anything a candidate must not see. The process the executor
talks to (the controller, :class:`Worker`) forks a *forker* once (``_forker``), which forks
the runs; see ``Worker`` for why. The worker never receives expected values: it gets the
candidate-dependent sub-expressions of each test (``probes``, or a replayed test reduced to
its recorded expressions), call arguments or stdin inputs, runs them in a forked child, and
sends back the raw observations; the executor process judges them.

Wire format (both directions): 4-byte big-endian length + JSON. Replies carry the captured
byte streams after the JSON header (lengths in the header).

Records written by the child on its result fd are JSON lines:

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
import ctypes
import gc
import json
import marshal
import os
import resource
import select
import signal
import struct
import sys
import time
from json.encoder import c_make_encoder, encode_basestring_ascii

# Every function below resolves builtins through this private snapshot (CPython binds a
# function's builtins when it is created), so a candidate that patches the ``builtins``
# module (``isinstance``, ``getattr``, ``print``, ...) cannot change how the harness runs.
__builtins__ = dict(builtins.__dict__)

_LEN = struct.Struct(">I")
RESULT_FD = 997  # the child's result channel is moved here (close-on-exec)
MAX_RECORD_BYTES = 4 << 20
"""Cap on everything one run reports (its result records): beyond it the run is an error."""
MAX_REPLY_BYTES = 32 << 20
"""Cap on what one candidate's reply carries over all its runs (stdio: outputs of every
test); tests that would start beyond it are not run."""
REAP_GRACE_S = 5.0
"""How long the forker may take to kill and reap a run's processes before it reports the
worker as stuck (the executor then replaces the worker and kills everything of its uid)."""
COMPILE_IN_WORKER_MAX = 256 << 10  # larger programs are compiled in the child
_BIG = 1 << 62
_MAX_DEPTH = 120

# --------------------------------------------------------------------------------------
# libc helpers (namespaces, mounts, prctl)
# --------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MS_SLAVE, MS_SHARED = 32, 4096, 16384, 1 << 18, 1 << 19, 1 << 20
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 38, 36
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 4


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, dst, fstype, flags, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {src} -> {dst}")


def _bind_ro(src: str, dst: str, recursive: bool = False) -> None:
    _mount(src, dst, None, MS_BIND | (MS_REC if recursive else 0))
    _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _prctl(option: int, value: int) -> None:
    _libc.prctl(option, value, 0, 0, 0)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(program: bytes, syscall_nr: int | None) -> None:
    """Install the run filter (``execrl.sandbox.seccomp``) on this process and its future
    children. ``PR_SET_NO_NEW_PRIVS`` first: required without CAP_SYS_ADMIN, and harmless
    here (every mount of the private root is nosuid). Through ``seccomp(2)`` with
    ``SECCOMP_FILTER_FLAG_SPEC_ALLOW`` where the kernel has it (4.17+), else ``prctl``."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    if syscall_nr is not None and _libc.syscall(syscall_nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW,
                                                ctypes.c_void_p(ctypes.addressof(prog))) == 0:
        return
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "prctl(SECCOMP)")


# --------------------------------------------------------------------------------------
# Isolation set up once per worker
# --------------------------------------------------------------------------------------

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
ROOT_MOUNT_CANDIDATES = ("/mnt", "/media", "/srv", "/boot", "/opt", "/run", "/tmp", "/var/tmp")


SCRATCH_DIRS = ("/tmp", "/dev/shm")
STAGE_DIR = "/.execrl-python"
"""Where interpreter directories that live in a scratch location (a virtualenv under /tmp)
are bound in the private root, to be bound again into every fresh scratch mount."""


def _python_dirs() -> list[tuple[str, str]]:
    """Directories the interpreter needs to import modules (made visible read-only), as
    (real directory, path in the sandbox) pairs. A directory reached through a symbolic link
    (``.venv -> /scratch/...``) is visible under both names: ``sys.path`` holds the linked one."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    pairs = set()
    for p in paths:
        if os.path.isdir(p):
            real = os.path.realpath(p)
            pairs.update({(real, real), (real, os.path.normpath(os.path.abspath(p)))})
    keep: list[tuple[str, str]] = []
    for real, p in sorted(pairs, key=lambda rp: (rp[1], rp[0])):
        if any(_within(p, s) for s in SYSTEM_DIRS):
            continue
        if p == "/" or any(_within(p, s) for s in ("/dev", "/proc")):
            continue
        if any(_within(p, k) for _, k in keep):
            continue
        keep.append((real, p))
    return keep


def _harness_dirs() -> list[str]:
    """The harness's own source directory under every name it has (hidden in the sandbox by
    an empty mount over it: the rest of the directory that holds it, site-packages for a
    non-editable install, stays visible)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted({os.path.realpath(here), os.path.normpath(here)})


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _build_root(root: str, hidepid: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """Populate ``root`` (a fresh tmpfs) with read-only views of what Python needs.

    Returns notes and the (staged source, path) binds to repeat inside every fresh scratch
    mount: an interpreter directory under /tmp would otherwise be hidden by it.
    """
    notes, scratch_binds = [], []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            os.symlink(os.readlink(d), root + d)
        elif os.path.isdir(d):
            os.mkdir(root + d, 0o755)
            _bind_ro(d, root + d, recursive=True)
            _hide_harness(root + d, d)
    for real, p in _python_dirs():
        if any(_within(p, d) for d in SCRATCH_DIRS):
            stage = f"{STAGE_DIR}/{len(scratch_binds)}"
            os.makedirs(root + stage, 0o755, exist_ok=True)
            _bind_ro(real, root + stage, recursive=True)
            _hide_harness(root + stage, p)
            scratch_binds.append((stage, p))
            continue
        os.makedirs(root + p, 0o755, exist_ok=True)
        _bind_ro(real, root + p, recursive=True)
        _hide_harness(root + p, p)
    # a minimal /dev
    os.mkdir(root + "/dev", 0o755)
    for name in DEVICES:
        if os.path.exists("/dev/" + name):
            open(root + "/dev/" + name, "w").close()
            _mount("/dev/" + name, root + "/dev/" + name, None, MS_BIND)
    os.mkdir(root + "/dev/shm")
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", root + "/dev/" + name)
    os.mkdir(root + "/proc", 0o555)
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2" if hidepid else None)
    except OSError:
        _mount("/proc", root + "/proc", None, MS_BIND | MS_REC)
        notes.append("fresh /proc not allowed: host /proc bound")
    os.mkdir(root + "/tmp")
    return notes, scratch_binds


def _hide_harness(mounted: str, path: str) -> None:
    """Cover the harness's source directory, where it lies under ``path`` (now mounted at
    ``mounted``), with an empty read-only tmpfs."""
    for own in _harness_dirs():
        if _within(own, path) and os.path.isdir(mounted + own[len(path):]):
            _mount("tmpfs", mounted + own[len(path):], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=755")


def fresh_scratch(size_mb: int, scratch_binds: list[tuple[str, str]]) -> None:
    """Replace /tmp and /dev/shm (inside the private root) with new, empty tmpfs mounts.

    Lazily detaching the old mount frees everything in it at once, whatever a run left
    there: directory chains deeper than PATH_MAX, a full file system, odd permissions.
    """
    for d in SCRATCH_DIRS:
        _libc.umount2(d.encode(), MNT_DETACH)  # EINVAL the first time: nothing mounted yet
        _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size_mb)}m,mode=1777")
    old_umask = os.umask(0o022)
    try:
        for stage, path in scratch_binds:
            os.makedirs(path, 0o755, exist_ok=True)
            _bind_ro(stage, path, recursive=True)
    finally:
        os.umask(old_umask)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def setup_isolation(cfg: dict) -> dict:
    """Enter private namespaces and a private root once; children inherit them.

    Returns a report of what is active. Modes: ``root`` (uid drop + mount/net namespaces +
    private root), ``userns`` (unprivileged user namespace: same, without uid drop),
    ``none`` (rlimits, sessions and temp dirs only).
    """
    report = {"mode": "none", "uid": os.getuid(), "network_isolated": False, "private_root": False,
              "ipc_isolated": False, "notes": [], "scratch_binds": []}
    want = cfg.get("isolation", "auto")
    if want == "none":
        return report
    is_root = os.geteuid() == 0
    # A private IPC namespace: SysV objects are refused by the seccomp filter anyway; this
    # also keeps them away from the host if the filter is unavailable.
    flags = CLONE_NEWNS | CLONE_NEWIPC | (0 if cfg.get("network") else CLONE_NEWNET)
    try:
        if is_root:
            _check(_libc.unshare(flags), "unshare")
            report["mode"] = "root"
        else:
            uid, gid = os.getuid(), os.getgid()
            _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare(user)")
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"0 {uid} 1")
            _write("/proc/self/gid_map", f"0 {gid} 1")
            report["mode"] = "userns"
    except OSError as e:
        report["notes"].append(f"namespaces unavailable ({e}); running without them")
        if want in ("root", "userns"):
            raise
        return report
    report["network_isolated"] = not cfg.get("network")
    report["ipc_isolated"] = True
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        needed = [d for pair in _python_dirs() for d in pair] + list(SYSTEM_DIRS)
        root = next(d for d in ROOT_MOUNT_CANDIDATES
                    if os.path.isdir(d) and not os.path.islink(d)
                    and not any(_within(n, d) for n in needed))
        _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={int(cfg.get('tmpfs_mb', 256))}m,mode=755")
        old_umask = os.umask(0o022)
        try:
            notes, report["scratch_binds"] = _build_root(root, hidepid=is_root)
            report["notes"] += notes
        finally:
            os.umask(old_umask)
        os.chroot(root)
        os.chdir("/")
        fresh_scratch(int(cfg.get("tmpfs_mb", 256)), report["scratch_binds"])
        # shared, so that the forker's mount namespace (a slave of this one, see _forker)
        # receives every fresh scratch mount made here
        _mount(None, "/", None, MS_REC | MS_SHARED)
        report["private_root"] = True
    except (OSError, StopIteration) as e:
        report["notes"].append(f"private root unavailable ({e}); host filesystem visible")
    if report["mode"] == "root" and cfg.get("drop_privileges", True):
        report["uid"] = int(cfg["uid"])
    return report


# --------------------------------------------------------------------------------------
# Strict value encoding (child side). Decoding lives in execrl.sandbox.codec.
# --------------------------------------------------------------------------------------

class Unencodable(Exception):
    pass


_type, _isinstance, _len, _format, _repr = type, isinstance, len, format, repr
_int, _float, _str, _bytes, _bool = int, float, str, bytes, bool
_list, _tuple, _dict, _set, _frozenset, _bytearray, _complex = list, tuple, dict, set, frozenset, bytearray, complex
_NoneType = type(None)
_list_iter, _tuple_iter, _set_iter, _fset_iter = list.__iter__, tuple.__iter__, set.__iter__, frozenset.__iter__
_dict_items = dict.items
_int_copy, _float_copy, _str_copy, _bytes_copy = int.__int__, float.__float__, str.__str__, bytes.__bytes__
_GENERATOR_TYPES = (type((lambda: (yield))()), type(map(None, ())), type(zip()), type(filter(None, ())),
                    type(reversed([])), type(iter(range(0))), type(enumerate(())))


def encode(v, depth=0):
    """Encode a value as JSON-ready data, accepting only exact builtin types.

    Subclasses of builtin types are converted to their base type through the base type's
    own C-level accessors, so a subclass with a rigged ``__eq__`` is compared as its plain
    content. Anything else raises :class:`Unencodable`.
    """
    t = _type(v)
    if t is _str or t is _bool or t is _float or v is None:
        return v
    if t is _int:
        return v if -_BIG < v < _BIG else {"i": _format(v, "x")}
    if depth > _MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    d = depth + 1
    if t is _list:
        return {"l": [encode(x, d) for x in v]}
    if t is _tuple:
        return {"t": [encode(x, d) for x in v]}
    if t is _dict:
        return {"d": [[encode(k, d), encode(x, d)] for k, x in v.items()]}
    if t is _set:
        return {"s": [encode(x, d) for x in v]}
    if t is _frozenset:
        return {"f": [encode(x, d) for x in v]}
    if t is _bytes:
        return {"b": v.hex()}
    if t is _bytearray:
        return {"y": v.hex()}
    if t is _complex:
        return {"c": [v.real, v.imag]}
    # subclasses of plain types: take the plain content (namedtuple, Counter, IntEnum, ...)
    if _isinstance(v, _bool):
        return _bool(_int_copy(v))
    if _isinstance(v, _int):
        return encode(_int_copy(v), depth)
    if _isinstance(v, _float):
        return _float_copy(v)
    if _isinstance(v, _str):
        return _str_copy(v)
    if _isinstance(v, _bytes):
        return {"b": _bytes_copy(v).hex()}
    if _isinstance(v, _tuple):
        return {"t": [encode(x, d) for x in _tuple_iter(v)]}
    if _isinstance(v, _list):
        return {"l": [encode(x, d) for x in _list_iter(v)]}
    if _isinstance(v, _dict):
        return {"d": [[encode(k, d), encode(x, d)] for k, x in _dict_items(v)]}
    if _isinstance(v, _frozenset):
        return {"f": [encode(x, d) for x in _fset_iter(v)]}
    if _isinstance(v, _set):
        return {"s": [encode(x, d) for x in _set_iter(v)]}
    mod = getattr(t, "__module__", "")
    if mod == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        return encode(v.item(), depth)
    raise Unencodable(t.__name__)


# --------------------------------------------------------------------------------------
# Child side: runs the candidate. Everything here executes after fork.
# --------------------------------------------------------------------------------------

_CLEAN_BUILTINS = dict(builtins.__dict__)
_os_write, _os_exit = os.write, os._exit


def _no_default(o):
    raise TypeError("not a JSON value")


_c_encode = c_make_encoder(None, _no_default, encode_basestring_ascii, None, ": ", ", ", False, False, True)


def _dumps(obj) -> str:
    """JSON through the C encoder only (no Python-level code a candidate could patch)."""
    return "".join(_c_encode(obj, 0))
_MSG_LIMIT = 600
MAX_RECORD = 1 << 20
"""Cap on one encoded value record: a larger return value is reported as too large (the
judge never decodes it)."""


def _emit(record) -> None:
    try:
        data = (_dumps(record) + "\n").encode("utf-8", "surrogatepass")
    except Exception:  # noqa: BLE001
        data = b'["u",-1,"unencodable record",""]\n'
    if _len(data) > MAX_RECORD and record[0] in ("v", "r"):
        data = (_dumps(["u", record[1], "value too large", f"{_len(data)} bytes encoded"]) + "\n").encode()
    view = memoryview(data)
    while view:
        n = _os_write(RESULT_FD, view)
        view = view[n:]


def _text(x, limit=_MSG_LIMIT) -> str:
    try:
        s = x if _type(x) is _str else _str(x)
    except BaseException:  # noqa: BLE001 - candidate-defined __str__
        s = "<unprintable>"
    return s if _len(s) <= limit else s[:limit] + "..."


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
    """Execute the compiled candidate as ``__main__``; return its globals or exit."""
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    module.__file__ = "solution.py"  # as for ``python solution.py``
    sys.modules["__main__"] = module
    g = module.__dict__
    try:
        exec(compiled, g)
    except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, ... all count
        _flush()
        _emit(["l", _exc_name(e), _text(e), _format_exc(e, sources)])
        _os_exit(0)
    return g


_TEST_BUILTINS = dict(_CLEAN_BUILTINS)
"""Builtins seen by test code: a snapshot taken before any candidate ran."""

_entries: list = []
_sources: dict = {}


def _builtin_base(e) -> str:
    """The nearest builtin exception class of ``e`` (the judge re-raises that one)."""
    try:
        for cls in _type(e).__mro__:
            if cls.__module__ == "builtins":
                return cls.__name__
    except BaseException:  # noqa: BLE001
        pass
    return "Exception"


def _record_site(k, thunk, quiet):
    """Evaluate one candidate-dependent expression of a replayed test and record its value.

    The child only reports values: the judge runs the test itself on them (see
    ``judge.prepare_replay``), so nothing recorded here can be a verdict.
    """
    try:
        v = thunk()
        if _isinstance(v, _GENERATOR_TYPES):  # recorded as its items; the test iterates them
            v = _list(v)
            iterate = True
        else:
            iterate = False
    except BaseException as e:  # noqa: BLE001
        _entries.append([k, "x", _exc_name(e), _text(e), _format_exc(e, _sources), _builtin_base(e)])
        if quiet:  # inside an assert: the judge decides whether this value was needed
            return None
        raise
    try:
        _entries.append([k, "v", encode(v)])
    except (Unencodable, RecursionError) as u:
        _entries.append([k, "u", _text(u), _safe_repr(v)])
    return iter(v) if iterate else v


def _site(k, thunk):
    return _record_site(k, thunk, False)


def _quiet_site(k, thunk):
    return _record_site(k, thunk, True)


def _assert_group(j, thunk):
    _entries.append(["a", j])
    try:
        thunk()
    finally:
        _entries.append(["z", j])


_TEST_BUILTINS.update(__execrl_site__=_site, __execrl_quiet__=_quiet_site, __execrl_assert__=_assert_group)


def _run_assert(spec: dict, code: str, compiled, token: str) -> None:
    global _entries
    sources = _sources
    sources.update({"<solution>": code, "<test>": None, "<setup>": None})
    g = _load_program(compiled, sources)
    setup = spec.get("setup_code")
    if setup is not None:
        sources["<setup>"] = spec["setup"]
        try:
            exec(setup, g)
        except BaseException as e:  # noqa: BLE001
            _emit(["l", _exc_name(e), _text(e), _format_exc(e, sources)])
            _os_exit(0)
    tests = spec["compiled"]
    ns = dict(g)
    ns["__builtins__"] = _TEST_BUILTINS
    for i, (kind, codes, srcs) in enumerate(tests):
        sources["<test>"] = srcs
        if kind == "r":
            _entries = []
            try:
                exec(codes, dict(ns))
                exc = None
            except BaseException as e:  # noqa: BLE001
                exc = [_exc_name(e), _text(e), _format_exc(e, sources)]
            _emit(["r", i, _entries, exc])
            _entries = []
            continue
        try:
            values = []
            for c, materialize in codes:
                v = eval(c, ns)
                if materialize and _isinstance(v, _GENERATOR_TYPES):
                    v = _list(v)
                values.append(v)
            try:
                enc = [encode(v) for v in values]
            except Unencodable as u:
                bad = next((v for v in values if not _is_plain(v)), None)
                _emit(["u", i, _text(u), _safe_repr(bad)])
                continue
            _emit(["v", i, enc])
        except BaseException as e:  # noqa: BLE001
            _emit(["e", i, _exc_name(e), _text(e), _format_exc(e, sources)])
    _flush()
    _emit(["d", _len(tests), token])


def _is_plain(v) -> bool:
    try:
        encode(v)
        return True
    except BaseException:  # noqa: BLE001
        return False


def _safe_repr(v) -> str:
    try:
        return _text(_repr(v), 300)
    except BaseException:  # noqa: BLE001
        return "<unrepresentable>"


def _run_call(spec: dict, code: str, compiled, token: str) -> None:
    sources = {"<solution>": code}
    g = _load_program(compiled, sources)
    name = spec["entry_point"]
    sol = g.get("Solution")
    use_class = _isinstance(sol, _type) and hasattr(sol, name)
    if not use_class and not callable(g.get(name)):
        _emit(["l", "NameError", f"entry point {name!r} is not defined", f"NameError: name {name!r} is not defined"])
        _os_exit(0)
    # The worker decoded every test's arguments before forking: each test has its own
    # objects, so a function that mutates its arguments cannot affect later tests.
    for i, args in enumerate(spec["decoded_args"]):
        try:
            fn = getattr(sol(), name) if use_class else g[name]
            v = fn(*args)
            if _isinstance(v, _GENERATOR_TYPES):
                v = _list(v)
            try:
                enc = encode(v)
            except Unencodable as u:
                _emit(["u", i, _text(u), _safe_repr(v)])
                continue
            _emit(["v", i, [enc]])
        except BaseException as e:  # noqa: BLE001
            _emit(["e", i, _exc_name(e), _text(e), _format_exc(e, sources)])
    _flush()
    _emit(["d", _len(spec["decoded_args"]), token])


def _run_stdio(code: str, compiled, token: str) -> None:
    sources = {"<solution>": code}
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    module.__file__ = "solution.py"
    sys.modules["__main__"] = module
    try:
        exec(compiled, module.__dict__)
    except SystemExit as e:
        if e.code not in (None, 0):
            _flush()
            _emit(["l", "SystemExit", _text(e.code), f"SystemExit: {_text(e.code)}"])
            _os_exit(0)
    except BaseException as e:  # noqa: BLE001
        _flush()
        _emit(["l", _exc_name(e), _text(e), _format_exc(e, sources)])
        _os_exit(0)
    _exit_as_python_does()
    _flush()
    _emit(["d", 0, token])


def _exit_as_python_does() -> None:
    """What the interpreter does after ``__main__`` ends: wait for non-daemon threads (a
    common pattern runs ``main`` in a thread with a larger stack), then run ``atexit``
    handlers (fast-I/O classes flush their buffer there). Their output is the program's."""
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


# --------------------------------------------------------------------------------------
# Worker side: fork, supervise, sweep, clean up
# --------------------------------------------------------------------------------------

_CMD = struct.Struct("=ddq")
"""controller -> forker: run the job (this many bytes in the job file), with this wall-clock
limit and this CPU-time limit for all the run's processes together (seconds)"""
_DONE = struct.Struct("=iB?ddqqd")
"""forker -> controller: wait status of the run's first process, why it was killed (KILL_*),
whether some process could not be reaped in time, the user and system CPU of every process
of the run together, maxrss, minflt, wall"""
KILL_NONE, KILL_WALL, KILL_CPU = 0, 1, 2
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class Worker:
    """The worker's controller: talks to the executor, compiles, prepares runs, reads results.

    It never forks a candidate itself. Right after start-up it forks a *forker* (see
    ``_forker``), which then forks one child per run and does nothing else. A fork
    write-protects every page of the forking process, and each page that process writes
    afterwards costs a fault (several microseconds on VMs): the controller's per-job work
    (JSON, compiling, replies) would pay that on ~200 pages per candidate, the forker's tight
    loop touches a few dozen.
    """

    def __init__(self, cfg: dict):
        self.cfg = cfg
        # what the self-test must find inside the sandbox, as seen from outside it
        # (as the interpreter names them: a linked virtualenv must be visible under its link)
        own = _harness_dirs()
        self.import_paths = sorted({os.path.normpath(os.path.abspath(p)) for p in sys.path if p and os.path.isdir(p)
                                    and not any(_within(os.path.realpath(p), o) for o in own)})
        self.third_party = _third_party_probe()
        self.report = setup_isolation(cfg)
        self.mode = self.report["mode"]
        self.private_root = self.report["private_root"]
        self.uid = self.report["uid"] if self.mode == "root" and cfg.get("drop_privileges", True) else None
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        # Reused capture files: the child writes without ever blocking, the worker reads
        # them after the child is gone; RLIMIT_FSIZE bounds their size. The job file carries
        # what the child runs (it is forked from the forker, which never sees the job).
        self.res_fd = os.memfd_create("records", os.MFD_CLOEXEC)
        self.out_fd = os.memfd_create("stdout", os.MFD_CLOEXEC)
        self.err_fd = os.memfd_create("stderr", os.MFD_CLOEXEC)
        self.in_fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
        self.job_fd = os.memfd_create("job", os.MFD_CLOEXEC)
        self.cache: dict[str, dict] = {}
        self.cache_size = int(cfg.get("cache_size", 256))
        self.tid = os.getpid()
        self.nproc_base = 0 if self.uid is not None else _count_own_processes()
        self.hardened_root = self.uid is not None and self.private_root
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # The forker is the subreaper of the runs; the controller is one too, so that
        # whatever a dead forker leaves behind is reparented here and swept.
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.children_fd = os.open(f"/proc/self/task/{self.tid}/children", os.O_RDONLY | os.O_CLOEXEC)
        self.forker_pid = self.cmd_fd = self.done_fd = None
        self.scratch_binds = self.report.pop("scratch_binds")
        self.tmpfs_mb = int(cfg.get("tmpfs_mb", 256))
        self.seccomp = bytes.fromhex(cfg["seccomp"]) if cfg.get("seccomp") else None
        self.report["seccomp"] = self.seccomp is not None
        self.empty_scratch = None
        if self.private_root:
            self.workdir = "/tmp/run"
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.workdir, "TMPDIR": self.workdir,
                   "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "USER": "sandbox",
                   "PYTHONHASHSEED": str(cfg.get("hash_seed", 0)),
                   "PYTHONIOENCODING": "utf-8"}
            os.environ.clear()
            os.environ.update(env)
            self.empty_scratch = self._scratch_state()
        else:
            self.workdir = None

    # ---- the forker ----------------------------------------------------------------
    def start_forker(self, close: tuple[int, ...] = ()) -> None:
        """Fork the forker; call it once, after the controller's start-up is complete.

        With namespaces, the forker is PID 1 of a PID namespace of its own: if it dies (with
        the controller, or killed), the kernel kills every process of every run at once, even
        when nobody is left to sweep (the executor killed outright)."""
        if self.uid is None:
            self.nproc_base += 1  # RLIMIT_NPROC counts the forker too (same uid as the runs)
        self.pid_ns = False
        if self.private_root and self.mode in ("root", "userns"):
            own_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _check(_libc.unshare(CLONE_NEWPID), "unshare(pid)")
                self.pid_ns = self._fork_forker(close)
            except OSError as e:
                self.report["notes"].append(f"no PID namespace for the runs ({e})")
            if not self.pid_ns:  # back to forking into our own namespace
                _libc.setns(own_ns, CLONE_NEWPID)
            os.close(own_ns)
            if self.pid_ns:
                self.report["pid_namespace"] = True
                return
        self._fork_forker(close)
        self.report["pid_namespace"] = False

    def _fork_forker(self, close: tuple[int, ...]) -> bool:
        """Fork the forker; whether it runs in a PID namespace of its own (it says so)."""
        cmd_r, cmd_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                for fd in (cmd_w, done_r, *close):
                    os.close(fd)
                _forker(self, cmd_r, done_w)
            finally:
                _os_exit(0)
        os.close(cmd_r)
        os.close(done_w)
        hello = os.read(done_r, 1)  # the forker's set-up is done
        if hello not in (b"P", b"N"):
            os.close(cmd_w)
            os.close(done_r)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            return False
        self.forker_pid, self.cmd_fd, self.done_fd = pid, cmd_w, done_r
        return hello == b"P"

    def stop_forker(self) -> None:
        if self.forker_pid is not None:
            try:
                os.kill(self.forker_pid, signal.SIGKILL)
            except OSError:
                pass
            self.sweep()
            self.forker_pid = None

    # ---- killing and reaping ------------------------------------------------------------
    def _children(self) -> list[int]:
        try:
            return [int(p) for p in os.pread(self.children_fd, 1 << 16, 0).split()]
        except OSError:
            return []

    def sweep(self, first: int | None = None, grace: float = REAP_GRACE_S) -> tuple:
        """Kill and reap every child of this process (the runs' subreaper: whatever a run
        started, however detached, is reparented here when its parent dies).

        Every wait has a deadline. Returns (wait status of ``first``, user CPU, system CPU,
        max RSS, minor faults, stuck): the CPU of every process reaped here, each of which
        includes the descendants it reaped itself, so the sum is the run's CPU time.
        """
        utime = stime = 0.0
        status, maxrss, minflt = 0, 0, 0
        deadline = time.monotonic() + grace
        while True:
            while True:  # reap whatever has exited (usually just the run's process: done)
                try:
                    pid, st, ru = os.wait4(-1, os.WNOHANG)
                except ChildProcessError:
                    return status, utime, stime, maxrss, minflt, False
                if pid == 0:
                    break
                utime += ru.ru_utime
                stime += ru.ru_stime
                minflt += ru.ru_minflt
                maxrss = max(maxrss, ru.ru_maxrss)
                if pid == first:
                    status = st
            for p in self._children():  # still alive: kill them all, then reap again
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            if time.monotonic() > deadline:
                return status, utime, stime, maxrss, minflt, True
            select.select([], [], [], 0.0005)

    def run_cpu(self) -> float:
        """CPU seconds used so far by every live process of the run (and what they reaped),
        found by walking down from this process's children, thread by thread."""
        total, seen, stack = 0, set(), self._children()
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                        stack.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError, IndexError):
                continue
        return total / _CLK_TCK

    def supervise(self, pidfd: int, deadline: float, cpu_limit: float) -> int:
        """Block until the run's first process exits, the wall deadline passes, or (checked
        every tick once the run lasts that long) its processes together used ``cpu_limit``."""
        tick = min(1.0, max(0.05, cpu_limit / 10))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return KILL_WALL
            if select.select([pidfd], [], [], min(remaining, tick))[0]:
                return KILL_NONE
            if remaining > tick and self.run_cpu() >= cpu_limit:
                return KILL_CPU

    # ---- problem specs -------------------------------------------------------------
    def prepare(self, spec: dict) -> dict:
        """Compile a problem's tests once; ``child`` is what each of its runs receives."""
        spec = dict(spec)
        child: dict = {"mode": spec["mode"]}
        if spec["mode"] == "assert":
            child["setup"] = child["setup_code"] = None
            if spec.get("setup"):
                child["setup"] = spec["setup"]
                try:
                    child["setup_code"] = compile(spec["setup"], "<setup>", "exec", dont_inherit=True)
                except (SyntaxError, ValueError) as e:  # a broken dataset row: every candidate errors
                    bad = f"raise SyntaxError({('invalid setup code: ' + str(e))!r})"
                    child["setup"] = bad
                    child["setup_code"] = compile(bad, "<setup>", "exec")
            compiled = []
            for t in spec["tests"]:
                try:
                    if t["kind"] == "p":
                        codes = tuple((compile(src, "<test>", "eval", dont_inherit=True), mat)
                                      for src, mat in zip(t["probes"], t["materialize"]))
                        compiled.append(("p", codes, [f"({', '.join(t['probes'])})"]))
                    else:
                        compiled.append(("r", compile(t["source"], "<test>", "exec", dont_inherit=True),
                                         t["source"].splitlines()))
                except SyntaxError as e:
                    bad = f"raise SyntaxError({('invalid test: ' + str(e))!r})"
                    compiled.append(("r", compile(bad, "<test>", "exec"), [bad]))
            child["compiled"] = tuple(compiled)
        elif spec["mode"] == "call":
            child["entry_point"] = spec["entry_point"]
            child["decoded_args"] = [json.loads(a) for a in spec["args"]]
        spec["child"] = marshal.dumps(child)
        return spec

    def lookup(self, key: str, spec: dict | None):
        cached = self.cache.pop(key, None)
        if cached is None:
            if spec is None:
                return None
            cached = self.prepare(spec)
        self.cache[key] = cached
        while len(self.cache) > self.cache_size:
            self.cache.pop(next(iter(self.cache)))
        return cached

    # ---- one job -------------------------------------------------------------------
    def job(self, msg: dict) -> tuple[dict, list[bytes]]:
        spec = self.lookup(msg["key"], msg.get("spec"))
        if spec is None:
            return {"need_spec": True}, []
        code, lim = msg["code"], msg["limits"]
        runs, blobs = [], []
        header: dict = {"runs": runs}
        compiled = crec = None
        if len(code) <= COMPILE_IN_WORKER_MAX:
            compiled, crec = compile_candidate(code)
        if crec is not None:  # does not compile: nothing to run
            runs.append({"exit": None, "signal": None, "cpu": 0.0, "wall": 0.0, "timeout": False,
                         "wall_killed": False, "overflow": False, "token": "", "minflt": 0})
            blobs += [(json.dumps(crec) + "\n").encode(), b"", b""]
        elif spec["mode"] == "stdio":
            # One run per test, each bounded by its CPU time, and a wall-clock backstop for the
            # candidate that grows only with the CPU time its runs used: a program that sleeps
            # or blocks holds a worker for at most 3 per-run limits over all its tests, one that
            # computes may take 3 times its CPU time (a loaded machine), and never more than
            # limits.candidate_wall (the same formula), which the executor waits for.
            wall_run = float(lim["wall"])
            explicit = lim["total_wall"]
            start = time.monotonic()
            cpu_used = 0.0
            reply_bytes = 0
            for k, inp in enumerate(spec["inputs"]):
                budget = float(explicit) if explicit is not None else max(3 * wall_run, 3 * cpu_used + wall_run)
                remaining = start + budget - time.monotonic()
                if remaining <= 0:
                    header["total_wall_exceeded"] = True
                    break
                if reply_bytes > MAX_REPLY_BYTES:
                    header["reply_limit_exceeded"] = True
                    break
                # a run started on the CPU-scaled budget is bounded by its own limits only
                scaled = explicit is None and 3 * cpu_used + wall_run > 3 * wall_run
                info, data = self.run_one(spec, code, compiled, lim, inp, wall_cap=None if scaled else remaining)
                if k:  # only the first run's stderr is reported
                    data[2] = b""
                reply_bytes += sum(len(b) for b in data)
                cpu_used += info["cpu"]
                runs.append(info)
                blobs += data
                if info["timeout"] or data[0].startswith(b'["c"'):
                    if info["wall_killed"] and info["wall_limit"] < float(lim["wall"]):
                        header["total_wall_exceeded"] = True
                    break
        else:
            info, data = self.run_one(spec, code, compiled, lim, None)
            runs.append(info)
            blobs += data
        for k, info in enumerate(runs):
            info["records_len"], info["stdout_len"], info["stderr_len"] = (len(b) for b in blobs[3 * k: 3 * k + 3])
        return header, blobs

    def run_one(self, spec, code, compiled, lim, stdin_text, wall_cap: float | None = None):
        token = os.urandom(12).hex()
        workdir = self.workdir
        if workdir is None:
            import tempfile
            workdir = tempfile.mkdtemp(prefix="execrl-run-")
        else:
            os.mkdir(workdir, 0o700)
        if self.uid is not None:
            os.chown(workdir, self.uid, self.uid)
        res_fd, out_fd, err_fd = self.res_fd, self.out_fd, self.err_fd
        for fd in (res_fd, out_fd, err_fd):  # emptied after the previous run was read
            os.lseek(fd, 0, os.SEEK_SET)
        if stdin_text is not None:
            os.ftruncate(self.in_fd, 0)
            _pwrite_all(self.in_fd, stdin_text.encode("utf-8", "surrogateescape"))
            os.lseek(self.in_fd, 0, os.SEEK_SET)
        timeout = float(lim["timeout_s"])
        wall = float(lim["wall"])
        if wall_cap is not None:
            wall = min(wall, wall_cap)
        mb = 1 << 20
        nproc = int(lim["max_processes"]) + self.nproc_base
        soft_cpu = int(timeout) + 1
        # Hard limits are set in the child: neither worker process lowers its own (it may
        # lack CAP_SYS_RESOURCE to raise them again for a later job). The records file is
        # bounded too: what one run reports cannot exceed MAX_RECORD_BYTES (plus one record).
        fsize = max(int(lim["file_size_mb"]) * mb, MAX_RECORD_BYTES)
        rlimits = ((resource.RLIMIT_AS, (int(lim["memory_mb"]) * mb,) * 2),
                   (resource.RLIMIT_NPROC, (nproc, nproc)),
                   (resource.RLIMIT_FSIZE, (fsize, fsize)),
                   (resource.RLIMIT_NOFILE, (int(lim["max_open_files"]),) * 2),
                   (resource.RLIMIT_CPU, (soft_cpu, soft_cpu + 1)))
        job = marshal.dumps((spec["child"], code, compiled, rlimits, token, workdir, stdin_text is not None,
                             timeout))
        _pwrite_all(self.job_fd, job)
        os.ftruncate(self.job_fd, len(job))  # no tail of an earlier, longer job
        try:
            os.write(self.cmd_fd, _CMD.pack(wall, timeout, len(job)))
            # the forker answers within the wall limit plus its reaping grace; beyond, it is stuck
            if not select.select([self.done_fd], [], [], wall + REAP_GRACE_S + 5)[0]:
                raise EOFError
            done = _read_exact(self.done_fd, _DONE.size)
        except (OSError, EOFError):
            self.stop_forker()
            raise RuntimeError("the sandbox forker died or stopped answering") from None
        status, reason, stuck, utime, stime, maxrss, minflt, wall_used = _DONE.unpack(done)
        if stuck:
            raise RuntimeError("a sandboxed process could not be reaped")
        cap = int(lim["max_output_bytes"])
        records, rec_over = _read_memfd(res_fd, MAX_RECORD_BYTES, truncate=True)
        out, out_over = _read_memfd(out_fd, cap, truncate=True)
        err, err_over = _read_memfd(err_fd, cap, truncate=True)
        self.cleanup(workdir)
        cpu = utime + stime
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        hard_cpu = int(timeout) + 2
        timed_out = reason != KILL_NONE or sig in (signal.SIGPROF, signal.SIGXCPU) or (
            sig == signal.SIGKILL and cpu >= hard_cpu - 0.05)
        info = {
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": sig, "cpu": cpu, "wall": wall_used, "timeout": bool(timed_out),
            "wall_killed": reason == KILL_WALL, "cpu_killed": reason == KILL_CPU, "wall_limit": wall,
            "overflow": rec_over, "token": token, "maxrss_kb": maxrss, "minflt": minflt,
            "stdout_truncated": out_over, "stderr_truncated": err_over,
        }
        return info, [records, out, err]

    # ---- in the child ----------------------------------------------------------------
    def child_main(self, job_size: int) -> None:
        """Entry point of a freshly forked child: read the job, set up, run; never returns."""
        try:
            job = os.pread(self.job_fd, job_size, 0)
            if len(job) != job_size:  # a large job: pread returns at most ~2 GiB at once
                job, _ = _read_memfd(self.job_fd, job_size)
            spec_blob, code, compiled, rlimits, token, workdir, use_stdin, timeout = marshal.loads(job)
            del job
            self._child(marshal.loads(spec_blob), code, compiled, rlimits, token, workdir,
                        self.in_fd if use_stdin else self.devnull, timeout)
        except BaseException as e:  # noqa: BLE001
            try:
                _emit(["l", "SandboxError", _text(e), f"SandboxError: {_text(e)}"])
            except BaseException:  # noqa: BLE001
                pass
        finally:
            _os_exit(0)

    def _child(self, spec, code, compiled, rlimits, token, workdir, stdin_fd, timeout):
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(self.out_fd, 1)
        os.dup2(self.err_fd, 2)
        os.dup2(self.res_fd, RESULT_FD, inheritable=False)
        os.closerange(3, RESULT_FD)
        os.closerange(RESULT_FD + 1, 1 << 20)
        os.chdir(workdir)
        setr = resource.setrlimit
        for which, value in rlimits:
            setr(which, value)
        if self.uid is not None:
            os.setgroups([])
            os.setresgid(self.uid, self.uid, self.uid)
            os.setresuid(self.uid, self.uid, self.uid)
        if not self.hardened_root:
            # Without a nosuid private root and a per-worker uid (swept by the executor if
            # this worker dies), fall back to the kernel's own guards.
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != self.tid:
                _os_exit(0)
        if self.workdir is None:
            os.environ["HOME"] = workdir
            os.environ["TMPDIR"] = workdir
        if "multiprocessing" in code or "ProcessPool" in code:
            _write_program_file(code)
        signal.setitimer(signal.ITIMER_PROF, timeout)
        if compiled is None:  # too large to compile in the worker
            compiled, crec = compile_candidate(code)
            if crec is not None:
                _emit(crec)
                _os_exit(0)
        mode = spec["mode"]
        if mode == "assert":
            _run_assert(spec, code, compiled, token)
        elif mode == "call":
            _run_call(spec, code, compiled, token)
        else:
            _run_stdio(code, compiled, token)

    # ---- after a run -----------------------------------------------------------------
    @staticmethod
    def _scratch_state() -> tuple:
        """Free blocks and inodes of the scratch mounts: back at their empty values exactly
        when nothing the run created is left in them."""
        out = []
        for d in SCRATCH_DIRS:
            st = os.statvfs(d)
            out.append((st.f_bfree, st.f_ffree))
        return tuple(out)

    def cleanup(self, workdir: str) -> None:
        if self.workdir is None:
            _rmtree(workdir)
            return
        try:
            os.rmdir(workdir)
        except OSError:
            pass  # not empty: the fresh mount below discards it
        if self._scratch_state() == self.empty_scratch:
            return
        fresh_scratch(self.tmpfs_mb, self.scratch_binds)
        self.empty_scratch = self._scratch_state()

    # ---- self test -----------------------------------------------------------------
    def self_test(self) -> str | None:
        """Run one probe candidate: it must see every directory of the interpreter's import
        path, import stdlib modules from disk, and find a third-party package."""
        probe = ("import importlib.util, os, collections, math, re, heapq, itertools\n"
                 f"PATHS = {self.import_paths!r}\n"
                 f"THIRD_PARTY = {self.third_party!r}\n"
                 "def f():\n"
                 "    out = []\n"
                 "    hidden = [p for p in PATHS if not os.path.isdir(p)]\n"
                 "    if hidden:\n"
                 "        raise ImportError(f'import path not visible in the sandbox: {hidden}')\n"
                 "    for name in ('json', 'statistics', 'fractions', 'decimal', 'string', 'heapq', *THIRD_PARTY):\n"
                 "        spec = importlib.util.find_spec(name)\n"
                 "        if spec is None:\n"
                 "            raise ModuleNotFoundError(f'{name} is not importable in the sandbox')\n"
                 "        if spec.origin not in ('built-in', 'frozen'):\n"
                 "            open(spec.origin, 'rb').close()\n"
                 "        out.append(name)\n"
                 "    import statistics, fractions\n"
                 "    return len(out) - len(THIRD_PARTY) + int(statistics.mean([1, 2, 3]))\n")
        spec = {"mode": "assert", "tests": [{"kind": "p", "probes": ["f()"], "materialize": [False]}]}
        lim = {"timeout_s": 10, "wall": 32, "memory_mb": 1024, "file_size_mb": 1, "max_open_files": 64,
               "max_processes": 16, "max_output_bytes": 65536}
        compiled, _ = compile_candidate(probe)
        info, (records, _out, err) = self.run_one(self.prepare(spec), probe, compiled, lim, None)
        lines = records.decode(errors="replace").splitlines()
        if len(lines) == 2 and lines[0].startswith('["v", 0, [8]]'):
            return None
        return f"sandbox self-test failed: {records[:800]!r} {err[:500]!r} {info}"


def _third_party_probe() -> list[str]:
    """One installed third-party package (numpy when present), to check in the self-test
    that site-packages are importable inside the sandbox."""
    import importlib.util
    if importlib.util.find_spec("numpy") is not None:
        return ["numpy"]
    for d in sys.path:
        if not d.endswith(("site-packages", "dist-packages")) or not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            package = os.path.join(d, name, "__init__.py")
            if name.isidentifier() and not name.startswith("_") and os.path.isfile(package):
                return [name]
    return []


def _forker(worker: Worker, cmd_fd: int, done_fd: int) -> None:
    """The forker's loop: one child per command, supervised, swept, reported.

    Kept minimal on purpose (see ``Worker``): no JSON, no job data, a handful of objects.
    """
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    in_pid_ns = os.getpid() == 1
    if in_pid_ns:
        # A /proc of the new namespace, so that the runs' PIDs in /proc are those os.getpid()
        # returns, and the forker reads its children there; mounted in a mount namespace of
        # the forker's own, a slave of the controller's (fresh scratch mounts still arrive).
        try:
            _check(_libc.unshare(CLONE_NEWNS), "unshare(mount)")
            _mount(None, "/", None, MS_REC | MS_SLAVE)
            try:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
            except OSError:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            return  # the controller sees no greeting and forks a forker without the namespace
    elif os.getppid() != worker.tid:  # the controller died before PR_SET_PDEATHSIG
        return
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # not inherited across fork
    worker.tid = os.getpid()
    worker.children_fd = os.open("/proc/thread-self/children", os.O_RDONLY | os.O_CLOEXEC)
    os.write(done_fd, b"P" if in_pid_ns else b"N")
    if worker.seccomp is not None:
        install_seccomp(worker.seccomp, worker.cfg.get("seccomp_syscall"))  # once, here: every run inherits it
    read, write, fork, monotonic = os.read, os.write, os.fork, time.monotonic
    killpg = os.killpg
    cmd_size, unpack_cmd, pack_done = _CMD.size, _CMD.unpack, _DONE.pack
    while True:
        cmd = read(cmd_fd, cmd_size)
        if len(cmd) != cmd_size:
            return  # the controller is gone
        wall, cpu_limit, job_size = unpack_cmd(cmd)
        t0 = monotonic()
        pid = fork()
        if pid == 0:
            worker.child_main(job_size)
        # Block in one select() until the child exits or the wall deadline passes: the less
        # the forker touches while the child lives, the fewer copy-on-write faults.
        pidfd = os.pidfd_open(pid)
        reason = worker.supervise(pidfd, t0 + wall, cpu_limit)
        wall_used = monotonic() - t0
        os.close(pidfd)
        try:
            killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        status, utime, stime, maxrss, minflt, stuck = worker.sweep(first=pid)
        write(done_fd, pack_done(status, reason, stuck, utime, stime, maxrss, minflt, wall_used))


def _pwrite_all(fd: int, data: bytes) -> None:
    off = 0
    while off < len(data):
        off += os.pwrite(fd, data[off:off + (1 << 20)], off)


# --------------------------------------------------------------------------------------
# Warm-up (in the controller, before the forker is forked)
# --------------------------------------------------------------------------------------

_WARM_PROGRAM = ("import math\n"
                 "class Solution:\n"
                 "    def f(self, x, y=0):\n"
                 "        return f(x, y)\n"
                 "def f(x, y=0):\n"
                 "    if x < 0:\n"
                 "        raise ValueError('negative')\n"
                 "    print(x, end='')\n"
                 "    return [x + y, (x, 'a', b'b'), {'k': x * 1.5, 2: {x}}, None, True, math.pi, 1 << 70]\n")
_WARM_SPEC = {"mode": "assert", "setup": "Y = 1",
              "tests": [{"kind": "p", "probes": ["f(1)"], "materialize": [False]},
                        {"kind": "p", "probes": ["f(2, Y)", "len(f(3))"], "materialize": [False, False]},
                        {"kind": "p", "probes": ["f(-1)"], "materialize": [False]},
                        {"kind": "p", "probes": ["map(abs, [1, -2])"], "materialize": [True]},
                        {"kind": "r", "source": ("x = __execrl_site__(0, lambda: f(4))\n__execrl_assert__"
                                                 "(0, lambda: (__execrl_quiet__(1, lambda: f(x[0])),))")}]}


def warm_up(worker: Worker, rounds: int = 12) -> None:
    """Run the child-side harness on a benign program a few times, here.

    Every candidate is forked from this process's memory. Running the harness once here
    does its one-time work (quickening its bytecode, filling the type and method caches,
    creating the allocator pools it needs) before the fork instead of again in every child,
    where each page it writes costs a copy-on-write fault. Results go to /dev/null.
    """
    assert_spec = marshal.loads(worker.prepare(_WARM_SPEC)["child"])
    call_spec = marshal.loads(worker.prepare({"mode": "call", "entry_point": "f",
                                              "args": ["[1]", "[2, 3]", "[-1]"]})["child"])
    saved = {name: getattr(sys, name) for name in ("stdout", "stderr")}
    saved_main = sys.modules.get("__main__")
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, RESULT_FD, inheritable=False)
    try:
        for _ in range(rounds):
            compiled, _ = compile_candidate(_WARM_PROGRAM)
            _run_assert(assert_spec, _WARM_PROGRAM, compiled, "0" * 24)
            _run_call(call_spec, _WARM_PROGRAM, compiled, "0" * 24)
            _run_stdio(_WARM_PROGRAM, compiled, "0" * 24)
            marshal.loads(marshal.dumps((assert_spec, _WARM_PROGRAM, compiled)))
    finally:
        _flush()  # nothing of the warm-up may stay buffered for a child to inherit
        os.close(RESULT_FD)
        os.close(sink)
        sys.modules["__main__"] = saved_main
        for name, stream in saved.items():
            setattr(sys, name, stream)



def _read_memfd(fd: int, cap: int, truncate: bool = False) -> tuple[bytes, bool]:
    """Up to ``cap`` bytes of the file, and whether it held more; optionally empty it then
    (a later run must never see an earlier run's output)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b"", False
    n = min(size, cap)
    parts, off = [], 0
    while off < n:
        chunk = os.pread(fd, min(n - off, 1 << 20), off)
        if not chunk:
            break
        parts.append(chunk)
        off += len(chunk)
    if truncate:
        os.ftruncate(fd, 0)
    return b"".join(parts), size > cap


def _rmtree(path: str, max_depth: int = 64) -> None:
    """Remove a run's temp dir (no private root) however deep it goes: iterative, relative
    to directory fds (no PATH_MAX), and subtrees deeper than ``max_depth`` are first moved up
    to the top directory (so open fds stay bounded)."""
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    frames = [(top, os.listdir(top), None)]  # (dir fd, names left, its name in the parent)
    cuts = 0
    while frames:
        dfd, names, own_name = frames[-1]
        if not names:
            os.close(dfd)
            frames.pop()
            if frames:
                try:
                    os.rmdir(own_name, dir_fd=frames[-1][0])
                except OSError:
                    pass
            continue
        name = names.pop()
        try:
            os.unlink(name, dir_fd=dfd)
            continue
        except OSError:
            pass
        try:
            os.rmdir(name, dir_fd=dfd)
            continue
        except OSError:
            pass
        if len(frames) >= max_depth:
            cuts += 1
            try:
                os.rename(name, f".execrl-cut-{cuts}", src_dir_fd=dfd, dst_dir_fd=top)
                frames[0][1].append(f".execrl-cut-{cuts}")
            except OSError:
                pass
            continue
        try:
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            os.chmod(sub, 0o700)
            frames.append((sub, os.listdir(sub), name))
        except OSError:
            continue
    try:
        os.rmdir(path)
    except OSError:
        pass


def _count_own_processes() -> int:
    uid = os.getuid()
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


# --------------------------------------------------------------------------------------
# Main loop
# --------------------------------------------------------------------------------------

def _read_exact(fd: int, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _send(fd: int, header: dict, blobs: list[bytes] = ()) -> None:
    head = json.dumps(header).encode()
    data = b"".join([_LEN.pack(len(head)), head, *blobs])
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main() -> None:
    # The configuration came in the boot file, not on the command line: a candidate's
    # sys.argv and /proc/self/cmdline must look like those of a plain program.
    cfg = json.loads(globals().pop("EXECRL_CONFIG"))
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in cfg.get("preload", ()):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - an optional module that is not installed
            pass
    try:
        worker = Worker(cfg)
        warm_up(worker)
        # Freeze before forking the forker: every candidate is forked from its memory, and
        # frozen objects are never written by the GC (no copy-on-write of their pages).
        gc.collect()
        gc.freeze()
        try:  # hand freed start-up memory back: fewer pages to copy-protect at every fork
            _libc.malloc_trim(0)
        except AttributeError:  # not glibc
            pass
        worker.start_forker(close=(in_fd, out_fd))
        problem = worker.self_test()
    except Exception as e:  # noqa: BLE001
        _send(out_fd, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    if problem is not None:
        worker.stop_forker()
        _send(out_fd, {"ready": False, "error": problem, "isolation": worker.report})
        return
    _send(out_fd, {"ready": True, "isolation": worker.report, "pid": os.getpid(), "forker_pid": worker.forker_pid})
    try:
        _serve(worker, in_fd, out_fd)
    finally:
        worker.stop_forker()


def _serve(worker: Worker, in_fd: int, out_fd: int) -> None:
    while True:
        try:
            (n,) = _LEN.unpack(_read_exact(in_fd, 4))
            msg = json.loads(_read_exact(in_fd, n))
        except EOFError:
            return
        if msg.get("op") == "exit":
            return
        try:
            header, blobs = worker.job(msg)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            header, blobs = {"worker_error": f"{type(e).__name__}: {e}"}, []
        _send(out_fd, header, blobs)


if __name__ == "__main__":
    main()
