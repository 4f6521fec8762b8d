"""The verdict for one candidate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = ("pass", "fail", "error", "timeout", "syntax_error")
TEST_STATUSES = ("pass", "fail", "error", "timeout", "not_run")

ANNOTATION_FIELDS = (
    "status", "tests_passed", "tests_total", "test_outcomes", "error_type", "error_message",
    "trace", "cpu_time_s", "wall_time_s",
)


def counted_tests_passed(record: dict[str, Any]) -> int:
    """Tests passed as the rewards, the RL data's ranking and the scores count them: a run that
    did not pass counts one test short of all of them. A run can pass every test and still not
    pass (its CPU time with the judging of its values went past the limit after the last test,
    or it stopped after it): no run that failed counts as much as a passing one."""
    passed, total = record["tests_passed"], record["tests_total"]
    return passed if record["status"] == "pass" else min(passed, max(total - 1, 0))


@dataclass
class ExecutionResult:
    """What the executor observed for one (problem, program) pair.

    ``status``: ``pass`` (every test passed, with positive evidence recorded after the last
    test), ``fail`` (ran, wrong answer), ``error`` (an exception other than a wrong answer,
    a crash, a memory error, being killed, or tampering with the harness), ``timeout`` (CPU
    or wall limit), ``syntax_error`` (does not compile). When tests disagree, the first
    test that did not pass decides ``status``, ``error_type``, ``error_message`` and
    ``trace``.
    """

    status: str
    tests_passed: int
    tests_total: int
    test_outcomes: list[dict[str, Any]] = field(default_factory=list)
    error_type: str | None = None
    error_message: str | None = None
    trace: str = ""
    cpu_time_s: float = 0.0
    wall_time_s: float = 0.0
    stdout: str = ""
    """Captured stdout of the (first) run, truncated; not part of the annotation."""
    stderr: str = ""
    """Captured stderr of the (first) run, truncated; not part of the annotation."""
    stdout_truncated: bool = False
    """Whether the (first) run printed more than ``stdout`` keeps; not part of the annotation."""

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def fraction_passed(self) -> float:
        return self.tests_passed / self.tests_total if self.tests_total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The annotation fields of ``docs/formats.md``."""
        return {
            "status": self.status,
            "tests_passed": self.tests_passed,
            "tests_total": self.tests_total,
            "test_outcomes": [dict(o) for o in self.test_outcomes],
            "error_type": self.error_type,
            "error_message": self.error_message,
            "trace": self.trace,
            "cpu_time_s": round(self.cpu_time_s, 6),
            "wall_time_s": round(self.wall_time_s, 6),
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> ExecutionResult:
        return cls(**{k: record[k] for k in ANNOTATION_FIELDS if k in record})
