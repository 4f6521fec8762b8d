"""The seccomp filter of sandboxed runs: system calls a solution never needs.

A solution to a programming problem computes; it does not debug other processes, share
memory or keys with other programs, create namespaces, mount file systems or load BPF
programs. Each of those calls is a way out of the per-run isolation (``ptrace`` of the
parent keeps a zombie unreapable; SysV IPC objects and keys outlive the run and connect
candidates; ``memfd_create`` allocates memory outside ``RLIMIT_AS``), so they fail with
``EPERM``. The filter is built here, as classic BPF bytes, and installed by the worker's
forker once (``_isolation.install_seccomp``): every run inherits it and cannot remove it.

No library is needed: the program is a linear list of ``syscall == N -> EPERM`` checks (a few
dozen instructions, JIT-compiled by the kernel), plus a check of ``clone``'s flags.
"""

from __future__ import annotations

import platform
import struct

# syscall numbers by architecture (from the kernel's unistd tables)
_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "process_madvise": 440, "keyctl": 250, "add_key": 248, "request_key": 249,
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
    "mq_getsetattr": 245, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "memfd_create": 319, "memfd_secret": 447, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "clone": 56, "clone3": 435,
}
_AARCH64 = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438,
    "process_madvise": 440, "keyctl": 219, "add_key": 217, "request_key": 218,
    "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193, "semctl": 191,
    "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187,
    "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184,
    "mq_getsetattr": 185, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
    "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "memfd_create": 279, "memfd_secret": 447, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "clone": 220, "clone3": 435,
}
_ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
_SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}


def seccomp_syscall(machine: str | None = None) -> int | None:
    """The number of ``seccomp(2)`` here: the filter is installed with
    ``SECCOMP_FILTER_FLAG_SPEC_ALLOW``, so that being filtered does not also switch on the
    kernel's speculative-store-bypass mitigation for every run (a slowdown that protects a
    process from itself; a run's memory holds nothing of anyone else's)."""
    return _SECCOMP_SYSCALL.get(machine or platform.machine())

BLOCKED = tuple(name for name in _X86_64 if name not in ("clone", "clone3"))
"""Denied with EPERM. ``clone3`` gets ENOSYS instead (its flags live in memory, where a
filter cannot read them), so the C library falls back to ``clone``, whose flags are checked."""

CLONE_DENIED_FLAGS = (0x00002000 | 0x00008000 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
                      | 0x10000000 | 0x20000000 | 0x40000000)
"""CLONE_PTRACE, CLONE_PARENT (a child the run's subreaper would not see as the run's own),
and every CLONE_NEW* namespace flag."""

_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
_X32_BIT = 0x40000000


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None) -> bytes | None:
    """The filter program for this machine's architecture (None if it is not known)."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr = arch
    deny = _insn(_RET, 0, 0, _ERRNO | EPERM)
    prog = [
        _insn(_LD_ABS_W, 0, 0, 4),          # seccomp_data.arch
        _insn(_JEQ, 1, 0, audit_arch),
        deny,                               # another ABI (e.g. int 0x80 on x86_64): nothing works
        _insn(_LD_ABS_W, 0, 0, 0),          # seccomp_data.nr
    ]
    if audit_arch == _ARCHES["x86_64"][0]:
        prog += [_insn(_JGE, 0, 1, _X32_BIT), deny]  # the x32 ABI aliases every call
    checks = []
    for name in sorted(BLOCKED, key=nr.__getitem__):
        checks += [_insn(_JEQ, 0, 1, nr[name]), deny]
    checks += [_insn(_JEQ, 0, 1, nr["clone3"]), _insn(_RET, 0, 0, _ERRNO | ENOSYS),
               _insn(_JEQ, 0, 3, nr["clone"]),
               _insn(_LD_ABS_W, 0, 0, 16),    # low 32 bits of args[0] (little-endian): the flags
               _insn(_JSET, 0, 1, CLONE_DENIED_FLAGS),
               deny]
    # the hottest calls (read, write, mmap, close, ...) have the lowest numbers: allowed at once
    lowest = min(nr.values())
    prog.append(_insn(_JGE, 0, len(checks), lowest))
    prog += checks
    prog.append(_insn(_RET, 0, 0, _ALLOW))
    return b"".join(prog)
