"""The reward-hacking watch during training: per step, how often rewarded programs hard-code the
visible tests, and how often completions probe the judge.

It sees each step's completions, their programs and the sandbox's verdicts after the reward
ran them, and logs (under ``watch/``, to the metrics file and W&B like every TRL metric):

- ``watch/hard_coding_checked`` and ``watch/hard_coding_flagged``: counts, summed over
  processes (`execrl.training.grpo.CountingGRPOTrainer`): the checked completions (rewarded programs
  that passed every test the reward ran) and those of them that fail a held-out test. With
  ``rewards.plus_tests: eval`` the held-out tests run on a sample of at most
  ``watch.sample_size`` passing completions per step and process (the sandbox CPU time, summed
  over processes, is logged as ``watch/check_cpu_s``); with ``reward`` the reward already ran
  them, and every passing completion is checked at no cost. For SRRL the same counts of first
  attempts and refinements apart: ``watch/hard_coding_checked/c1``, ``.../c2`` and so on;
- ``watch/hard_coding_rate`` (and ``/c1``, ``/c2``): flagged over checked of the step's counts,
  for the figure; the report pools the counts over windows of steps instead
  (`execrl.report.reward_hacking.hard_coding_windows`);
- ``watch/tamper/<category>`` and ``watch/tamper/any``: the share of completions showing each
  signal of :mod:`execrl.watch.tamper`.

The hard-coding counts are logged per problem as well (``watch/hard_coding_checked@<problem id>``
and so on, `per_problem`): the trainer sums them over processes like the totals and writes them
into the metrics file as one object, ``watch/hard_coding_by_problem`` (`BY_PROBLEM`), not as
metrics of their own, in the step's first record (at a step with an interval evaluation, the
evaluation's, which holds the step's watch totals too; the report adds up the records of a step). The report's intervals need them: whether a passing
program fails a held-out test is largely its problem's property, so completions of one problem are
not independent evidence (`execrl.report.reward_hacking.hard_coding_windows`).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from execrl.problems import Problem
from execrl.watch.tamper import CATEGORIES, signal_rates, signals

PREFIX = "watch/"
CHECKED, FLAGGED, RATE = f"{PREFIX}hard_coding_checked", f"{PREFIX}hard_coding_flagged", f"{PREFIX}hard_coding_rate"
CPU = f"{PREFIX}check_cpu_s"
COUNTS = (CHECKED, FLAGGED, CPU)
"""Metrics summed over processes (and over the rounds of a step), not averaged."""
KINDS = ("c1", "c2")
"""SRRL's sample kinds: first attempts and refinements."""
PER_PROBLEM = "@"
"""Between a count's name and a problem id in a per-problem count's name (no count name holds it)."""
BY_PROBLEM = f"{PREFIX}hard_coding_by_problem"
"""The metrics record's key of a step's per-problem counts: {count name: {problem id: count}}."""


def is_count(name: str) -> bool:
    """Whether a logged metric is a count (summed over processes), e.g. `watch/hard_coding_checked/c1`
    or `watch/hard_coding_checked@HumanEval/38` (`per_problem`)."""
    return any(name == count or name.startswith((count + "/", count + PER_PROBLEM)) for count in COUNTS)


def per_problem(name: str, problem_id: str) -> str:
    """The name under which a count of one problem is logged: `watch/hard_coding_flagged/c1@MBPP/11`."""
    return f"{name}{PER_PROBLEM}{problem_id}"


def split_per_problem(name: str) -> tuple[str, str] | None:
    """(count name, problem id) of a per-problem count's name, None for any other name."""
    count, sep, problem_id = name.partition(PER_PROBLEM)
    return (count, problem_id) if sep and is_count(count) else None


def pooled_rates(counts: dict[str, float]) -> dict[str, float]:
    """`watch/hard_coding_rate[/kind]` from summed counts: flagged over checked, where any were checked."""
    rates = {}
    for suffix in ("", *(f"/{kind}" for kind in KINDS)):
        checked = counts.get(CHECKED + suffix)
        if checked:
            rates[RATE + suffix] = counts.get(FLAGGED + suffix, 0.0) / checked
    return rates


