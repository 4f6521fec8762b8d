"""The executor: a pool of prefork sandbox workers, safe to share between threads."""

from __future__ import annotations

import json
import logging
import marshal
import os
import queue
import secrets
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execrl.problems import Problem
from execrl.sandbox._exchange import MACHINE_FREE_ENV
from execrl.sandbox.host_judge import judge
from execrl.sandbox.limits import ExecutionLimits, candidate_wall
from execrl.sandbox.result import ExecutionResult
from execrl.sandbox.seccomp import build_filter, seccomp_syscall
from execrl.sandbox.prepared import Prepared, prepare

log = logging.getLogger(__name__)

SANDBOX_DIR = os.path.dirname(os.path.abspath(__file__))
WORKER_MODULES = ("_exchange", "_isolation", "_child_refs", "_child_program", "_child_exit", "_child_kept",
                  "_child_side", "_child", "_files", "_forker", "_judge_link", "_controller", "_worker")
"""The worker's modules, each after those it imports (the boot runs them in this order)."""
JUDGE_MODULES = ("_judge_compare", "_judge_generators", "_judge_proxies", "_judge_side", "_judge_tests",
                 "_judge_loop")
"""The judge process's modules, in the same order; they import the worker's too."""
_BOOT = ("import marshal, os, sys\n"
         "fd = int(sys.argv.pop())\n"
         "config, modules, judge = marshal.loads(os.pread(fd, os.fstat(fd).st_size, 0))\n"
         "os.close(fd)\n"
         "sys.argv[:] = ['solution.py']\n"
         "sys.orig_argv[:] = [sys.executable, 'solution.py']\n"
         "for name in ('execrl', 'execrl.sandbox'):\n"
         "    sys.modules[name] = type(sys)(name)\n"
         "    sys.modules[name].__path__ = []\n"
         "for name, code in modules:\n"
         "    module = sys.modules['execrl.sandbox.' + name] = type(sys)('execrl.sandbox.' + name)\n"
         "    module.__file__ = code.co_filename\n"
         "    exec(code, module.__dict__)\n"
         "module.EXECRL_CONFIG, module.EXECRL_JUDGE = config, judge\n"
         "del fd, config, modules, judge, name, code\n"
         "module.main()\n")
"""Worker start-up: run the worker's modules (``WORKER_MODULES``) from code objects compiled
here, registered under their names (the packages above them are empty stand-ins: the worker
runs none of the package's ``__init__`` code), then ``_worker.main``. Compiling the files in
the worker would leave ~1.5 MB of parser memory in every worker (fragmented, never
returned), and every fork of it would pay for those pages. The configuration travels in the
same file, so that nothing of it is on the command line (a candidate's ``sys.argv`` is that
of a plain ``python solution.py``)."""
_worker_code: Any = None
_judge_code: Any = None
_LEN = struct.Struct(">I")

DEFAULT_PRELOAD = ("collections", "heapq", "itertools", "math", "functools", "bisect", "string",
                   "operator", "copy", "re")
"""Modules imported by each worker before it forks candidates: free for candidates that use
them, but each one makes every fork a little slower (fork cost grows with worker memory)."""

UID_RANGE = (1_000_000, 1_000_000 + (1 << 22))
"""Unprivileged uids for sandboxed programs when running as root: one random uid per
worker, so candidates in different workers (or executors) cannot signal each other and
RLIMIT_NPROC counts only one worker's processes."""

FALLBACK_UID = 65534
PIPELINE_DEPTH = 2
START_TIMEOUT_S = 120.0
"""A worker must be ready (isolation, warm-up, self-test) within this time."""
REPLY_GRACE_S = 20.0
"""A reply may arrive this long after its candidate's wall-clock budget (compiling, the
forker's reaping grace, reading outputs): beyond, the worker is considered stuck and
replaced."""


class WorkerStartError(RuntimeError):
    """A sandbox worker failed to start or failed its self-test."""


def require_linux(platform: str | None = None) -> None:
    """The sandbox is built of Linux's own parts (namespaces, seccomp, prctl, /proc): elsewhere it
    cannot isolate a program, so it refuses to start rather than run one unconfined."""
    platform = platform or sys.platform
    if platform != "linux":
        raise WorkerStartError(
            f"the sandbox runs generated programs only on Linux (namespaces, seccomp, prctl), and this is "
            f"{platform!r}: run the workflow on a Linux machine or in a Linux container or VM"
        )


def _uid_mapped(uid: int) -> bool:
    try:
        with open("/proc/self/uid_map") as fh:
            for line in fh:
                inside, _outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return True
    except OSError:
        return False
    return False


