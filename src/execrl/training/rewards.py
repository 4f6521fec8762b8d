"""Rewards from executing completions, as TRL reward functions that can be combined with weights.

Every component reads the executor's verdict for a completion; a batch executes each
completion once, however many components read it.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass, field

from execrl.training.online_task import OnlineTask
from execrl.problems import Problem
from execrl.prompting import extract_code, follows_reasoning_format
from execrl.sandbox.result import counted_tests_passed
from execrl.watch.plus_tests import with_plus_tests

PLUS_TEST_USES = ("eval", "reward")
DEFAULT_OUTCOME_VALUES = {"syntax_error": -1.0, "error": -0.5, "timeout": -0.5, "fail": 0.0, "pass": 1.0}


@dataclass(frozen=True)
class RewardSettings:
    """Weights of the reward components (0 leaves a component out) and their parameters."""

    binary: float = 1.0
    """1 when every test passes, else 0."""
    fraction: float = 0.0
    """Share of tests passed (a run that did not pass counts one test short of all of them)."""
    fraction_perfect: float = 0.0
    """Share of tests passed plus `perfect_bonus` when all pass."""
    outcome: float = 0.0
    """Shaped by outcome: syntax error < runtime error < wrong answer < pass (`outcome_values`)."""
    format: float = 0.0
    """1 when the completion follows `<reasoning>…</reasoning><answer>…</answer>`."""
    perfect_bonus: float = 1.0
    outcome_values: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_OUTCOME_VALUES))
    max_tests: int | None = None
    """Reward against at most the first N tests of each problem (None: all of them)."""
    plus_tests: str = "eval"
    """`eval`: held-out tests are only watched and evaluated; `reward`: the reward also runs them,
    after the visible tests, so a program that hard-codes what the prompt showed earns nothing."""

    def __post_init__(self) -> None:
        if self.plus_tests not in PLUS_TEST_USES:
            raise ValueError(f"rewards.plus_tests must be one of {PLUS_TEST_USES}, got {self.plus_tests!r}")

    def capped(self, problem: Problem) -> Problem:
        """The problem with its visible tests cut to `max_tests` (its held-out tests kept apart)."""
        if self.max_tests is None or len(problem.tests) <= self.max_tests:
            return problem
        return dataclasses.replace(problem, tests=problem.tests[: self.max_tests])

    def rewarded(self, problem: Problem) -> Problem:
        """The problem as training sees it: its tests cut to `max_tests`, then (under
        `plus_tests: reward`) its held-out tests after them."""
        problem = self.capped(problem)
        if self.plus_tests == "reward" and problem.plus_tests:
            problem = with_plus_tests(problem)
        return problem

    def weights(self) -> dict[str, float]:
        named = {
            "binary": self.binary,
            "fraction": self.fraction,
            "fraction_perfect": self.fraction_perfect,
            "outcome": self.outcome,
            "format": self.format,
        }
        active = {name: weight for name, weight in named.items() if weight != 0}
        if not active:
            raise ValueError("rewards: every component has weight 0; give at least one a non-zero weight")
        return active


def binary_reward(result: dict, completion: str, settings: RewardSettings) -> float:
    return 1.0 if result["status"] == "pass" else 0.0


def fraction_reward(result: dict, completion: str, settings: RewardSettings) -> float:
    """Share of tests passed, a run that did not pass one test short (`counted_tests_passed`): no
    run that failed earns what a passing run earns."""
    return counted_tests_passed(result) / result["tests_total"] if result["tests_total"] else 0.0


def fraction_perfect_reward(result: dict, completion: str, settings: RewardSettings) -> float:
    bonus = settings.perfect_bonus if result["status"] == "pass" else 0.0
    return fraction_reward(result, completion, settings) + bonus


def outcome_reward(result: dict, completion: str, settings: RewardSettings) -> float:
    values = {**DEFAULT_OUTCOME_VALUES, **settings.outcome_values}
    return float(values[result["status"]])


def format_reward(result: dict, completion: str, settings: RewardSettings) -> float:
    return 1.0 if follows_reasoning_format(completion) else 0.0


COMPONENTS: dict[str, Callable[[dict, str, RewardSettings], float]] = {
    "binary": binary_reward,
    "fraction": fraction_reward,
    "fraction_perfect": fraction_perfect_reward,
    "outcome": outcome_reward,
    "format": format_reward,
}


def completion_text(completion) -> str:
    """TRL passes plain strings, or chat messages for conversational prompts."""
    if isinstance(completion, list):
        return "".join(message.get("content", "") for message in completion)
    return completion


def pass_rates(results: list[dict], sample_kind: list[str] | None = None,
               first_round: list[bool] | None = None) -> dict[str, float]:
    """Pass rate of a batch and, for SRRL, of its first attempts (c1) and refinements (c2), and
    the share of each.

    The c1 pass rate is that of each group's first round (`first_round`, SRRL's rollout marks
    them): where every first attempt of a group passed, its refinement budget returns to c1 and
    more first attempts of that easy problem are drawn; counting those would weigh the problems
    that pass most up to twice and bias the rate, and its rise over training, upward."""
    rates = {"execution/pass_rate": sum(r["status"] == "pass" for r in results) / len(results)}
    if sample_kind is not None:
        first = first_round if first_round is not None else [True] * len(results)
        for kind in ("c1", "c2"):
            rates[f"srrl/{kind}_share"] = sum(k == kind for k in sample_kind) / len(results)
            members = [r for r, k, f in zip(results, sample_kind, first, strict=True) if k == kind and (f or kind == "c2")]
            if members:
                rates[f"srrl/{kind}_pass_rate"] = sum(r["status"] == "pass" for r in members) / len(members)
    return rates


class ExecutionRewards(OnlineTask):
    """TRL reward functions backed by the sandbox: the problems' tests decide the reward.

    Completions run against `settings.rewarded(problem)` (its first `max_tests` tests). Results
    computed during rollout (SRRL executes every first attempt to build refinement prompts, against
    the same tests) arrive through the `execution` column and are not run again.
    """

    def __init__(
        self,
        problems: dict[str, Problem],
        executor,
        settings: RewardSettings,
        reasoning_format: bool = False,
        watch=None,
    ):
        self.problems = problems
        self.executor = executor
        self.settings = settings
        self.reasoning_format = reasoning_format
        self.watch = watch
        """An `execrl.watch.monitor.RewardHackingWatch` that sees every batch's verdicts, or None."""
        self._batch_key: tuple | None = None
        self._batch_results: list[dict] = []

    def results(
        self,
        completions: list,
        problem_id: list[str],
        execution: list | None = None,
        sample_kind: list[str] | None = None,
        log_metric=None,
        first_round: list[bool] | None = None,
    ) -> list[dict]:
        texts = [completion_text(c) for c in completions]
        key = (tuple(texts), tuple(problem_id))
        if key != self._batch_key:
            known = execution or [None] * len(texts)
            pending = [
                (i, self.settings.rewarded(self.problems[pid]), extract_code(text, self.reasoning_format))
                for i, (text, pid, result) in enumerate(zip(texts, problem_id, known, strict=True))
                if result is None
            ]
            fresh = self.executor.run_batch([(problem, code) for _, problem, code in pending]) if pending else []
            results = list(known)
            for (i, _, _), result in zip(pending, fresh, strict=True):
                results[i] = result.to_dict()
            self._batch_key, self._batch_results = key, results
            if log_metric is not None:
                for name, value in pass_rates(results, sample_kind, first_round).items():
                    log_metric(name, value)
                if self.watch is not None:
                    judged = [self.settings.capped(self.problems[pid]) for pid in problem_id]
                    codes = [extract_code(text, self.reasoning_format) for text in texts]
                    self.watch.observe(judged, codes, results, log_metric, kinds=sample_kind)
        return self._batch_results

    def reward_functions(self) -> tuple[list[Callable], list[float]]:
        """One named function per active component, and their weights, for GRPOTrainer."""
        functions, weights = [], []
        for name, weight in self.settings.weights().items():
            functions.append(self._component(name))
            weights.append(weight)
        return functions, weights

    def _component(self, name: str) -> Callable:
        component = COMPONENTS[name]

        def reward(completions, problem_id, execution=None, sample_kind=None, log_metric=None, first_round=None, **kwargs):
            results = self.results(completions, problem_id, execution, sample_kind, log_metric, first_round)
            return [
                component(result, completion_text(c), self.settings)
                for result, c in zip(results, completions, strict=True)
            ]

        reward.__name__ = name
        return reward
