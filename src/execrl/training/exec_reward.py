"""Seed 002's execution reward: a completion is rewarded for running as a program, no tests needed.

The completion's program runs once in the sandbox's run-and-capture mode
(`execrl.sandbox.programs`), and its reward follows what happened: it ran and printed, ran
silently, did not compile, or failed at run time (an exception, a crash, a limit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from execrl.training.online_task import OnlineTask
from execrl.prompting import extract_code
from execrl.training.rewards import completion_text
from execrl.sandbox.programs import ProgramRun, run_programs


@dataclass(frozen=True)
class ExecRewardSettings:
    """Reward of a program by what it did when run (seed 002's values by default)."""

    printed: float = 1.0
    """Ran to its end and printed something."""
    silent: float = 0.5
    """Ran to its end and printed nothing (white space counts as nothing)."""
    syntax_error: float = -0.5
    """Did not compile (syntax or indentation error)."""
    error: float = -1.0
    """Raised, crashed, exited before its end, or was killed."""
    timeout: float = -1.0
    """Exceeded its CPU or wall-clock limit."""


def execution_reward(run: ProgramRun, settings: ExecRewardSettings) -> float:
    if run.ran:
        return settings.printed if run.printed else settings.silent
    return float(getattr(settings, run.status))


def run_metrics(runs: list[ProgramRun]) -> dict[str, float]:
    """Shares of a batch's programs by outcome, and the mean length of what they printed."""
    n = len(runs)
    ran = [r for r in runs if r.ran]
    metrics = {
        "program/run_rate": len(ran) / n,
        "program/printed_rate": sum(r.printed for r in runs) / n,
        "program/syntax_error_rate": sum(r.status == "syntax_error" for r in runs) / n,
        "program/error_rate": sum(r.status == "error" for r in runs) / n,
        "program/timeout_rate": sum(r.status == "timeout" for r in runs) / n,
    }
    if ran:
        metrics["program/output_chars"] = sum(len(r.stdout) for r in ran) / len(ran)
    return metrics


class ProgramRewards(OnlineTask):
    """The `exec` method's reward: TRL reward functions over the dataset's prompts, run as programs."""

    def __init__(self, executor, settings: ExecRewardSettings, reasoning_format: bool = False):
        self.executor = executor
        self.settings = settings
        self.reasoning_format = reasoning_format

    def run(self, completions: list) -> list[ProgramRun]:
        codes = [extract_code(completion_text(c), self.reasoning_format) for c in completions]
        return run_programs(self.executor, codes)

    def reward_functions(self) -> tuple[list[Callable], list[float]]:
        def execution(completions, log_metric=None, **kwargs):
            runs = self.run(completions)
            if log_metric is not None:
                for name, value in run_metrics(runs).items():
                    log_metric(name, value)
            return [execution_reward(r, self.settings) for r in runs]

        return [execution], [1.0]
