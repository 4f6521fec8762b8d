"""The controller's link to the judge process (``_JudgeLink``, a part of
``_controller.Worker``): forking it, sending it jobs, reading its answers; and the judge
process's own start (``_judge_process``) up to the judge's modules (``_judge_loop``).
"""

from __future__ import annotations

import builtins
import gc
import json
import marshal
import os
import resource
import select
import signal
import sys
import time

import _socket

from execrl.sandbox._exchange import _FD, _JUDGE_CPU, _LEN, PeerGone, _os_exit
from execrl.sandbox._files import _read_memfd
from execrl.sandbox._forker import REAP_GRACE_S
from execrl.sandbox._isolation import (CLONE_NEWNS, CLONE_NEWPID, MNT_DETACH, MS_REC, MS_SLAVE, PR_SET_PDEATHSIG,
                                       _check, _libc, _mount, _prctl, install_seccomp)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``


class _JudgeLink:
    """The controller's side of the judge process (``Worker`` is one)."""

    def start_judge(self) -> None:
        """Fork the judge process (see ``_judge_loop``): it holds the tests and runs them,
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


def _judge_process(worker, fd: int) -> None:
    """The judge process (forked from the controller): runs the judge's loop (``_judge_loop``). It holds
    the tests, expected values included, so it runs as a uid of its own (not the runs'),
    outside the runs' PID namespace, with every other file descriptor closed."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != worker.tid:  # the controller died before PR_SET_PDEATHSIG
        return
    modules = marshal.loads(_read_memfd(worker.judge_code_fd, 1 << 30)[0])
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
    for name, code in modules:  # in the order they import one another (``executor.JUDGE_MODULES``)
        module = sys.modules["execrl.sandbox." + name] = type(sys)("execrl.sandbox." + name)
        module.__file__ = code.co_filename
        exec(code, module.__dict__)
    del modules, code
    gc.freeze()  # the judge's own objects, which live as long as it does, out of every collection
    module._STATM[:] = [statm, resource.getpagesize(), resource.getrlimit(resource.RLIMIT_AS)[1]]
    module._RUN_DIR[:] = [run_dir] if run_dir is not None else []
    module.judge_main(3, worker.cfg)


def _judge_view(worker) -> str | None:
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
