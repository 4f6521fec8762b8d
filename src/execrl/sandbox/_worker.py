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
from json.scanner import c_make_scanner

import _socket
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
MAX_RECORD_BYTES = 4 << 20
"""Cap on everything one run reports (its result records): beyond it the run is an error."""
MAX_REPLY_BYTES = 32 << 20
"""Cap on what one candidate's reply carries over all its runs (stdio: outputs of every
test); tests that would start beyond it are not run."""
REAP_GRACE_S = 5.0
"""How long the forker may take to kill and reap a run's processes before it reports the
worker as stuck (the executor then replaces the worker and kills everything of its uid)."""

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
# Values exchanged between the judge and the program's process (both sides use this code;
# the judge process runs it too, see _judge.py).
#
# A message is a JSON list. Values are JSON scalars (int below 2**62, float incl. NaN and
# infinities, str, bool, null) or one-key objects:
#   {"l": [...]} list, {"t": [...]} tuple, {"d": [[k, v], ...]} dict, {"s": [...]} set,
#   {"f": [...]} frozenset, {"y": hex} bytearray, {"b": hex} bytes, {"c": [re, im]} complex,
#   {"i": hex} large int, {"r": [start, stop, step]} range, {"C": pairs} Counter,
#   {"O": pairs} OrderedDict, {"D": [factory, pairs]} defaultdict, {"Q": [items, maxlen]}
#   deque, {"F": [num, den]} Fraction, {"M": text} Decimal, {"N": [dtype, value]} a numpy
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
_NoneType = type(None)
_list_iter, _tuple_iter, _set_iter, _fset_iter = list.__iter__, tuple.__iter__, set.__iter__, frozenset.__iter__
_dict_items = dict.items
_dict_keys = dict.keys
_getpid = os.getpid
_RLock = _thread.RLock
_hash = hash
_int_copy, _float_copy, _str_copy, _bytes_copy = int.__int__, float.__float__, str.__str__, bytes.__bytes__
_complex_copy = complex.__complex__
_GENERATOR_TYPES = (type((lambda: (yield))()), type(map(None, ())), type(zip()), type(filter(None, ())),
                    type(reversed([])), type(iter(range(0))), type(enumerate(())))
import collections as _collections  # noqa: E402 - preloaded anyway
import operator as _operator  # noqa: E402
_Counter, _OrderedDict, _defaultdict, _deque = (_collections.Counter, _collections.OrderedDict,
                                               _collections.defaultdict, _collections.deque)
_MUTABLE = (_list, _dict, _set, _bytearray, _Counter, _OrderedDict, _defaultdict, _deque)
_BIG = 1 << 62
_NUMPY_KINDS = frozenset("biufc")
"""numpy scalars sent as themselves: booleans, integers, floats, complex numbers."""
_MAX_DEPTH = 120
_STRUCT_LEN = struct.Struct(">I")
_cpu_time = time.process_time  # (a program that rebinds ``time.process_time`` does not change it)
_getrefcount = sys.getrefcount
MAX_VALUE_BYTES = 1 << 20
"""A result whose encoding is larger stays in the program's process as a handle."""
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
            self.send_text(self.serve_one(reply))

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
        signal.setitimer(signal.ITIMER_PROF, left if left > 0.001 else 0.001)

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
        if t is _Counter or t is _OrderedDict:
            self._number(v, ex)
            return {"C" if t is _Counter else "O": self._keyed([[enc(a, ex, d), enc(b, ex, d)]
                                                                for a, b in _dict_items(v)], v)}
        if t is _defaultdict:
            self._number(v, ex)
            return {"D": [enc(v.default_factory, ex, d),
                          self._keyed([[enc(a, ex, d), enc(b, ex, d)] for a, b in _dict_items(v)], v)]}
        if t is _deque:
            self._number(v, ex)
            return {"Q": [[enc(x, ex, d) for x in v], v.maxlen]}
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
            self._hashed([p[0] for p in pairs], _list(_dict_keys(d)))
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


def _chk_list(v) -> list:
    if _type(v) is not _list:
        raise ProtocolError("expected a list")
    return v


def _chk_str(v) -> str:
    if _type(v) is not _str:
        raise ProtocolError("expected a string")
    return v


# --------------------------------------------------------------------------------------
# Child side: runs the candidate. Everything here executes after fork.
# --------------------------------------------------------------------------------------

_CLEAN_BUILTINS = dict(builtins.__dict__)
_os_write, _os_exit, _os_read = os.write, os._exit, os.read
_MSG_LIMIT = 600


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
    """Execute the compiled candidate as ``__main__``: (its globals, None), or (None, its
    exception as ``[type, message, trace]``) when loading raised (``SystemExit`` too)."""
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    module.__file__ = "solution.py"  # as for ``python solution.py``
    sys.modules["__main__"] = module
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


def _exc_record(e, sources: dict) -> list:
    return [_exc_name(e), _text(e), _format_exc(e, sources), _builtin_base(e)]


def _builtin_base(e) -> str:
    """The nearest builtin exception class of ``e`` (the judge raises that one)."""
    try:
        for cls in _type(e).__mro__:
            if cls.__module__ == "builtins":
                return cls.__name__
    except BaseException:  # noqa: BLE001
        pass
    return "Exception"


_PLAIN_BASES = ((_tuple, _tuple_iter, False), (_list, _list_iter, True), (_frozenset, _fset_iter, False),
                (_set, _set_iter, True))
_OPS = {name: _getattr(_operator, name) for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
    "matmul", "neg", "pos", "abs", "invert", "index", "getitem", "setitem", "delitem", "eq", "ne", "lt", "le",
    "gt", "ge", "concat")}
_OPS.update(len=len, iter=iter, next=next, repr=repr, str=str, hash=hash, format=format, int=int, float=float,
            complex=complex, round=round, reversed=reversed, isinstance=isinstance, issubclass=issubclass,
            divmod=divmod, contains=_operator.contains, truth=None)


def _array_copy(v):
    """A numpy array's plain content for the judge's own copy (``numpy.array_equal`` in the
    test): ``[dtype, nested list, shape]``, for an array of bools or numbers."""
    numpy = sys.modules.get("numpy")
    if numpy is None or _type(v) is not numpy.ndarray:
        raise TypeError(f"{_type_name(_type(v))!r} object is not a numpy array")
    dt = v.dtype
    if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None or v.size > _ARRAY_COPY_LIMIT:
        raise TypeError("a numpy array of this dtype or size is not copied")
    return [dt.str, v.tolist(), _list(v.shape)]


_ARRAY_COPY_LIMIT = 1 << 16
_OPS["array"] = _array_copy