def _pick_uid() -> int:
    uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
    return uid if _uid_mapped(uid) else FALLBACK_UID


def _compile_modules(names: tuple[str, ...]) -> list[tuple[str, Any]]:
    compiled = []
    for name in names:
        path = os.path.join(SANDBOX_DIR, name + ".py")
        with open(path, encoding="utf-8") as fh:
            compiled.append((name, compile(fh.read(), path, "exec", dont_inherit=True)))
    return compiled


def _worker_code_fd(cfg: dict[str, Any]) -> int:
    """A memfd holding the configuration and the code of the worker's modules and of the
    judge's (which only the worker's judge process runs), compiled once per process. The
    judge's code stays marshalled (bytes) in the worker: its code objects would be memory
    every fork of a run copies."""
    global _worker_code, _judge_code
    if _worker_code is None:
        _worker_code = _compile_modules(WORKER_MODULES)
        _judge_code = marshal.dumps(_compile_modules(JUDGE_MODULES))
    fd = os.memfd_create("execrl-worker-code", os.MFD_CLOEXEC)
    view = memoryview(marshal.dumps((json.dumps(cfg), _worker_code, _judge_code)))
    while view:
        view = view[os.write(fd, view):]
    return fd


class _WorkerHandle:
    def __init__(self, cfg: dict[str, Any], cache_size: int) -> None:
        cfg = dict(cfg, uid=_pick_uid(), judge_uid=_pick_uid())  # the judge process runs as a uid of its own
        self.sandbox_uid: int | None = None
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "PYTHONHASHSEED": str(cfg["hash_seed"]), "PYTHONDONTWRITEBYTECODE": "1", **MACHINE_FREE_ENV}
        code_fd = _worker_code_fd(cfg)
        try:
            args = [sys.executable, "-s"] + (["-P"] if sys.version_info >= (3, 11) else []) + [
                "-c", _BOOT, str(code_fd)]
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd="/",
                                         close_fds=True, pass_fds=(code_fd,), start_new_session=True)
        finally:
            os.close(code_fd)
        self.fd = self.proc.stdout.fileno()
        self.buf = bytearray()
        self.known: OrderedDict[str, None] = OrderedDict()
        self.cache_size = cache_size
        self.report: dict[str, Any] = {}
        self.forker_pid: int | None = None
        self.judge_pid: int | None = None  # the worker's judge process (assert/call tests, compiles), once started
        self.jobs = 0

    def wait_ready(self) -> None:
        try:
            header, _ = self.recv(time.monotonic() + START_TIMEOUT_S)
        except EOFError:
            code = self.proc.wait()
            raise WorkerStartError(f"sandbox worker exited during start-up (code {code})") from None
        if not header.get("ready"):
            raise WorkerStartError(header.get("error", "sandbox worker failed to start"))
        self.report = header["isolation"]
        self.forker_pid = header.get("forker_pid")  # the worker's own child, which forks the candidates
        if self.report.get("mode") == "root" and self.report.get("uid") not in (None, 0):
            self.sandbox_uid = int(self.report["uid"])

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass")
        self.proc.stdin.write(_LEN.pack(len(data)) + data)
        self.proc.stdin.flush()

    def recv(self, deadline: float) -> tuple[dict[str, Any], list[bytes]]:
        """One reply; raises EOFError if the worker closes its channel and TimeoutError if
        the reply is not complete by ``deadline`` (the worker is then replaced)."""
        head = self._read(4, deadline)
        (n,) = _LEN.unpack(head)
        header = json.loads(self._read(n, deadline))
        lengths = [run[f"{key}_len"] for run in header.get("runs", ()) for key in ("records", "stdout", "stderr")]
        data = self._read(sum(lengths), deadline) if lengths else b""
        blobs, off = [], 0
        for length in lengths:
            blobs.append(data[off:off + length])
            off += length
        return header, blobs

    def _read(self, n: int, deadline: float) -> bytes:
        buf = self.buf
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                raise TimeoutError("sandbox worker did not answer in time")
            chunk = os.read(self.fd, max(n - len(buf), 1 << 16))
            if not chunk:
                raise EOFError("sandbox worker closed its channel")
            buf += chunk
        data = bytes(buf[:n])
        del buf[:n]
        return data

    def submit(self, prepared: Prepared, code: str, limits: dict[str, Any], force_spec: bool = False) -> None:
        """Queue one job on the worker (replies come back in submission order)."""
        msg: dict[str, Any] = {"key": prepared.key, "code": code, "limits": limits}
        if prepared.key in self.known and not force_spec:
            self.known.move_to_end(prepared.key)
        else:
            msg["spec"] = prepared.child_spec
            self.known[prepared.key] = None
            self.known.move_to_end(prepared.key)
            while len(self.known) > self.cache_size:
                self.known.popitem(last=False)
        self.send(msg)

    def collect(self, deadline: float) -> tuple[dict, list[bytes]]:
        header, blobs = self.recv(deadline)
        self.jobs += 1
        if "judge_pid" in header:
            self.judge_pid = header["judge_pid"]
        return header, blobs

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 2.0) -> None:
        proc = self.proc
        if proc.poll() is None:
            try:
                self.send({"op": "exit"})
                proc.stdin.close()
                proc.wait(timeout)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:  # unkillable for now: its uid's processes are killed next
                pass
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


