"""The executor: a pool of prefork sandbox workers, safe to share between threads."""

from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execrl.problems import Problem
from execrl.sandbox.judge import Prepared, defined_names, judge, prepare, problem_key
from execrl.sandbox.limits import ExecutionLimits
from execrl.sandbox.result import ExecutionResult

log = logging.getLogger(__name__)

WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")
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


class WorkerStartError(RuntimeError):
    """A sandbox worker failed to start or failed its self-test."""


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


class _WorkerHandle:
    def __init__(self, cfg: dict[str, Any], cache_size: int) -> None:
        cfg = dict(cfg, uid=_pick_uid())
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "PYTHONHASHSEED": str(cfg["hash_seed"]), "PYTHONDONTWRITEBYTECODE": "1"}
        args = [sys.executable, "-s"] + (["-P"] if sys.version_info >= (3, 11) else []) + [WORKER_SCRIPT,
                                                                                          json.dumps(cfg)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd="/",
                                     close_fds=True, start_new_session=True)
        self.known: OrderedDict[str, None] = OrderedDict()
        self.cache_size = cache_size
        self.report: dict[str, Any] = {}
        self.jobs = 0

    def wait_ready(self) -> None:
        try:
            header, _ = self.recv()
        except EOFError:
            code = self.proc.wait()
            raise WorkerStartError(f"sandbox worker exited during start-up (code {code})") from None
        if not header.get("ready"):
            raise WorkerStartError(header.get("error", "sandbox worker failed to start"))
        self.report = header["isolation"]

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass")
        self.proc.stdin.write(_LEN.pack(len(data)) + data)
        self.proc.stdin.flush()

    def recv(self) -> tuple[dict[str, Any], list[bytes]]:
        head = self._read(4)
        (n,) = _LEN.unpack(head)
        header = json.loads(self._read(n))
        blobs = []
        for run in header.get("runs", ()):
            run_blobs = []
            for key in ("records", "stdout", "stderr"):
                run_blobs.append(self._read(run[f"{key}_len"]))
            blobs += run_blobs
        return header, blobs

    def _read(self, n: int) -> bytes:
        data = self.proc.stdout.read(n)
        if len(data) != n:
            raise EOFError("sandbox worker closed its channel")
        return data

    def request(self, prepared: Prepared, code: str, limits: dict[str, Any]) -> tuple[dict, list[bytes]]:
        msg: dict[str, Any] = {"key": prepared.key, "code": code, "limits": limits}
        if prepared.key in self.known:
            self.known.move_to_end(prepared.key)
        else:
            msg["spec"] = prepared.child_spec
            self.known[prepared.key] = None
            while len(self.known) > self.cache_size:
                self.known.popitem(last=False)
        self.send(msg)
        header, blobs = self.recv()
        if header.get("need_spec"):
            msg["spec"] = prepared.child_spec
            self.send(msg)
            header, blobs = self.recv()
        self.jobs += 1
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
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