_SCALAR_BASES = ((_int, _int_copy), (_float, _float_copy), (_str, _str_copy), (_bytes, _bytes_copy),
                 (_complex, _complex_copy))

def _truth(v):
    """An object's truth value when the program's code does not decide it; a class that
    defines ``__bool__`` or ``__len__`` would, so its objects have none here."""
    t = _type(v)
    for name in ("__bool__", "__len__"):
        if _hasattr(t, name):
            return {"nb": _type_name(t)}
    return True


class _ChildSide(_Side):
    """The program's side: runs what the judge asks for on the program's objects."""

    HASHES = True

    def __init__(self, fd: int, sources: dict):
        super().__init__(fd)
        self.g: dict = {}
        self.kinds: dict = {}
        self.sources = sources
        self.shadows: dict = {}  # lent number -> (object, base type, its last content)
        self.pid = _getpid()
        self.lock = None  # made with the first object of the judge's the run holds (``dec_other``)

    def finish(self):
        if _WARMING[0]:  # the warm-up (``warm_up``) runs this class itself, in the template
            raise _WarmDone
        _flush()
        _os_exit(0)

    def _write(self, data: bytes) -> None:
        if _getpid() != self.pid:
            self.forked_child_ends(None)
        _Side._write(self, data)

    def forked_child_ends(self, e) -> None:
        """A process the program forked, its call ended (``sys.exit(0)`` in the child after
        ``os.fork()``): it ends as it would under plain Python, where the exception ends the
        child's copy of the test; it never answers the judge in the run's place."""
        if _getpid() != self.pid:
            _flush()
            _os_exit(0 if e is None else _exit_status(e) if isinstance(e, SystemExit) else 1)

    # ---- encoding what only this side has ------------------------------------------------
    def other(self, v, ex, depth):
        t = _type(v)
        if t is _JudgeRef:
            return {"j": _JudgeRef._n.__get__(v)}
        mod = _getattr(t, "__module__", "")
        # a numpy scalar as the same numpy scalar in the judge: ``isinstance(r, int)`` is
        # false for ``numpy.int64``, ``r is True`` for ``numpy.bool_``, as in Python
        scalar = self.numpy_scalar(v, t)
        if scalar is not None:
            return {"N": [scalar[0], self.enc(scalar[1], ex, depth)]}
        if t is _type:
            name = _getattr(v, "__name__", None)
            if _type(name) is _str and not name.startswith("_") and _CLEAN_BUILTINS.get(name) is v:
                return {"B": name}  # ``type(x) == int`` in the test
            if issubclass(v, BaseException):
                key = self._class_key(v)
                if key is not None:  # ``except Stack.Empty`` in the test: the judge's stand-in
                    return {"X": [key, _builtin_base_of_class(v)]}
        for base, copy in _SCALAR_BASES:
            if _isinstance(v, base):  # a subclass (an IntEnum, a str subclass): its plain value, not its type
                return {"S": [self.lend(v), _type_name(t), self.enc(copy(v), ex, depth)]}
        if depth <= _MAX_DEPTH:
            if _isinstance(v, _dict):  # Counter & co. of a subclass of theirs, or any dict subclass
                n = self.lend(v)
                plain = _dict(_dict_items(v))
                self.shadows[n] = (v, _dict, _shallow(v))
                return {"S": [n, _type_name(t), self.enc(plain, ex, depth)]}
            for base, items, mutable in _PLAIN_BASES:
                if _isinstance(v, base):
                    n = self.lend(v)
                    plain = base(items(v))
                    if mutable:
                        self.shadows[n] = (v, base, _shallow(v))
                    return {"S": [n, _type_name(t), self.enc(plain, ex, depth)]}
        if mod == "numpy" and _hasattr(v, "item") and _getattr(v, "ndim", 1) == 0:
            item = v.item()
            if _type(item) is not t:  # (a longdouble's item is itself: it stays a handle)
                return self.enc(item, ex, depth)
        if mod == "fractions" and t is _getattr(sys.modules.get("fractions"), "Fraction", None):
            return {"F": [self.enc(v.numerator, ex, depth), self.enc(v.denominator, ex, depth)]}
        if mod == "decimal" and t is _getattr(sys.modules.get("decimal"), "Decimal", None):
            return {"M": _str(v)}
        return {"h": [self.lend(v), _type_name(t)]}

    def dec_other(self, tag, val, ex):
        if tag == "h":
            return self.lent_object(val[0] if _type(val) is _list and val else val)
        if tag == "j":
            ref = self.proxies.get(val)
            if ref is None:
                if _type(val) is not _int:
                    raise ProtocolError("bad judge reference")
                if self.lock is None:  # before the program holds anything of the judge's to call
                    self.lock = _RLock()
                ref = self.proxies[val] = _JudgeRef(self, val)
            return ref
        if tag == "g":
            return self.g[_chk_str(val)]
        if tag == "B":
            return _CLEAN_BUILTINS[_chk_str(val)]
        if tag == "m":
            return __import__(_chk_str(val), fromlist=["_"])
        raise ProtocolError(f"unknown tag {tag!r}")

    # ---- serving the judge --------------------------------------------------------------
    def serve(self) -> None:
        while True:
            # before waiting for the judge, which may be waiting for these; a request already
            # here (the calls sent with the program) takes them with its first answer, in one
            # write (the judge sent it without waiting for them)
            if self.held and not self.buf:
                self._write(self.held)
                self.held = b""
            req = self.recv()
            if req[0] == "x":
                self.finish()
            if req[0] == "u":
                self.apply_kept(req)
                continue
            if req[0] == "p":
                self.charge_peer(req)
                continue
            if req[0] == "b":
                self.serve_batch(req)
                continue
            self.send_text(self.serve_one(req))

    def serve_batch(self, req) -> None:
        """Calls the judge sent ahead (``["b", name, [call, ...], last]``: the calls of the
        tests that come first, in their order, each a plain call of ``name`` with literal
        arguments), answered one by one as if each had come alone. The batch stops (``["z"]``:
        the judge sends the rest itself) unless ``name`` is a function of the program, and
        after an answer that lent the judge an object: the judge may then ask about it before
        the next test's call, as it would without the batch. When the calls are those of all
        the tests (``last``) and all were answered, the run ends as on ``["x"]``: the judge
        holds only plain values of its, so it has nothing more to ask."""
        if _len(req) not in (3, 4) or _type(req[1]) is not _str:
            raise ProtocolError("malformed batch")
        calls = _chk_list(req[2])
        served = 0
        lent_before = _len(self.lent)
        if self.kinds.get(req[1]) == "f":
            name = req[1]
            target = {"g": name}
            for call in calls:
                if _type(call) is not _list or not call or call[0] != "c":
                    raise ProtocolError("malformed batch")
                lent = _len(self.lent)
                if _scalar_call(call, target):
                    # what ``serve_one`` does for it, without decoding: scalars are their own
                    # values, and a call with no container to copy in has none to copy out
                    try:
                        v = self.g[name](*call[2])
                    except BaseException as e:  # noqa: BLE001 - the program's exception, reported as such
                        text = self._answer_error(e, _Exchange(), None)
                    else:
                        ex = _Exchange()
                        # (a scalar holds no container: nothing of it can be kept)
                        kept = () if _type(v) in _SCALAR_TYPES else self._kept(v, ex)
                        text = self._answer(v, ex, None, kept)
                        del v
                else:
                    text = self.serve_one(call)
                self.send_text(text)
                served += 1
                if _len(self.lent) != lent:
                    break
        if served < _len(calls):
            self.send_text('["z"]')
        elif _len(req) == 4 and req[3] is True and _len(self.lent) == lent_before:
            # the calls of every test, and no object lent: the judge asks nothing more (after
            # a last answer that lent one, the judge may ask about it: it ends the run then)
            self.finish()

    def serve_one(self, req) -> str:
        ex = _Exchange()
        state = [None]
        try:
            v = self._perform(req, ex, state)
        except BaseException as e:  # noqa: BLE001 - the program's exception, reported as such
            return self._answer_error(e, ex, state[0])
        kept = self._kept(v, ex)
        return self._answer(v, ex, state[0], kept)

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

    def _perform(self, req, ex: _Exchange, state: list):
        op = req[0]
        dec = self.dec
        if op == "c":
            fn = dec(req[1], ex)
            args = [dec(a, ex) for a in _chk_list(req[2])]
            kwargs = {_chk_str(k): dec(a, ex) for k, a in _chk_list(req[3])}
            state[0] = self.snapshot(ex)
            return fn(*args, **kwargs)
        if op == "o":
            fn = _OPS[req[1]]
            args = [dec(a, ex) for a in _chk_list(req[2])]
            state[0] = self.snapshot(ex)
            if fn is None:
                return _truth(args[0])
            return fn(*args)
        if op == "a":
            return _getattr(dec(req[1], ex), _chk_str(req[2]))
        if op == "s":
            obj, value = dec(req[1], ex), dec(req[3], ex)
            state[0] = self.snapshot(ex)
            _setattr(obj, _chk_str(req[2]), value)
            return None
        if op == "d":
            delattr(dec(req[1], ex), _chk_str(req[2]))
            return None
        if op == "n":
            return self.g[_chk_str(req[1])]
        if op == "t":
            return self._batch(dec(req[1], ex), req[2])
        if op == "k":
            return self._entry(_chk_str(req[1]), [dec(a, ex) for a in _chk_list(req[2])])
        raise ProtocolError(f"unknown request {op!r}")

    def _batch(self, it, n):
        """Up to ``n`` next items of an iterator (fewer once one takes a while), then how it
        ended: ``None`` (more may follow), ``"s"`` (exhausted) or the exception it raised,
        which the judge raises when the items before it are used up."""
        items = []
        end = None
        start = time.thread_time()
        for _ in _range(n if _type(n) is _int and 0 < n <= 4096 else 1):
            try:
                items.append(next(it))
            except StopIteration:
                end = "s"
                break
            except BaseException as e:  # noqa: BLE001
                end = _exc_record(e, self.sources) + [self._class_key(_type(e)), self._exc_detail(e, 3)]
                break
            if time.thread_time() - start > 0.002:
                break
        return _BatchResult(items, end)

    def _entry(self, name: str, args: list):
        g = self.g
        sol = g.get("Solution")
        if _isinstance(sol, _type) and _hasattr(sol, name):
            fn = _getattr(sol(), name)
        else:
            fn = g[name]
        v = fn(*args)
        if _isinstance(v, _GENERATOR_TYPES):
            v = _list(v)
        return v

    def _class_key(self, t):
        """The judge's key for the program's exception class ``t``: its global name, or the
        qualified name of a class of the program's that is not a global (``Stack.Empty``)."""
        for name, v in self.g.items():
            if v is t:
                return name
        try:
            if t.__module__ == "__main__" and _type(t.__qualname__) is _str:
                return _text(t.__qualname__, 200)
        except BaseException:  # noqa: BLE001 - a candidate's metaclass
            pass
        return None

    def _exc_detail(self, e, depth: int):
        """What the test may read of an exception besides its type and text: its arguments
        and attributes when they are plain scalars, its class when the standard library's
        (``json.JSONDecodeError``), the exception it was raised from (``__cause__``)."""
        try:
            args = BaseException.args.__get__(e)
            args = [_plain_scalar(a) for a in args] if _len(args) <= 16 else None
            if args is not None and _NOT_PLAIN in args:
                args = None
            attrs = []
            for k, v in _list(_dict(object.__getattribute__(e, "__dict__")).items())[:32]:
                v = _plain_scalar(v)
                if _type(k) is _str and not k.startswith("_") and v is not _NOT_PLAIN:
                    attrs.append([k, v])
            t = _type(e)
            cls = None
            mod = t.__module__
            stdlib = getattr(sys, "stdlib_module_names", ())
            if _type(mod) is _str and mod != "builtins" and mod.split(".")[0] in stdlib:
                found = sys.modules.get(mod)
                for part in _str(t.__qualname__).split("."):
                    found = _getattr(found, "__dict__", {}).get(part)
                if found is t:  # the module's own class, not one that names the module as its own
                    cls = [mod, _text(t.__qualname__, 200)]
            cause = None
            c = BaseException.__cause__.__get__(e)
            if c is not None and depth > 1:
                cause = [_exc_name(c), _text(c), "", _builtin_base(c), self._class_key(_type(c)),
                         self._exc_detail(c, depth - 1)]
            return {"a": args, "d": attrs, "c": cls, "k": cause}
        except BaseException:  # noqa: BLE001 - a candidate's exception that resists: its text only
            return None

    def _refresh(self, ex: _Exchange) -> list:
        """New content of the program's container subclasses the judge holds a copy of."""
        out = []
        for n, (obj, base, before) in self.shadows.items():
            if not _unchanged(before, obj):
                plain = _dict(_dict_items(obj)) if base is _dict else base(obj)
                out.append([n, self.enc(plain, ex, 1)])
                self.shadows[n] = (obj, base, _shallow(obj))
        return out

    def _answer(self, v, ex: _Exchange, snap, kept=()) -> str:
        self.tell_cpu()
        rex = ex.follow()
        if _type(v) is _BatchResult:
            head = ["r", self.enc(v.items, rex), self.updates(snap, rex), self._refresh(rex), v.end]
        else:
            head = ["r", self.enc(v, rex), self.updates(snap, rex), self._refresh(rex)]
            if snap and _type(v) in _ITERATORS:
                # an iterator made from the test's containers (a generator's arguments): they
                # are kept in step while it runs, as the test's own objects would change
                kept = _list(kept) + [ex.table[k] for k in snap if _type(ex.table[k]) in _KEPT_TYPES]
            if kept:  # [k, n]: the response's k-th container is the program's object n, kept in step
                pairs = []
                for o in kept:
                    k = rex.seen.get(_id(o))
                    if k is not None and rex.table[k] is o:
                        pairs.append([k, self.lend(o)])
                head += [None, pairs]
        try:
            text = _dumps(head)
        except (TypeError, ValueError, RecursionError):
            text = None
        if kept and text is not None and _len(text) <= MAX_VALUE_BYTES:
            for k, n in head[5]:
                o = rex.table[k]
                self.shadows[n] = (o, _dict if _type(o) in _DICT_TYPES else _type(o), _shallow(o))
        if text is None or _len(text) > MAX_VALUE_BYTES:
            rex = ex.follow()
            note = "value too large" if text is not None else "value not encodable"
            head = ["r", {"h": [self.lend(v), _type_name(_type(v)), note]}, self.updates(snap, rex),
                    self._refresh(rex)]
            text = _dumps(head)
        return text

    def _answer_error(self, e, ex: _Exchange, snap) -> str:
        self.forked_child_ends(e)
        self.tell_cpu()
        rex = ex.follow()
        try:
            return _dumps(["e", *_exc_record(e, self.sources), self.updates(snap, rex), self._refresh(rex),
                           self._class_key(_type(e)), self._exc_detail(e, 3)])
        except BaseException:  # noqa: BLE001 - e.g. the updates cannot be encoded
            return _dumps(["e", *_exc_record(e, self.sources), [], [], None])