def _crashed(n: int) -> ExecutionResult:
    msg = "the sandbox worker died twice while running this program"
    return ExecutionResult("error", 0, n, [{"index": i, "status": "not_run", "error_type": None, "message": None}
                                           for i in range(n)], "WorkerCrashed", msg, f"WorkerCrashed: {msg}")


def killed_from_outside(header: dict[str, Any]) -> str | None:
    """Why a worker's reply shows a sandbox process killed by something other than the
    candidate's own limits (None when it does not): the judge process died without its
    CPU-time timer (``SIGPROF``) ending it, or a run was killed by ``SIGKILL`` that neither
    the forker's CPU-time or wall-clock kill nor ``RLIMIT_CPU``'s hard limit sent (those are
    the run's ``timeout``). The kernel's OOM killer and an administrator's ``kill -9`` look
    like this; so does a program that sends ``SIGKILL`` to itself, which the retry turns into
    its verdict on the second attempt. A memory limit never kills (``RLIMIT_AS`` makes
    allocations fail: ``MemoryError``), ``RLIMIT_FSIZE`` sends ``SIGXFSZ``."""
    report = header.get("judge")
    if isinstance(report, dict) and report.get("died") == "crashed":
        return "the judge process died"
    for run in header.get("runs", ()):
        if run.get("signal") == signal.SIGKILL and not run.get("timeout"):
            return "a run was killed by SIGKILL"
    return None


def _unjudgeable(n: int, e: Exception) -> ExecutionResult:
    msg = f"the tests of this problem could not be prepared: {type(e).__name__}: {e}"[:600]
    return ExecutionResult("error", 0, n, [{"index": i, "status": "not_run", "error_type": None, "message": None}
                                           for i in range(n)], "PrepareError", msg, f"PrepareError: {msg}")


def kill_uid_processes(uid: int | None) -> int:
    """Kill every process running as ``uid`` (a dead worker's sandbox uid)."""
    if uid is None or os.geteuid() != 0 or uid in (0, FALLBACK_UID, os.getuid()):
        return 0
    killed = 0
    for _round in range(20):
        found = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), 9)
                    found += 1
            except OSError:
                pass
        killed += found
        if not found:
            break
        time.sleep(0.01)
    return killed


def _shutdown(handles: list[_WorkerHandle]) -> None:
    for h in list(handles):
        try:
            h.close(timeout=0.5)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
        try:
            kill_uid_processes(h.sandbox_uid)
        except Exception:  # noqa: BLE001
            pass