def _shutdown(handles: list[_WorkerHandle]) -> None:
    for h in list(handles):
        try:
            h.close(timeout=0.5)
        except Exception:  # noqa: BLE001 - best effort at exit
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
    """

    def __init__(self, workers: int = 2, limits: ExecutionLimits | None = None, *, isolation: str = "auto",
                 network: bool = False, preload: Iterable[str] = DEFAULT_PRELOAD, hash_seed: int | str = 0,
                 drop_privileges: bool = True, tmpfs_mb: int = 256, cache_size: int = 256) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if isolation not in ("auto", "root", "userns", "none"):
            raise ValueError(f"unknown isolation mode {isolation!r}")
        self.workers = workers
        self.limits = limits or ExecutionLimits()
        self._cfg = {"isolation": isolation, "network": network, "preload": list(preload),
                     "hash_seed": hash_seed, "drop_privileges": drop_privileges, "tmpfs_mb": tmpfs_mb,
                     "cache_size": cache_size}
        self._cache_size = cache_size
        self._idle: queue.Queue[_WorkerHandle] = queue.Queue()
        self._handles: list[_WorkerHandle] = []
        self._lock = threading.Lock()
        self._prepared: dict[int, tuple[Problem, Prepared, str]] = {}
        self._variants: dict[tuple[str, frozenset[str]], Prepared] = {}
        self._closed = False
        self.respawns = 0
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
        if self.isolation.get("mode") != "root" or not self.isolation.get("private_root"):
            log.warning("sandbox isolation is reduced: %s", self.isolation)

    # -- lifecycle ------------------------------------------------------------------------
    def _spawn(self) -> _WorkerHandle:
        h = _WorkerHandle(self._cfg, self._cache_size)
        with self._lock:
            self._handles.append(h)
        return h

    def _replace(self, dead: _WorkerHandle) -> _WorkerHandle:
        dead.close(timeout=0.2)
        with self._lock:
            if dead in self._handles:
                self._handles.remove(dead)
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
        hit = self._prepared.get(id(problem))
        if hit is not None and hit[0] is problem and hit[2] == problem_key(problem):
            prepared = hit[1]
        else:
            prepared = prepare(problem)
            with self._lock:
                if len(self._prepared) > 200_000:
                    self._prepared.clear()
                self._prepared[id(problem)] = (problem, prepared, prepared.key)
        if prepared.judge_names:
            shadowed = defined_names(code, prepared.judge_names)
            if shadowed:
                variant = self._variants.get((prepared.key, shadowed))
                if variant is None:
                    variant = prepare(problem, shadowed)
                    with self._lock:
                        if len(self._variants) > 10_000:
                            self._variants.clear()
                        self._variants[(prepared.key, shadowed)] = variant
                return variant
        return prepared

    def run(self, problem: Problem, code: str, limits: ExecutionLimits | None = None) -> ExecutionResult:
        """Run ``code`` against ``problem``'s tests and return the verdict."""
        if self._closed:
            raise RuntimeError("executor is closed")
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        lim = (limits or self.limits).to_dict()
        prepared = self._prepare(problem, code)
        handle = self._idle.get()
        reply = blobs = None
        try:
            for attempt in range(2):
                try:
                    reply, blobs = handle.request(prepared, code, lim)
                    if "worker_error" in reply:
                        raise RuntimeError(reply["worker_error"])
                    break
                except (EOFError, OSError, ValueError, RuntimeError) as e:
                    log.warning("sandbox worker failed (%s); replacing it", e)
                    handle = self._replace(handle)
                    reply = None
        except BaseException:
            # interrupted mid-request: the worker's state is unknown, replace it
            handle = self._replace(handle)
            raise
        finally:
            self._idle.put(handle)
        if reply is None:
            n = len(problem.tests)
            return ExecutionResult("error", 0, n, [{"index": i, "status": "not_run", "error_type": None,
                                                    "message": None} for i in range(n)],
                                   "WorkerCrashed", "the sandbox worker died twice running this program",
                                   "WorkerCrashed: the sandbox worker died twice running this program")
        return judge(prepared, reply, blobs, lim)

    def run_batch(self, items: Iterable[tuple[Problem, str]], progress: bool = False,
                  limits: ExecutionLimits | None = None, desc: str = "executing") -> list[ExecutionResult]:
        """Run many (problem, code) pairs in parallel; results keep the input order."""
        items = list(items)
        results: list[ExecutionResult | None] = [None] * len(items)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=desc, unit="prog")
        next_index = iter(range(len(items)))
        index_lock = threading.Lock()

        def drain() -> None:
            while True:
                with index_lock:
                    i = next(next_index, None)
                if i is None:
                    return
                problem, code = items[i]
                results[i] = self.run(problem, code, limits)
                if bar is not None:
                    bar.update(1)

        try:
            with ThreadPoolExecutor(max_workers=min(self.workers, max(1, len(items)))) as pool:
                for f in [pool.submit(drain) for _ in range(min(self.workers, max(1, len(items))))]:
                    f.result()
        finally:
            if bar is not None:
                bar.close()
        return results  # type: ignore[return-value]

    def stats(self) -> dict[str, Any]:
        return {"workers": self.workers, "respawns": self.respawns,
                "jobs": sum(h.jobs for h in self._handles), "isolation": self.isolation,
                "time": time.time()}