_DICT_TYPES = frozenset({_dict, _Counter, _OrderedDict, _defaultdict})
_KEPT_TYPES = _DICT_TYPES | {_list, _set}
"""Containers of a result kept in step with the program's object when the program holds it."""
_WALKED = _KEPT_TYPES | {_tuple, _frozenset, _deque}
import itertools as _itertools  # noqa: E402 - preloaded anyway
_ITERATORS = frozenset(_GENERATOR_TYPES) | {_type(iter(x)) for x in ([], {}, _set(), {}.values(), {}.items())} | {
    _getattr(_itertools, n) for n in ("chain", "islice", "cycle", "accumulate", "starmap", "takewhile", "dropwhile",
                                      "filterfalse", "compress", "zip_longest", "pairwise", "groupby")}
"""Results that read the containers they were made from as they go (a generator's arguments)."""
_KEPT_WALK_LIMIT = 100_000
_SCALAR_TYPES = frozenset({_str, _int, _float, _bool, _NoneType})
"""What a JSON scalar decodes to: the value itself (``_Side.dec``)."""


def _scalar_call(call: list, target: dict) -> bool:
    """``["c", target, [scalar, ...], []]``: a call of ``target`` with scalar arguments only."""
    if _len(call) != 4 or call[1] != target or call[3] != [] or _type(call[2]) is not _list:
        return False
    for a in call[2]:
        if _type(a) not in _SCALAR_TYPES:
            return False
    return True