class Executor:
    """Runs untrusted programs against a problem's tests in a pool of sandbox workers.

    Each worker is a fresh interpreter that sets up its isolation once (private mount and
    network namespaces, a read-only private root, an unprivileged uid) and then forks one
    child per candidate; the child gets its own session, resource limits and temp dir.
    ``run`` and ``run_batch`` may be called from several threads at once; a worker that
    dies is replaced and the candidate retried once.

    Args:
        workers: number of worker processes (parallel candidates).
        limits: default :class:`ExecutionLimits` (``run`` can override per call).
        isolation: ``"auto"`` (strongest available), ``"root"``, ``"userns"`` or ``"none"``.
        network: allow network access (no private network namespace).
        preload: modules imported by each worker before forking (see ``DEFAULT_PRELOAD``).
        hash_seed: ``PYTHONHASHSEED`` of the sandboxed programs (fixed for reproducible
            set/dict ordering; ``"random"`` to randomize).
        drop_privileges: when running as root, run candidates as an unprivileged uid.
        tmpfs_mb: size of each worker's private /tmp (and private root) tmpfs.
        cache_size: problems whose compiled tests each worker keeps (sent once per worker;
            the cache lives in the worker's controller, whose size does not affect fork cost).
    """

    def __init__(self, workers: int = 2, limits: ExecutionLimits | None = None, *, isolation: str = "auto",
                 network: bool = False, preload: Iterable[str] = DEFAULT_PRELOAD, hash_seed: int | str = 0,
                 drop_privileges: bool = True, tmpfs_mb: int = 256, cache_size: int = 1024) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if isolation not in ("auto", "root", "userns", "none"):
            raise ValueError(f"unknown isolation mode {isolation!r}")
        require_linux()
        preload = list(preload)
        self._options = {"workers": workers, "limits": limits, "isolation": isolation, "network": network,
                         "preload": preload, "hash_seed": hash_seed, "drop_privileges": drop_privileges,
                         "tmpfs_mb": tmpfs_mb, "cache_size": cache_size}  # fmt: skip
        self.workers = workers
        self.limits = limits or ExecutionLimits()
        seccomp = build_filter()
        self._cfg = {"isolation": isolation, "network": network, "preload": list(preload),
                     "hash_seed": hash_seed, "drop_privileges": drop_privileges, "tmpfs_mb": tmpfs_mb,
                     "cache_size": cache_size, "seccomp": seccomp.hex() if seccomp else None,
                     "seccomp_syscall": seccomp_syscall()}
        self._cache_size = cache_size
        self._idle: queue.Queue[_WorkerHandle] = queue.Queue()
        self._handles: list[_WorkerHandle] = []
        self._lock = threading.Lock()
        self._prepared: dict[int, tuple[Problem, Prepared, tuple]] = {}
        self._closed = False
        self.respawns = 0
        self.retries = 0
        """Candidates run again because a sandbox process died under them (the worker, its
        forker, its judge or the run killed from outside): each is retried once."""
        self._finalizer = weakref.finalize(self, _shutdown, self._handles)
        started = [self._spawn() for _ in range(workers)]
        try:
            for h in started:
                h.wait_ready()
        except BaseException:
            _shutdown(self._handles)
            raise
        for h in started:
            self._idle.put(h)
        self.isolation: dict[str, Any] = started[0].report
        if (self.isolation.get("mode") != "root" or not self.isolation.get("private_root")
                or not self.isolation.get("seccomp")):
            log.warning("sandbox isolation is reduced: %s", self.isolation)

    # -- lifecycle ------------------------------------------------------------------------
    def sibling(self) -> Executor:
        """Another executor with this one's settings and workers of its own: a program run in each
        ran in two processes that share no address layout, uid or earlier runs, however either
        pool scheduled it. The caller closes it."""
        return Executor(**self._options)

    def _spawn(self) -> _WorkerHandle:
        h = _WorkerHandle(self._cfg, self._cache_size)
        with self._lock:
            self._handles.append(h)
        return h

    def _replace(self, dead: _WorkerHandle) -> _WorkerHandle:
        dead.close(timeout=0.2)
        kill_uid_processes(dead.sandbox_uid)
        with self._lock:
            if dead in self._handles:
                self._handles.remove(dead)
            if self._closed:
                raise RuntimeError("executor is closed")
            self.respawns += 1
        h = self._spawn()
        h.wait_ready()
        return h

    def close(self) -> None:
        self._closed = True
        _shutdown(self._handles)
        with self._lock:
            self._handles.clear()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------------
    def _prepare(self, problem: Problem, code: str) -> Prepared:
        # cached per Problem object; recomputed if its tests were replaced or grew/shrank
        hit = self._prepared.get(id(problem))
        fingerprint = (problem.test_type, id(problem.tests), len(problem.tests), problem.setup_code,
                       problem.entry_point)
        if hit is not None and hit[0] is problem and hit[2] == fingerprint:
            prepared = hit[1]
        else:
            prepared = prepare(problem)
            with self._lock:
                if len(self._prepared) > 200_000:
                    self._prepared.clear()
                self._prepared[id(problem)] = (problem, prepared, fingerprint)
        return prepared

    def run(self, problem: Problem, code: str, limits: ExecutionLimits | None = None) -> ExecutionResult:
        """Run ``code`` against ``problem``'s tests and return the verdict."""
        return self.run_batch([(problem, code)], limits=limits)[0]

    def run_batch(self, items: Iterable[tuple[Problem, str]], progress: bool = False,
                  limits: ExecutionLimits | None = None, desc: str = "executing") -> list[ExecutionResult]:
        """Run many (problem, code) pairs in parallel; results keep the input order.

        Each worker gets up to ``PIPELINE_DEPTH`` jobs in flight, so it never waits for this
        process to judge the previous result before starting the next program.
        """
        if self._closed:
            raise RuntimeError("executor is closed")
        items = list(items)
        for _problem, code in items:
            if not isinstance(code, str):
                raise TypeError(f"code must be a str, not {type(code).__name__}")
        lim = (limits or self.limits).worker_limits()
        results: list[ExecutionResult | None] = [None] * len(items)
        if not items:
            return []
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=desc, unit="prog")
        pending = iter(range(len(items)))
        pending_lock = threading.Lock()

        def take() -> int | None:
            with pending_lock:
                return next(pending, None)

        def done(i: int, result: ExecutionResult) -> None:
            results[i] = result
            if bar is not None:
                bar.update(1)

        n_drivers = min(self.workers, len(items))
        try:
            if n_drivers == 1:
                self._drive(items, lim, take, done)
            else:
                with ThreadPoolExecutor(max_workers=n_drivers) as pool:
                    futures = [pool.submit(self._drive, items, lim, take, done) for _ in range(n_drivers)]
                    for f in futures:
                        f.result()
        finally:
            if bar is not None:
                bar.close()
        return results  # type: ignore[return-value]

    def _drive(self, items, lim, take, done) -> None:
        """Feed one worker from the shared queue of items, pipelined."""
        handle = self._idle.get()
        inflight: deque[tuple[int, Prepared, int]] = deque()  # (item index, prepared, attempt)
        retry: deque[tuple[int, int]] = deque()
        resend: set[int] = set()
        try:
            while True:
                while len(inflight) < PIPELINE_DEPTH:
                    if retry:
                        i, attempt = retry.popleft()
                    else:
                        nxt = take()
                        if nxt is None:
                            break
                        i, attempt = nxt, 0
                    problem, code = items[i]
                    try:
                        prepared = self._prepare(problem, code)
                    except Exception as e:  # noqa: BLE001 - a problem the judge cannot use: this item's error
                        done(i, _unjudgeable(len(problem.tests), e))
                        continue
                    try:
                        handle.submit(prepared, code, lim, force_spec=i in resend)
                    except (OSError, ValueError):
                        inflight.append((i, prepared, attempt))
                        break
                    inflight.append((i, prepared, attempt))
                if not inflight:
                    return
                i, prepared, attempt = inflight[0]
                try:
                    budget = candidate_wall(lim, prepared.n_tests) if prepared.test_type == "stdio" else lim["wall"]
                    header, blobs = handle.collect(time.monotonic() + budget + REPLY_GRACE_S)
                    if "worker_error" in header:
                        raise RuntimeError(header["worker_error"])
                except (EOFError, OSError, ValueError, RuntimeError) as e:  # TimeoutError is an OSError
                    # The worker died, failed or hung: replace it and resubmit what was in flight.
                    # Only the job it was running counts the attempt: the ones queued behind it
                    # did nothing wrong.
                    log.warning("sandbox worker failed (%s); replacing it", e)
                    handle = self._replace(handle)
                    for k, (j, _prep_j, att_j) in enumerate(inflight):
                        att_j += k == 0
                        if att_j >= 2:
                            done(j, _crashed(len(items[j][0].tests)))
                        else:
                            if k == 0:
                                self._count_retry()
                            retry.append((j, att_j))
                    inflight.clear()
                    continue
                inflight.popleft()
                if header.get("need_spec"):  # the worker evicted the problem from its cache
                    resend.add(i)
                    retry.appendleft((i, attempt))
                    continue
                why = killed_from_outside(header) if attempt == 0 else None
                if why is not None:
                    # Not a verdict: run the candidate once more. The worker answered, so it
                    # stays; the retry gets a fresh run (every run is a fresh fork) and, if the
                    # judge died, a fresh judge process (the worker starts one when it needs it).
                    # A second death is the candidate's verdict.
                    log.warning("sandbox process killed from outside the candidate's limits (%s); "
                                "retrying the candidate", why)
                    self._count_retry()
                    retry.appendleft((i, 1))
                    continue
                done(i, judge(prepared, header, blobs, lim))
        except BaseException:
            # interrupted mid-flight: the worker's state is unknown, replace it
            handle = self._replace(handle)
            raise
        finally:
            self._idle.put(handle)

    def _count_retry(self) -> None:
        with self._lock:
            self.retries += 1

    def stats(self) -> dict[str, Any]:
        return {"workers": self.workers, "respawns": self.respawns, "retries": self.retries,
                "jobs": sum(h.jobs for h in self._handles), "isolation": self.isolation,
                "time": time.time()}
