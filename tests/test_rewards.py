"""Each reward component on annotated examples, and the batch plumbing TRL calls."""

import pytest

from execrl.problems import Problem
from execrl.training.rewards import ExecutionRewards, RewardSettings, pass_rates

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


def test_a_run_that_passed_every_test_and_did_not_pass_is_paid_one_test_short():
    """The sandbox times out a run whose CPU time with the judging of its values went past the
    limit after its last test passed (host_judge._judge_single): its tests_passed is all of them."""
    over_budget = {"status": "timeout", "tests_passed": 3, "tests_total": 3}
    stopped = {"status": "error", "tests_passed": 1, "tests_total": 1}
    values, _, _ = rewards_for(RewardSettings(binary=0.0, fraction=1.0, fraction_perfect=1.0),
                               [PASS, over_budget, stopped, TIMEOUT])
    assert values["fraction"] == pytest.approx([1.0, 2 / 3, 0.0, 2 / 3])
    assert values["fraction_perfect"] == pytest.approx([2.0, 2 / 3, 0.0, 2 / 3])


def test_outcome_shaping_orders_failures():
    values, _, _ = rewards_for(RewardSettings(binary=0.0, outcome=1.0), [SYNTAX, CRASH, WRONG, PASS, TIMEOUT])
    syntax, crash, wrong, passed, timeout = values["outcome"]
    assert syntax < crash < wrong < passed
    assert timeout == crash
    custom, _, _ = rewards_for(
        RewardSettings(binary=0.0, outcome=1.0, outcome_values={"fail": 0.25}), [WRONG, SYNTAX]
    )
    assert custom["outcome"] == [0.25, -1.0]


@pytest.mark.parametrize("status", ["syntax_error", "error", "timeout", "fail", "pass"])
def test_each_outcome_value_sets_its_own_status_alone(status):
    """Every key of `rewards.outcome_values` moves the reward of its status and of no other."""
    results = [SYNTAX, CRASH, TIMEOUT, WRONG, PASS]
    default, _, _ = rewards_for(RewardSettings(binary=0.0, outcome=1.0), results)
    custom, _, _ = rewards_for(RewardSettings(binary=0.0, outcome=1.0, outcome_values={status: 7.5}), results)
    changed = [r["status"] for r, before, after in zip(results, default["outcome"], custom["outcome"]) if before != after]
    assert changed == [status]
    assert custom["outcome"][[r["status"] for r in results].index(status)] == 7.5


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


def test_the_c1_pass_rate_reads_each_groups_first_round_only():
    """Two groups of 4 (2 first attempts, 2 refinement slots): the hard one fails both first
    attempts and gets 2 refinements; the easy one passes both, and its slots return to c1 (and
    pass). Per problem the first round passes 0 and 1: a c1 rate of 0.5, where pooling every c1
    gives 4 of 6 (the easy problem counted twice)."""
    results = [WRONG, WRONG, WRONG, PASS, PASS, PASS, PASS, PASS]
    kinds = ["c1", "c1", "c2", "c2", "c1", "c1", "c1", "c1"]
    first = [True, True, False, False, True, True, False, False]
    rates = pass_rates(results, kinds, first)
    assert rates["srrl/c1_pass_rate"] == 0.5 and rates["srrl/c2_pass_rate"] == 0.5
    assert rates["srrl/c1_share"] == 0.75 and rates["srrl/c2_share"] == 0.25  # shares count every completion
    assert pass_rates(results, kinds)["srrl/c1_pass_rate"] == pytest.approx(4 / 6)  # without the marks, as before


THREE_TESTS = Problem(
    id="cap/1",
    prompt="Write add(a, b).",
    test_type="assert",
    tests=["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(5, 5) == 10"],
    entry_point="add",
)
PASSES_FIRST_ONLY = "def add(a, b):\n    return 3"  # right for add(1, 2) only


def sandbox_rewards(max_tests):
    """binary and fraction_perfect of one program, run in the real sandbox under `max_tests`."""
    from execrl.sandbox import Executor

    settings = RewardSettings(binary=1.0, fraction_perfect=1.0, perfect_bonus=1.0, max_tests=max_tests)
    with Executor(workers=1) as executor:
        functions, _ = ExecutionRewards({THREE_TESTS.id: THREE_TESTS}, executor, settings).reward_functions()
        return {f.__name__: f(completions=[PASSES_FIRST_ONLY], problem_id=[THREE_TESTS.id])[0] for f in functions}


def test_max_tests_caps_the_tests_every_reward_runs():
    """A program passing only the first of three tests passes under a cap of one, and fails without one."""
    uncapped, capped = sandbox_rewards(None), sandbox_rewards(1)
    assert uncapped["binary"] == 0.0 and uncapped["fraction_perfect"] == pytest.approx(1 / 3)
    assert capped["binary"] == 1.0 and capped["fraction_perfect"] == pytest.approx(2.0)


def test_srrl_first_attempts_run_against_the_capped_tests():
    """SRRL executes its first attempts itself (their verdicts reach the reward through `execution`):
    under `max_tests: 1` they pass as GRPO's would, so no refinement is asked for; the prompt still
    shows the problem as given."""
    from execrl.prompting import PromptConfig
    from execrl.sandbox import Executor
    from execrl.training.srrl import SRRLRollout, SRRLSettings

    class Sampler:
        class tokenizer:
            chat_template = None

        def __init__(self):
            self.calls = []

        def __call__(self, prompts):
            self.calls.append(list(prompts))
            return [([0], [0], PASSES_FIRST_ONLY, None) for _ in prompts]

    prompt = "Write add(a, b).\n"
    statuses = {}
    for max_tests in (None, 1):
        sampler = Sampler()
        with Executor(workers=1) as executor:
            rollout = SRRLRollout({prompt: THREE_TESTS}, executor, SRRLSettings(refine_share=0.5),
                                  PromptConfig(num_tests_shown=3), None,
                                  rewarded=RewardSettings(max_tests=max_tests).rewarded)
            output = rollout.rollout([prompt], group_size=2, sampler=sampler)
        statuses[max_tests] = [r["status"] for r in output["execution"]]
        if max_tests is None:
            assert "assert add(5, 5) == 10" in sampler.calls[1][0]  # the refinement quotes the failed test
    assert statuses[None] == ["fail", "fail"]
    assert statuses[1] == ["pass", "pass"]