class _BatchResult:
    __slots__ = ("items", "end")

    def __init__(self, items, end):
        self.items, self.end = items, end


class _JudgeRef:
    """An object of the judge's (a function or object the test passed to the program): every
    operation on it is asked of the judge, which runs it on its side."""

    __slots__ = ("_side", "_n", "_buf", "_size")

    def __init__(self, side, n):
        _JudgeRef._side.__set__(self, side)
        _JudgeRef._n.__set__(self, n)
        _JudgeRef._buf.__set__(self, None)
        _JudgeRef._size.__set__(self, 1)

    def _ask(self, msg: list, ex: _Exchange):
        side = _JudgeRef._side.__get__(self)
        snap = side.snapshot(ex)  # our containers the judge's code may change
        # one request at a time on the socket: the program's threads calling the test's
        # function would interleave their requests and read each other's answers
        with side.lock:
            reply = side.call_peer(msg)
        rex = ex.follow()
        if reply[0] == "e":
            side.apply_updates(reply[5], rex)
            base = _str(reply[4])
            cls = _getattr(builtins, base, None)
            if not (_isinstance(cls, _type) and issubclass(cls, BaseException)):
                cls = Exception
            raise cls(_str(reply[2]))
        value = side.dec(reply[1], rex)
        side.apply_updates(reply[2], rex)
        del snap
        return value

    def _op(self, name, *operands):
        side = _JudgeRef._side.__get__(self)
        ex = _Exchange()
        return _JudgeRef._ask(self, ["o", name, [side.enc(x, ex) for x in (self, *operands)]], ex)

    def __call__(self, *args, **kwargs):
        side = _JudgeRef._side.__get__(self)
        ex = _Exchange()
        msg = ["c", side.enc(self, ex), [side.enc(a, ex) for a in args],
               [[k, side.enc(v, ex)] for k, v in kwargs.items()]]
        return _JudgeRef._ask(self, msg, ex)

    def __getattr__(self, name):
        side = _JudgeRef._side.__get__(self)
        ex = _Exchange()
        return _JudgeRef._ask(self, ["a", side.enc(self, ex), name], ex)

    def __setattr__(self, name, value):  # ``node.next = head`` on a node of the setup's class
        side = _JudgeRef._side.__get__(self)
        ex = _Exchange()
        _JudgeRef._ask(self, ["s", side.enc(self, ex), name, side.enc(value, ex)], ex)

    def __delattr__(self, name):
        side = _JudgeRef._side.__get__(self)
        ex = _Exchange()
        _JudgeRef._ask(self, ["d", side.enc(self, ex), name], ex)

    def __instancecheck__(self, instance):  # ``isinstance(x, ListNode)``, the class the judge's
        return _JudgeRef._op(self, "isinstance", instance)

    def __iter__(self):
        return _JudgeRef._op(self, "iter")

    def __next__(self):
        """The next item of the test's iterator: the judge sends one per request, or a batch
        where reading ahead cannot be seen (``_JudgeSide.take``)."""
        buf = _JudgeRef._buf.__get__(self)
        if buf:
            try:
                return buf.popleft()
            except IndexError:  # another of the program's threads took the last one
                pass
        n = _JudgeRef._size.__get__(self)
        if n == 0:  # the judge's iterator ended after the last batch
            _JudgeRef._size.__set__(self, 1)
            raise StopIteration
        got = _JudgeRef._op(self, "take", n)
        if _type(got) is not _list or _len(got) != 2 or _type(got[0]) is not _list:
            raise ProtocolError("malformed items")
        items, end = got
        _JudgeRef._size.__set__(self, 0 if end == "s" else n * 2 if n < 2048 else n)
        if not items:
            if end != "s":
                raise ProtocolError("malformed items")
            _JudgeRef._size.__set__(self, 1)
            raise StopIteration
        buf = _deque(items)
        _JudgeRef._buf.__set__(self, buf)
        return buf.popleft()

    def __len__(self):
        return _JudgeRef._op(self, "len")

    def __getitem__(self, key):
        return _JudgeRef._op(self, "getitem", key)

    def __contains__(self, item):
        return _JudgeRef._op(self, "contains", item)

    def __bool__(self):
        return _JudgeRef._op(self, "truth")

    def __repr__(self):
        return _JudgeRef._op(self, "repr")

    def __eq__(self, other):
        return _JudgeRef._op(self, "eq", other)

    def __ne__(self, other):
        return _JudgeRef._op(self, "ne", other)

    def __lt__(self, other):
        return _JudgeRef._op(self, "lt", other)

    def __le__(self, other):
        return _JudgeRef._op(self, "le", other)

    def __gt__(self, other):
        return _JudgeRef._op(self, "gt", other)

    def __ge__(self, other):
        return _JudgeRef._op(self, "ge", other)

    def __hash__(self):
        return _JudgeRef._op(self, "hash")


