"""The forker: the process the controller forks once, which forks one child per run and
supervises, kills and reaps it (``_forker``), and the controller's side of it
(``_ForkerControl``, a part of ``_controller.Worker``): forking it, sweeping what a run left,
the CPU time of a run's processes.
"""

from __future__ import annotations

import builtins
import os
import select
import signal
import struct
import sys
import time

import _socket

from execrl.sandbox._child import _served_limit, _stack_depth
from execrl.sandbox._exchange import _FD, _os_exit
from execrl.sandbox._isolation import (CLONE_NEWNS, CLONE_NEWPID, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_REC, MS_SLAVE,
                                       PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, _check, _libc, _mount, _prctl,
                                       install_seccomp)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

REAP_GRACE_S = 5.0
"""How long the forker may take to kill and reap a run's processes before it reports the
worker as stuck (the executor then replaces the worker and kills everything of its uid)."""


_CMD = struct.Struct("=ddq")
"""controller -> forker: run the job (this many bytes in the job file), with this wall-clock
limit and this CPU-time limit for all the run's processes together (seconds)"""
_DONE = struct.Struct("=iB?ddqqdd")
"""forker -> controller: wait status of the run's first process, why it was killed (KILL_*),
whether some process could not be reaped in time, the user and system CPU of every process
of the run together, maxrss, minflt, wall, and the first process's CPU time on the clock its
CPU-time limits run on (``limit_clock``)"""
KILL_NONE, KILL_WALL, KILL_CPU = 0, 1, 2
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def limit_clock(pid: int) -> int:
    """The clock id of process ``pid``'s ``CPUCLOCK_PROF`` (the kernel's ``MAKE_PROCESS_CPUCLOCK``):
    its user plus system time as the scheduler tick samples it, the clock ``ITIMER_PROF`` and
    ``RLIMIT_CPU`` fire on. The CPU time ``wait4`` and ``time.process_time`` report is the
    scheduler's exact runtime instead; on a loaded machine the tick's samples run ahead of it
    (by ~9% measured), so a run its timer ended can report less CPU time than its budget.
    Readable while the process is a zombie, before it is reaped."""
    return ((~pid) << 3) | 0


class _ForkerControl:
    """The controller's side of the forker (``Worker`` is one): it never forks a candidate
    itself (see ``Worker``)."""

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


def _forker(worker, cmd_sock, done_fd: int) -> None:
    """The forker's loop: one child per command, supervised, swept, reported (``worker``:
    the controller, a ``_controller.Worker``, as it was when it forked the forker).

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
    # The runs hold none of the harness's module names (the boot registered them for the
    # modules' imports of one another): a program's ``import execrl`` finds what a plain
    # interpreter finds there, the hidden directory of the installed package.
    for name in [n for n in sys.modules if n == "execrl" or n.startswith("execrl.")]:
        del sys.modules[name]
    worker.tid = os.getpid()
    worker.children_fd = os.open("/proc/thread-self/children", os.O_RDONLY | os.O_CLOEXEC)
    os.write(done_fd, b"P" if in_pid_ns else b"N")
    if worker.seccomp is not None:
        install_seccomp(worker.seccomp, worker.cfg.get("seccomp_syscall"))  # once, here: every run inherits it
    # the depth of ``_run_served`` in a run: this frame, ``child_main``, ``_child``, itself
    worker.served_limit = _served_limit(_stack_depth(sys._getframe()) + 3)
    write, fork, monotonic, close = os.write, os.fork, time.monotonic, os.close
    killpg, clock_gettime = os.killpg, time.clock_gettime
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
        try:  # before the sweep reaps it (it is a zombie, or still running if killed)
            limit_cpu = clock_gettime(limit_clock(pid))
        except OSError:
            limit_cpu = 0.0
        try:
            killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        status, utime, stime, maxrss, minflt, stuck = worker.sweep(first=pid)
        write(done_fd, pack_done(status, reason, stuck, utime, stime, maxrss, minflt, wall_used, limit_cpu))


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
