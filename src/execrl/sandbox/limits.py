"""Resource limits and isolation settings for one candidate run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class ExecutionLimits:
    """Limits applied to every candidate process (set in the forked child before it runs).

    All fields have defaults suited to MBPP/TACO-sized programs.
    """

    timeout_s: float = 10.0
    """CPU-time budget in seconds, user+system, of all the processes of one run together:
    the whole program and all its tests for ``assert``/``call`` problems, each test's run for
    ``stdio`` problems. Enforced in the main process by a CPU-time timer (ITIMER_PROF,
    sub-second) backed by RLIMIT_CPU (whole seconds, SIGKILL at ``int(timeout_s) + 2``), and
    for the run's processes together by the worker, which sums their CPU time every tenth
    of the budget once a run lasts that long. CPU time, not wall time,
    decides timeouts, so load on the machine does not fail correct programs. The default
    lets every passing MBPP reference finish (the slowest, task 123, needs ~7 s); RL reward
    functions usually pass a smaller budget."""

    wall_timeout_s: float | None = None
    """Wall-clock backstop (sleeping or blocked programs) per run. ``None`` means
    ``3 * timeout_s + 2``."""

    memory_mb: int = 1024
    """Address-space cap (RLIMIT_AS) in MiB. Includes the interpreter itself (~30 MiB)."""

    max_processes: int = 16
    """RLIMIT_NPROC: processes and threads the candidate's (per-worker) uid may own."""

    max_open_files: int = 64
    """RLIMIT_NOFILE."""

    file_size_mb: int = 16
    """RLIMIT_FSIZE: the largest file the candidate may write, in MiB."""

    max_output_bytes: int = 4 << 20
    """Captured stdout and stderr are each truncated to this many bytes (the program keeps
    running; the rest is discarded)."""

    total_wall_timeout_s: float | None = None
    """Wall-clock backstop of one candidate over all its runs (a ``stdio`` problem runs once
    per test): a worker is never held longer by one candidate. Tests that did not start
    within it are ``not_run`` and the candidate times out. ``None`` means a backstop that
    grows with the CPU time the candidate's runs used: a test may start while the elapsed
    time is under the larger of ``3 *`` the per-run wall-clock limit and ``3 *`` the CPU time
    used so far plus one per-run limit. A program that sleeps is stopped after three per-run
    limits; one of many tests that each use most of their CPU budget passes on a loaded
    machine too (each test is bounded by its CPU time)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def worker_limits(self) -> dict[str, Any]:
        """The fields, plus the resolved per-run wall-clock limit (``wall``) and the explicit
        per-candidate one (``total_wall``, ``None`` for the default of
        :func:`candidate_wall`), as sent to the workers."""
        wall = self.wall_timeout_s or 3 * self.timeout_s + 2
        return dict(asdict(self), wall=wall, total_wall=self.total_wall_timeout_s)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        for name in ("wall_timeout_s", "total_wall_timeout_s"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive or None")
        for name in ("memory_mb", "max_processes", "max_open_files", "file_size_mb", "max_output_bytes"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive")


def candidate_wall(lim: dict[str, Any], n_runs: int) -> float:
    """The longest one candidate of ``n_runs`` runs may hold a worker, from
    :meth:`ExecutionLimits.worker_limits`: its explicit backstop, or the CPU-scaled one at
    its largest (every run used its whole CPU budget, the last one started just in time)."""
    if lim["total_wall"] is not None:
        return float(lim["total_wall"])
    return max(3 * float(lim["wall"]), 3 * float(lim["timeout_s"]) * n_runs + 2 * float(lim["wall"]))