def _global_kinds(g: dict) -> dict:
    """What each of the program's global names holds, for the judge's namespace: a module
    (``m:`` its name), a plain value (``v``, read when used), an exception class (``x:`` its
    builtin base) or anything else (``f``, a handle)."""
    out = {}
    for name, v in _list(g.items()):
        if _type(name) is not _str or name.startswith("__"):
            continue
        t = _type(v)
        if t is _ModuleType:
            out[name] = "m:" + _text(_getattr(v, "__name__", name), 200)
        elif t in _PLAIN_TYPES:
            out[name] = "v"
        elif t is _type and issubclass(v, BaseException):
            out[name] = "x:" + _builtin_base_of_class(v)
        else:
            out[name] = "f"
    return out


def _builtin_base_of_class(cls) -> str:
    try:
        for c in cls.__mro__:
            if c.__module__ == "builtins":
                return c.__name__
    except BaseException:  # noqa: BLE001
        pass
    return "Exception"


_ModuleType = type(sys)
_PLAIN_TYPES = frozenset({_int, _str, _float, _bool, _NoneType, _list, _tuple, _dict, _set, _frozenset, _bytes,
                          _bytearray, _complex, _range, _Counter, _OrderedDict, _defaultdict, _deque})
SOCK_FD = 998
"""The child's end of its conversation with the judge (close-on-exec)."""


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
    try:
        exec(compiled, module.__dict__)
    except SystemExit as e:
        status = _exit_status(e)
        if status:
            _flush()
            _emit(["l", "SystemExit", _text(e.code), f"SystemExit: {_text(e.code)}"])
            _os_exit(status)
    except BaseException as e:  # noqa: BLE001
        _flush()
        _emit(["l", _exc_name(e), _text(e), _format_exc(e, sources)])
        _os_exit(1)
    _exit_as_python_does()
    _flush()
    _emit(["d", 0, token])


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


