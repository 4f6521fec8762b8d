"""Each reward component on annotated examples, and the batch plumbing TRL calls."""

import pytest

from execrl.rewards import ExecutionRewards, RewardSettings, pass_rates

PASS = {"status": "pass", "tests_passed": 3, "tests_total": 3}
WRONG = {"status": "fail", "tests_passed": 1, "tests_total": 3}
CRASH = {"status": "error", "tests_passed": 0, "tests_total": 3}
SYNTAX = {"status": "syntax_error", "tests_passed": 0, "tests_total": 3}
TIMEOUT = {"status": "timeout", "tests_passed": 2, "tests_total": 3}
REASONED = "<reasoning>sum</reasoning><answer>def f(): return 1</answer>"


class CountingExecutor:
    """Stands in for the sandbox: a verdict per code string, and a count of how often it ran."""

    def __init__(self, verdicts):
        self.verdicts = verdicts
        self.calls = 0

    def run_batch(self, items):
        self.calls += 1

        class Result:
            def __init__(self, record):
                self.record = record

            def to_dict(self):
                return dict(self.record)

        return [Result(self.verdicts[code]) for _, code in items]


def rewards_for(settings, results, completions=None):
    completions = completions or ["x"] * len(results)
    executor = CountingExecutor({f"code{i}": r for i, r in enumerate(results)})
    rewards = ExecutionRewards({"p": object()}, executor, settings)
    functions, weights = rewards.reward_functions()
    texts = [f"code{i}" for i in range(len(results))]
    by_name = {f.__name__: f(completions=texts, problem_id=["p"] * len(texts)) for f in functions}
    return by_name, weights, executor


def test_binary_fraction_and_bonus():
    values, weights, executor = rewards_for(
        RewardSettings(binary=1.0, fraction=0.5, fraction_perfect=2.0, perfect_bonus=0.5), [PASS, WRONG, CRASH]
    )
    assert values["binary"] == [1.0, 0.0, 0.0]
    assert values["fraction"] == pytest.approx([1.0, 1 / 3, 0.0])
    assert values["fraction_perfect"] == pytest.approx([1.5, 1 / 3, 0.0])
    assert weights == [1.0, 0.5, 2.0]
    assert executor.calls == 1  # every component reads one execution of the batch


def test_outcome_shaping_orders_failures():
    values, _, _ = rewards_for(RewardSettings(binary=0.0, outcome=1.0), [SYNTAX, CRASH, WRONG, PASS, TIMEOUT])
    syntax, crash, wrong, passed, timeout = values["outcome"]
    assert syntax < crash < wrong < passed
    assert timeout == crash
    custom, _, _ = rewards_for(
        RewardSettings(binary=0.0, outcome=1.0, outcome_values={"fail": 0.25}), [WRONG, SYNTAX]
    )
    assert custom["outcome"] == [0.25, -1.0]


def test_format_reward_reads_the_completion():
    executor = CountingExecutor({"def f(): return 1": PASS, "def f(): return 1\n": PASS})
    rewards = ExecutionRewards({"p": object()}, executor, RewardSettings(binary=0.0, format=1.0), reasoning_format=True)
    (format_fn,), _ = rewards.reward_functions()
    assert format_fn(completions=[REASONED, "def f(): return 1"], problem_id=["p", "p"]) == [1.0, 0.0]


def test_results_from_rollout_are_not_run_again():
    executor = CountingExecutor({})
    rewards = ExecutionRewards({"p": object()}, executor, RewardSettings())
    (binary,), _ = rewards.reward_functions()
    logged = {}
    values = binary(
        completions=["a", "b"],
        problem_id=["p", "p"],
        execution=[PASS, WRONG],
        sample_kind=["c1", "c2"],
        log_metric=logged.__setitem__,
    )
    assert values == [1.0, 0.0]
    assert executor.calls == 0
    assert logged["srrl/c1_pass_rate"] == 1.0 and logged["srrl/c2_pass_rate"] == 0.0


def test_all_zero_weights_rejected():
    with pytest.raises(ValueError, match="weight"):
        RewardSettings(binary=0.0).weights()


def test_pass_rates():
    assert pass_rates([PASS, WRONG, PASS, CRASH]) == {"execution/pass_rate": 0.5}
