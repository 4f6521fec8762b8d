"""The worker's controller (``Worker``): talks to the executor, compiles, prepares runs,
reads results. Its parts: the forker it forks once, which forks the runs (``_forker``), and
the judge process it forks, which runs the judge's modules (``_judge_link``).
"""

from __future__ import annotations

import builtins
import json
import marshal
import os
import resource
import select
import signal
import sys
import time

import _socket

from execrl.sandbox._child import SOCK_FD, _run_served, _run_stdio
from execrl.sandbox._child_exit import PROGRAM_FILE_MARKERS, _write_program_file
from execrl.sandbox._child_program import _emit, compile_candidate
from execrl.sandbox._exchange import _FD, MACHINE_FREE_ENV, RESULT_FD, PeerGone, _os_exit, _text, cpu_timer
from execrl.sandbox._files import _pwrite_all, _read_exact, _read_memfd, _rmtree
from execrl.sandbox._forker import (_CMD, _DONE, KILL_CPU, KILL_NONE, KILL_WALL, REAP_GRACE_S, _count_own_processes,
                                    _ForkerControl)
from execrl.sandbox._isolation import (PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, SCRATCH_DIRS,
                                       _harness_dirs, _prctl, _within, fresh_scratch, setup_isolation)
from execrl.sandbox._judge_link import _JudgeLink

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``

MAX_RECORD_BYTES = 4 << 20
"""Cap on everything one run reports (its result records): beyond it the run is an error."""
MAX_REPLY_BYTES = 32 << 20
"""Cap on what one candidate's reply carries over all its runs (stdio: outputs of every
test); tests that would start beyond it are not run."""


class Worker(_ForkerControl, _JudgeLink):
    """The worker's controller: talks to the executor, compiles, prepares runs, reads results.

    It never forks a candidate itself. Right after start-up it forks a *forker* (see
    ``_forker``), which then forks one child per run and does nothing else. A fork
    write-protects every page of the forking process, and each page that process writes
    afterwards costs a fault (several microseconds on VMs): the controller's per-job work
    (JSON, compiling, replies) would pay that on ~200 pages per candidate, the forker's tight
    loop touches a few dozen. What concerns the forker (forking it, sweeping a run's
    processes) is ``_ForkerControl``'s, what concerns the judge process ``_JudgeLink``'s.
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
        # RUN_STACK_BYTES, or a lower hard limit: set by machine_free_process before the worker starts
        self.run_stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
        if self.private_root:
            self.workdir = "/tmp/run"
            # Group-writable files (umask 002, inherited by the forker, the runs and the
            # judge): the judge process works in the run's directory with the run's group
            # (see ``_judge_process``), so that a test and the program share their files.
            os.umask(0o002)
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.workdir, "TMPDIR": self.workdir,
                   "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "USER": "sandbox",
                   "PYTHONHASHSEED": str(cfg.get("hash_seed", 0)),
                   "PYTHONIOENCODING": "utf-8", **MACHINE_FREE_ENV}
            os.environ.clear()
            os.environ.update(env)
            self.empty_scratch = self._scratch_state()
        else:
            self.workdir = None

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
                   (resource.RLIMIT_CPU, (soft_cpu, soft_cpu + 1)),
                   (resource.RLIMIT_STACK, (self.run_stack,) * 2))
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
        # ``python solution.py`` puts the script's directory first on sys.path (a module the
        # program writes beside itself imports); the harness's interpreter runs with -P
        sys.path.insert(0, os.getcwd())
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
        if any(marker in code for marker in PROGRAM_FILE_MARKERS):
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