_INT_DIGITS = sys.get_int_max_str_digits()
_DIGITS_KEY = "__int_max_str_digits__"  # in the greeting, beside the globals (none of which starts with "__")
_WARMING = [False]  # the template runs the harness in ``warm_up``


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
        self.served_limit: int | None = None  # a run's recursion limit, set by the forker (``_forker``)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # The forker is the subreaper of the runs; the controller is one too, so that
        # whatever a dead forker leaves behind is reparented here and swept.
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.children_fd = os.open(f"/proc/self/task/{self.tid}/children", os.O_RDONLY | os.O_CLOEXEC)
        self.forker_pid = self.cmd_sock = self.done_fd = None
        self.judge_pid = self.judge_sock = self.own_pid_ns = None
        self.judge_known: dict[str, None] = {}
        self.judge_code_fd = -1  # set by main(): a memfd holding the marshalled code of _judge.py
        self.scratch_binds = self.report.pop("scratch_binds")
        self.tmpfs_mb = int(cfg.get("tmpfs_mb", 256))
        self.seccomp = bytes.fromhex(cfg["seccomp"]) if cfg.get("seccomp") else None
        self.report["seccomp"] = self.seccomp is not None
        self.empty_scratch = None
        if self.private_root:
            self.workdir = "/tmp/run"
            # Group-writable files (umask 002, inherited by the forker, the runs and the
            # judge): the judge process works in the run's directory with the run's group
            # (see ``_judge_process``), so that a test and the program share their files.
            os.umask(0o002)
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
            # back to forking into our own namespace (a judge process forked later is not in
            # the runs' namespace)
            _libc.setns(own_ns, CLONE_NEWPID)
            self.own_pid_ns = own_ns
            if self.pid_ns:
                self.report["pid_namespace"] = True
                return
        self._fork_forker(close)
        self.report["pid_namespace"] = False

    def _fork_forker(self, close: tuple[int, ...]) -> bool:
        """Fork the forker; whether it runs in a PID namespace of its own (it says so)."""
        # commands on a socket: a run in assert or call mode comes with its end of the
        # socket pair it shares with the judge (SCM_RIGHTS)
        cmd_w, cmd_r = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                cmd_w.close()
                for fd in (done_r, *close):
                    os.close(fd)
                _forker(self, cmd_r, done_w)
            finally:
                _os_exit(0)
        cmd_r.close()
        os.close(done_w)
        hello = os.read(done_r, 1)  # the forker's set-up is done
        if hello not in (b"P", b"N"):
            cmd_w.close()
            os.close(done_r)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            return False
        self.forker_pid, self.cmd_sock, self.done_fd = pid, cmd_w, done_r
        return hello == b"P"

    def stop_forker(self) -> None:
        self.stop_judge()
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
        if first is not None:
            # The usual end: the run's process has exited and left no other process. Reaped
            # and checked without the loop below, whose last ``wait4`` raises (an exception,
            # a traceback and their frames: pages of this process written at every run).
            try:
                pid, st, ru = os.wait4(first, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == first:
                utime, stime, minflt, maxrss, status = ru.ru_utime, ru.ru_stime, ru.ru_minflt, ru.ru_maxrss, st
                if not self._children():
                    return status, utime, stime, maxrss, minflt, False
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
        """What each run of a problem receives (``child``). In ``assert`` and ``call`` mode
        that is only the mode: the tests, expected values included, go to the judge."""
        spec = dict(spec)
        spec["child"] = marshal.dumps({"mode": spec["mode"]})
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

    # ---- the judge process ------------------------------------------------------------
    def start_judge(self) -> None:
        """Fork the judge process (see ``_judge.py``): it holds the tests and runs them,
        talking with each run over a socket of its own. Forked into this process's own PID
        namespace, outside the runs' one."""
        if self.own_pid_ns is not None:
            _libc.setns(self.own_pid_ns, CLONE_NEWPID)
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                mine.close()
                _judge_process(self, theirs.detach())
            finally:
                _os_exit(0)
        theirs.close()
        self.judge_pid, self.judge_sock = pid, mine
        self.judge_known = {}
        self.judge_cpu = 0.0  # the judge's own CPU time at its last answer

    def stop_judge(self) -> tuple[int | None, bool, float]:
        """Kill the judge process; its wait status, whether its CPU-time limit ended it, and
        the CPU time it used since its last answer (the candidate's, when its timer ended it)."""
        pid, self.judge_pid = self.judge_pid, None
        if self.judge_sock is not None:
            self.judge_sock.close()
            self.judge_sock = None
        if pid is None:
            return None, False, 0.0
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            _, status, usage = os.wait4(pid, 0)
        except ChildProcessError:
            return None, False, 0.0
        cpu = max(usage.ru_utime + usage.ru_stime - self.judge_cpu, 0.0)
        return status, os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGPROF, cpu

    def judge_send(self, msg: dict, fd: int | None = None) -> None:
        if self.judge_pid is None:
            self.start_judge()
        data = json.dumps(msg, ensure_ascii=True).encode("ascii")
        frame = _LEN.pack(len(data) + 1) + b"J" + data
        if fd is None:
            self.judge_sock.sendall(frame)
            return
        sent = self.judge_sock.sendmsg([frame], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _FD.pack(fd))])
        if sent < len(frame):
            self.judge_sock.sendall(frame[sent:])

    def judge_recv(self, deadline: float) -> tuple[bytes, bytes]:
        """The judge's answer (kind, payload); raises ``PeerGone`` if it died (and is gone)
        and ``TimeoutError`` past ``deadline``."""
        fd = self.judge_sock.fileno()
        parts, need, head = [], 4, None
        while need:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError("the judge did not answer in time")
            chunk = os.read(fd, need)
            if not chunk:
                raise PeerGone()
            parts.append(chunk)
            need -= len(chunk)
            if need == 0 and head is None:
                (need,) = _LEN.unpack(b"".join(parts))
                head, parts = True, []
        data = b"".join(parts)
        return data[:1], data[1:]

    def judge_compile(self, code: str, lim: dict):
        """The program compiled by the judge process, under its CPU-time limit: (code object,
        None), (None, a ``c`` record), or (None, None) when the judge could not (the child
        then compiles it under its own limit); then the judge's CPU time for it, and whether
        the judge's CPU-time limit ended it (the candidate's budget is spent)."""
        try:
            self.judge_send({"op": "compile", "code": code, "timeout_s": float(lim["timeout_s"]),
                             "memory_mb": int(lim["memory_mb"])})
            kind, data = self.judge_recv(time.monotonic() + float(lim["wall"]) + REAP_GRACE_S)
        except (OSError, PeerGone, TimeoutError, ValueError):
            _status, killed, cpu = self.stop_judge()
            return None, None, cpu, killed
        cpu, self.judge_cpu = _JUDGE_CPU.unpack(data[:_JUDGE_CPU.size])
        data = data[_JUDGE_CPU.size:]
        if kind == b"P":
            return marshal.loads(data), None, cpu, False
        return None, json.loads(data), cpu, False

    def judge_known_key(self, key: str) -> bool:
        """Whether the judge holds this problem (the same LRU policy as its cache)."""
        known = self.judge_known
        if key in known:
            known[key] = known.pop(key)
            return True
        known[key] = None
        while len(known) > self.cache_size:
            known.pop(next(iter(known)))
        return False

    # ---- one job -------------------------------------------------------------------
    def job(self, msg: dict) -> tuple[dict, list[bytes]]:
        spec = self.lookup(msg["key"], msg.get("spec"))
        if spec is None:
            return {"need_spec": True}, []
        code, lim = msg["code"], msg["limits"]
        runs, blobs = [], []
        header: dict = {"runs": runs}
        if spec["mode"] != "stdio":
            info, data, report = self.run_judged(msg["key"], spec, code, lim)
            runs.append(info)
            blobs += data
            header["judge"] = report
        else:
            compiled, crec, cpu, killed = self.judge_compile(code, lim)
            header["judge"] = {"cpu": cpu}  # compiling is the candidate's CPU time too
            if crec is not None or killed:  # does not compile, or its budget is spent compiling it
                runs.append({"exit": None, "signal": None, "cpu": 0.0, "wall": 0.0, "timeout": killed,
                             "wall_killed": False, "overflow": False, "token": "", "minflt": 0})
                blobs += [(json.dumps(crec) + "\n").encode() if crec is not None else b"", b"", b""]
            else:
                header.update(self.run_stdio(spec, code, compiled, lim, runs, blobs))
        header["judge_pid"] = self.judge_pid  # a process of the worker's, not of a candidate
        for k, info in enumerate(runs):
            info["records_len"], info["stdout_len"], info["stderr_len"] = (len(b) for b in blobs[3 * k: 3 * k + 3])
        return header, blobs

    def run_stdio(self, spec, code, compiled, lim, runs, blobs) -> dict:
        header = {}
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
        return header

    def run_judged(self, key: str, spec: dict, code: str, lim: dict):
        """One run in ``assert`` or ``call`` mode: the judge process runs the tests and asks
        the run (over a socket pair made for it) to call the program's functions."""
        if self.judge_pid is None:
            self.start_judge()
        judge_end, run_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        start = time.monotonic()
        job = {"op": "judge", "key": key, "code": code, "timeout_s": float(lim["timeout_s"]),
               "memory_mb": int(lim["memory_mb"])}
        if not self.judge_known_key(key):
            job["spec"] = {k: v for k, v in spec.items() if k != "child"}
        try:
            self.judge_send(job, judge_end.fileno())
        except OSError:
            self.stop_judge()
        judge_end.close()
        try:
            # the run's directory is cleaned once the judge is done with it too (the tests
            # work in it: whatever they leave is found by the same check)
            try:
                info, data = self.run_one(spec, code, None, lim, None, run_fd=run_end, keep_workdir=True)
            finally:
                run_end.close()  # the judge sees the run's end
            report, stuck = None, False
            if self.judge_pid is not None:
                try:
                    kind, payload = self.judge_recv(start + float(lim["wall"]) + REAP_GRACE_S)
                    report = json.loads(payload)
                    self.judge_cpu = float(report.pop("total", self.judge_cpu))
                except TimeoutError:  # e.g. a test opening a FIFO the program made: plain Python hangs too
                    stuck = True
                except (OSError, PeerGone, ValueError):
                    report = None
            if report is None:  # the judge's CPU time until it died is this candidate's
                _status, cpu_killed, cpu = self.stop_judge()
                report = {"died": "timeout" if cpu_killed else "wall" if stuck else "crashed", "cpu": cpu}
        finally:
            if self.workdir is not None:
                self.cleanup(self.workdir)
        return info, data, report

    def run_one(self, spec, code, compiled, lim, stdin_text, wall_cap: float | None = None, run_fd=None,
                keep_workdir: bool = False):
        token = os.urandom(12).hex()
        workdir = self.workdir
        if workdir is None:
            import tempfile
            workdir = tempfile.mkdtemp(prefix="execrl-run-")
        else:
            os.mkdir(workdir, 0o770)  # the run's group is the judge's too (``_judge_process``)
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
            cmd = _CMD.pack(wall, timeout, len(job))
            if run_fd is None:
                self.cmd_sock.sendall(cmd)
            else:
                self.cmd_sock.sendmsg([cmd], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _FD.pack(run_fd.fileno()))])
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
        if not keep_workdir or self.workdir is None:  # (kept: the caller cleans it)
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
    def child_main(self, job_size: int, run_fd: int) -> None:
        """Entry point of a freshly forked child: read the job, set up, run; never returns."""
        try:
            job = os.pread(self.job_fd, job_size, 0)
            if len(job) != job_size:  # a large job: pread returns at most ~2 GiB at once
                job, _ = _read_memfd(self.job_fd, job_size)
            spec_blob, code, compiled, rlimits, token, workdir, use_stdin, timeout = marshal.loads(job)
            del job
            self._child(marshal.loads(spec_blob), code, compiled, rlimits, token, workdir,
                        self.in_fd if use_stdin else self.devnull, timeout, run_fd)
        except BaseException as e:  # noqa: BLE001
            try:
                _emit(["l", "SandboxError", _text(e), f"SandboxError: {_text(e)}"])
            except BaseException:  # noqa: BLE001
                pass
        finally:  # a run that returns here ended without its own end-of-run record
            _os_exit(1)

    def _child(self, spec, code, compiled, rlimits, token, workdir, stdin_fd, timeout, run_fd):
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(self.out_fd, 1)
        os.dup2(self.err_fd, 2)
        # Every other descriptor closed, before the two kept ones move up: closing a range
        # scans the descriptor table, which is the forker's small one until a descriptor is
        # placed at RESULT_FD (scanning ~1000 empty slots cost ~20 us per run).
        keep = sorted(fd for fd in (self.res_fd, run_fd) if fd >= 3)
        low = 3
        for fd in keep:
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 20)
        os.dup2(self.res_fd, RESULT_FD, inheritable=False)
        if run_fd >= 0:
            os.dup2(run_fd, SOCK_FD, inheritable=False)
        for fd in keep:
            os.close(fd)
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
        mode = spec["mode"]
        if mode != "stdio":
            _run_served(code, token, None, self.served_limit, timeout)
        if compiled is None:  # the judge could not compile it: compiled here, under this run's limits
            compiled, crec = compile_candidate(code)
            if crec is not None:
                _emit(crec)
                _os_exit(0)
        _run_stdio(code, compiled, token)
        _os_exit(0)  # the harness's own record is written

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
        spec = self.prepare({"mode": "assert", "tests": ["assert f() == 8"], "setup": None})
        lim = {"timeout_s": 10, "wall": 32, "memory_mb": 1024, "file_size_mb": 1, "max_open_files": 64,
               "max_processes": 16, "max_output_bytes": 65536}
        info, (_records, _out, err), report = self.run_judged("execrl-self-test", spec, probe, lim)
        if report.get("tests") == [["pass", None, None, ""]]:
            return None
        return f"sandbox self-test failed: {report!r} {err[:500]!r} {info}"


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


