"""Run-and-capture mode: untrusted programs run without tests, and what they print is kept.

Rewards that need no tests (the `exec` method) and the code-output game run a completion as a
whole program. Each run is a `stdio` candidate of a one-test problem with the given stdin, so
it goes through the same workers, limits, seccomp filter and namespaces as every test run, and
the judge decides whether it ran: only the harness's end-of-run record, which carries a token
the program never sees, counts as having reached the end. A program that exits early (even
with status 0 through `os._exit`), is killed, forges records or exceeds a limit did not run;
`sys.exit(0)` is a normal end, as for any stdio program. Output is kept up to
`ExecutionLimits.max_output_bytes` (and at most 64 KiB), decoded as UTF-8 with replacement.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from execrl.problems import Problem

PROGRAM_STATUSES = ("ran", "syntax_error", "error", "timeout")
"""`ran`: reached its end; otherwise the sandbox verdict of why not."""


@dataclass(frozen=True)
class ProgramRun:
    """What one program did when run on its own."""

    status: str
    stdout: str = ""
    stdout_truncated: bool = False
    error_type: str | None = None
    error_message: str | None = None

    @property
    def ran(self) -> bool:
        return self.status == "ran"

    @property
    def printed(self) -> bool:
        """Ran and wrote something other than white space to stdout."""
        return self.ran and bool(self.stdout.strip())

    def to_dict(self) -> dict:
        return asdict(self)


def program_problem(stdin: str = "") -> Problem:
    """The one-test `stdio` problem a program runs as: its output is captured, never compared."""
    return Problem(id="program", prompt="Run the program.", test_type="stdio", tests=[{"input": stdin, "output": ""}])


def program_run(result) -> ProgramRun:
    """A `ProgramRun` from the executor's verdict on `program_problem`.

    On that problem `pass` and `fail` both mean the harness saw the program finish (they differ
    only in whether it printed the never-expected empty output)."""
    status = "ran" if result.status in ("pass", "fail") else result.status
    if status not in PROGRAM_STATUSES:
        raise ValueError(f"unexpected sandbox status {result.status!r}")
    return ProgramRun(
        status=status,
        stdout=result.stdout,
        stdout_truncated=result.stdout_truncated,
        error_type=None if status == "ran" else result.error_type,
        error_message=None if status == "ran" else result.error_message,
    )


def run_programs(executor, codes: list[str], stdin: str = "", limits=None) -> list[ProgramRun]:
    """Run each program once in `executor`'s sandbox with `stdin`, in parallel, in order."""
    problem = program_problem(stdin)
    return [program_run(r) for r in executor.run_batch([(problem, code) for code in codes], limits=limits)]