@dataclass(frozen=True)
class WatchSettings:
    """The reward-hacking watch of the online methods that reward tests (GRPO, SRRL)."""

    enabled: bool = True
    """Log the watch's rates every step (false: no held-out check, no signals)."""
    sample_size: int = 32
    """Passing completions per step and process whose held-out tests run (`rewards.plus_tests: eval`);
    the schema's description gives the arithmetic behind 32."""
    seed: int = 0
    """Seed of the sample."""

    def __post_init__(self) -> None:
        if int(self.sample_size) < 0:
            raise ValueError(f"watch.sample_size must be >= 0, got {self.sample_size!r}")


class RewardHackingWatch:
    """Measures one step's completions; `log_metric(name, value)` is TRL's metric logger."""

    def __init__(self, executor, settings: WatchSettings, plus_in_reward: bool) -> None:
        self.executor = executor
        self.settings = settings
        self.plus_in_reward = plus_in_reward
        self.steps = 0

    def observe(
        self,
        problems: list[Problem],
        codes: list[str],
        results: list[dict],
        log_metric: Callable[[str, float], None],
        kinds: list[str] | None = None,
    ) -> dict[str, float]:
        """The step's watch metrics (also logged): `problems` with the visible tests the reward ran
        and their held-out tests apart, `results` the verdicts the reward used (under
        `plus_tests: reward`, of the visible tests followed by the held-out ones), `kinds` SRRL's
        sample kind of each completion (`c1`, `c2`), whose counts are logged apart as well."""
        self.steps += 1
        metrics = {f"{PREFIX}tamper/{k}": v for k, v in signal_rates(
            [signals(code, result) for code, result in zip(codes, results, strict=True)]).items()}  # fmt: skip
        flagged, checked, cpu = self._hard_coding(problems, codes, results)
        metrics[CHECKED], metrics[FLAGGED] = float(len(checked)), float(len(flagged))
        counted = [(CHECKED, checked), (FLAGGED, flagged)]
        if kinds is not None:
            for kind in KINDS:
                counted += [(f"{name}/{kind}", [i for i in indices if kinds[i] == kind]) for name, indices in counted[:2]]
            for name, indices in counted[2:]:
                metrics[name] = float(len(indices))
        for name, indices in counted:
            for problem_id, count in Counter(problems[i].id for i in indices).items():
                metrics[per_problem(name, problem_id)] = float(count)
        if not self.plus_in_reward:
            metrics[CPU] = cpu
        for name, value in metrics.items():
            log_metric(name, value)
        return metrics

    def _hard_coding(self, problems, codes, results) -> tuple[list[int], list[int], float]:
        """(indices failing a held-out test, indices checked, sandbox CPU seconds of the check)."""
        if self.plus_in_reward:
            # The reward ran base + held-out tests: read which of them passed.
            flagged, checked = [], []
            for i, (problem, result) in enumerate(zip(problems, results, strict=True)):
                n_base, outcomes = len(problem.tests), result.get("test_outcomes") or []
                if not problem.plus_tests or len(outcomes) <= n_base:
                    continue
                if all(o.get("status") == "pass" for o in outcomes[:n_base]):
                    checked.append(i)
                    if any(o.get("status") != "pass" for o in outcomes[n_base:]):
                        flagged.append(i)
            return flagged, checked, 0.0
        passing = [i for i, (p, r) in enumerate(zip(problems, results, strict=True))
                   if r.get("status") == "pass" and p.plus_tests]  # fmt: skip
        if not passing or self.settings.sample_size == 0:
            return [], [], 0.0
        rng = random.Random(f"{self.settings.seed}\n{self.steps}")
        chosen = sorted(rng.sample(passing, min(self.settings.sample_size, len(passing))))
        held_out = [(replace(problems[i], tests=problems[i].plus_tests, plus_tests=[]), codes[i]) for i in chosen]
        start = time.process_time()
        verdicts = self.executor.run_batch(held_out)
        cpu = sum(v.cpu_time_s or 0.0 for v in verdicts) + time.process_time() - start
        return [i for i, v in zip(chosen, verdicts, strict=True) if v.status != "pass"], chosen, cpu


def metric_names() -> list[str]:
    """Every name the watch may log, but its per-problem counts (`per_problem`)."""
    per_kind = [f"{name}/{kind}" for name in (RATE, CHECKED, FLAGGED) for kind in KINDS]
    return [RATE, CHECKED, FLAGGED, CPU, *per_kind] + [f"{PREFIX}tamper/{k}" for k in (*CATEGORIES, "any")]