def _forker(worker: Worker, cmd_sock, done_fd: int) -> None:
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
    # the depth of ``_run_served`` in a run: this frame, ``child_main``, ``_child``, itself
    worker.served_limit = _served_limit(_stack_depth(sys._getframe()) + 3)
    write, fork, monotonic, close = os.write, os.fork, time.monotonic, os.close
    killpg = os.killpg
    recvmsg, fd_space = cmd_sock.recvmsg, _socket.CMSG_SPACE(_FD.size)
    cmd_size, unpack_cmd, pack_done, unpack_fd = _CMD.size, _CMD.unpack, _DONE.pack, _FD.unpack
    while True:
        cmd, ancillary, _flags, _addr = recvmsg(cmd_size, fd_space)
        if len(cmd) != cmd_size:
            return  # the controller is gone
        run_fd = unpack_fd(ancillary[0][2][:_FD.size])[0] if ancillary else -1
        wall, cpu_limit, job_size = unpack_cmd(cmd)
        t0 = monotonic()
        pid = fork()
        if pid == 0:
            worker.child_main(job_size, run_fd)
        if run_fd >= 0:
            close(run_fd)
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


def _judge_process(worker: Worker, fd: int) -> None:
    """The judge process (forked from the controller): runs ``_judge.py``'s loop. It holds
    the tests, expected values included, so it runs as a uid of its own (not the runs'),
    outside the runs' PID namespace, with every other file descriptor closed."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != worker.tid:  # the controller died before PR_SET_PDEATHSIG
        return
    code = marshal.loads(_read_memfd(worker.judge_code_fd, 1 << 30)[0])
    os.dup2(fd, 3)
    os.closerange(4, 1 << 20)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)  # before /proc is hidden
    run_dir = _judge_view(worker)
    uid = worker.cfg.get("judge_uid")
    if worker.uid is not None and uid is not None and uid != worker.uid:
        os.setgroups([])
        # the run's group (its files are group-writable: the test shares them), the judge's own uid
        gid = worker.uid if run_dir is not None else uid
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if worker.seccomp is not None:
        install_seccomp(worker.seccomp, worker.cfg.get("seccomp_syscall"))
    namespace = dict(globals(), __name__="execrl_judge")
    exec(code, namespace)
    del code
    gc.freeze()  # the judge's own objects, which live as long as it does, out of every collection
    namespace["_STATM"][:] = [statm, resource.getpagesize(), resource.getrlimit(resource.RLIMIT_AS)[1]]
    namespace["_RUN_DIR"][:] = [run_dir] if run_dir is not None else []
    namespace["judge_main"](3, worker.cfg)


def _judge_view(worker: Worker) -> str | None:
    """The judge's view of the file system, from which the tests work in the run's directory
    (they share its files with the program, as in one interpreter): the run's own view (the
    private root: read-only system directories, the scratch mounts, a minimal ``/dev``) less
    ``/proc``, in a mount namespace of the judge's own (a slave of the controller's: fresh
    scratch mounts still arrive). Whatever a link the program plants in that directory
    names, the judge can reach through it only what the run reaches itself: not its own
    ``/proc/self`` (memory, descriptors), with no more rights than the run's group (its
    uid owns only the files the tests create). The run's directory, or None where the judge
    keeps to ``/`` (no private root, or no mount namespace for it)."""
    if not worker.private_root or worker.mode not in ("root", "userns"):
        return None
    try:
        _check(_libc.unshare(CLONE_NEWNS), "unshare(mount)")
        _mount(None, "/", None, MS_REC | MS_SLAVE)
        _check(_libc.umount2(b"/proc", MNT_DETACH), "umount /proc")
    except OSError:
        return None
    # nothing is imported from the working directory (``''`` leads ``sys.path`` without ``-P``)
    sys.path[:] = [p for p in sys.path if os.path.isabs(p)]
    return worker.workdir


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
_WARM_CALLS = ([["b", "f", [["c", {"g": "f"}, [3], []], ["c", {"g": "f"}, [4], []]]],
                ["c", {"g": "f"}, [1], []], ["c", {"g": "f"}, [2, {"l": [3, 4]}], [["y", {"t": ["a", 1.5]}]]],
                ["c", {"g": "f"}, [-1], []], ["n", "LIMIT"], ["a", {"g": "Solution"}, "f"],
                ["o", "len", [{"g": "TABLE"}]], ["o", "iter", [{"l": [1, 2]}]], ["k", "f", [{"d": [[1, {"s": [2]}]]}]]])


class _WarmDone(Exception):
    pass


_WARM_BATCH = (["b", "g", [["c", {"g": "g"}, [1], []], ["c", {"g": "g"}, [2], []], ["c", {"g": "g"}, [3], []]], True],)
"""A warm-up round: a batch of every test's call, scalars in and out (most runs)."""
_WARM_BATCH_LISTS = (["b", "h", [["c", {"g": "h"}, [{"l": [3, 1, 2]}, 2], []], ["c", {"g": "h"}, [{"l": ["b", "a"]}, 1], []],
                                 ["c", {"g": "h"}, [{"l": [[1, 2], [0]]}, 0], []]], True],)
