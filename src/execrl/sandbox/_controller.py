"""The worker's controller (``Worker``): talks to the executor, compiles, prepares runs,
reads results; the forker it forks once (``_forker``), which forks the runs; the judge
process it forks (``_judge_process``), which runs the judge's modules.
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
import struct
import sys
import time

import _socket

from execrl.sandbox._child import (SOCK_FD, _emit, _run_served, _run_stdio, _served_limit, _stack_depth,
                                   _write_program_file, compile_candidate)
from execrl.sandbox._exchange import _FD, _JUDGE_CPU, _LEN, RESULT_FD, PeerGone, _os_exit, _text, cpu_timer
from execrl.sandbox._isolation import (CLONE_NEWNS, CLONE_NEWPID, MNT_DETACH, MS_NODEV, MS_NOEXEC, MS_NOSUID,
                                       MS_REC, MS_SLAVE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS,
                                       PR_SET_PDEATHSIG, SCRATCH_DIRS, _check, _harness_dirs, _libc, _mount,
                                       _prctl, _within, fresh_scratch, install_seccomp, setup_isolation)

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

MAX_RECORD_BYTES = 4 << 20
"""Cap on everything one run reports (its result records): beyond it the run is an error."""
MAX_REPLY_BYTES = 32 << 20
"""Cap on what one candidate's reply carries over all its runs (stdio: outputs of every
test); tests that would start beyond it are not run."""
REAP_GRACE_S = 5.0
"""How long the forker may take to kill and reap a run's processes before it reports the
worker as stuck (the executor then replaces the worker and kills everything of its uid)."""


# --------------------------------------------------------------------------------------
# Worker side: fork, supervise, sweep, clean up
# --------------------------------------------------------------------------------------

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
        self.judge_code_fd = -1  # set by main(): a memfd holding the judge's marshalled modules
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
        status, reason, stuck, utime, stime, maxrss, minflt, wall_used, limit_cpu = _DONE.unpack(done)
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
        # a run whose CPU time reached its budget timed out however it ended: the program may
        # catch, block or ignore the timer's signal and exit 0 after it (the timer fires past
        # the budget: ``CPU_TIMER_SLACK``). By either of the kernel's clocks: the timer's own
        # (``limit_clock``) has passed the budget whenever the timer fired, the reported one
        # may lag it past the slack on a loaded machine.
        timed_out = reason != KILL_NONE or sig in (signal.SIGPROF, signal.SIGXCPU) or cpu >= timeout or (
            limit_cpu >= timeout) or (sig == signal.SIGKILL and cpu >= hard_cpu - 0.05)
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
        signal.setitimer(signal.ITIMER_PROF, cpu_timer(timeout))
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


def _pwrite_all(fd: int, data: bytes) -> None:
    off = 0
    while off < len(data):
        off += os.pwrite(fd, data[off:off + (1 << 20)], off)


def _judge_process(worker: Worker, fd: int) -> None:
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


def _read_exact(fd: int, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