"""A warm-up round: a batch whose calls pass lists and get lists back (most of MBPP's)."""
_WARM_ROUNDS = (_WARM_CALLS, _WARM_BATCH, _WARM_BATCH_LISTS)


def warm_up(worker: Worker, rounds: int = 16) -> None:
    """Run the child-side harness on a benign program a few times, here.

    Every candidate is forked from this process's memory. Running the harness once here
    does its one-time work (quickening its bytecode, filling the type and method caches,
    creating the allocator pools it needs) before the fork instead of again in every child,
    where each page it writes costs a copy-on-write fault. Results go to /dev/null; the
    judge's requests are written ahead into a socket pair, and its answers read afterwards.
    """
    saved = {name: getattr(sys, name) for name in ("stdout", "stderr")}
    saved_main = sys.modules.get("__main__")
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, RESULT_FD, inheritable=False)
    program = _WARM_PROGRAM + ("LIMIT = 3\nTABLE = [1, 2]\ndef g(x):\n    return x + 1\n"
                               "def h(xs, k):\n    return sorted(xs)[:k] if k else len(xs) > 1\n")
    _WARMING[0] = True
    try:
        for i in range(rounds):
            compiled, _ = compile_candidate(program)
            judge, run = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                feeder = _Side(judge.fileno())
                feeder.send_raw(b"P", marshal.dumps(compiled))
                for request in _WARM_ROUNDS[i % len(_WARM_ROUNDS)]:
                    feeder.send(request)
                feeder.send(["x"])
                # as a run does it: its socket at SOCK_FD, the run's own class (what attribute
                # and method lookups specialize on here is then what every run finds; a
                # subclass made them miss there), a recursion limit and a CPU-time budget (the
                # reports' code runs too, never reaching a report)
                os.dup2(run.fileno(), SOCK_FD, inheritable=False)
                try:
                    _run_served(program, "0" * 24, None, _served_limit(_stack_depth(sys._getframe()) + 1), 1e9)
                except _WarmDone:
                    pass
                finally:
                    os.close(SOCK_FD)
                judge.setblocking(False)
                try:
                    while judge.recv(1 << 16):
                        pass
                except BlockingIOError:
                    pass
            finally:
                judge.close()
                run.close()
            _run_stdio(_WARM_PROGRAM, compiled, "0" * 24)
            marshal.loads(marshal.dumps(({"mode": "assert"}, _WARM_PROGRAM, compiled)))
    finally:
        _WARMING[0] = False
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
    judge_code = globals().pop("EXECRL_JUDGE")  # marshalled: loaded by the judge process only
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
        worker.judge_code_fd = os.memfd_create("execrl-judge-code", os.MFD_CLOEXEC)
        _pwrite_all(worker.judge_code_fd, judge_code)
        del judge_code  # freed before the forker is forked (and trimmed below)
        warm_up(worker)
        # Freeze before forking the forker: every candidate is forked from its memory, and
        # frozen objects are never written by the GC (no copy-on-write of their pages).
        gc.collect()
        gc.freeze()
        try:  # hand freed start-up memory back: fewer pages to copy-protect at every fork
            _libc.malloc_trim(0)
        except AttributeError:  # not glibc
            pass
        worker.start_judge()
        worker.start_forker(close=(in_fd, out_fd, worker.judge_sock.fileno(), worker.judge_code_fd))
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
