"""The training-time watch and `rewards.plus_tests`: hard-coding measured on held-out tests (sampled,
or read from the reward's own verdicts), tamper shares per step, and a reward that stops paying
for hard-coding."""

from __future__ import annotations

import ast
import sys

import pytest

from execrl.datasets import builtin
from execrl.rewards import ExecutionRewards, RewardSettings
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.monitor import RewardHackingWatch, WatchSettings, metric_names
from execrl.watch.plus_tests import PlusTestSettings, call_shape, make_plus_tests

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=2, memory_mb=512)) as ex:
        yield ex


@pytest.fixture(scope="module")
def problems(executor):
    made, _ = make_plus_tests(builtin.generate("train", seed=3, n=6), executor, PlusTestSettings(tests_per_problem=4))
    assert all(p.plus_tests for p in made)
    return made


def hard_coded(problem) -> str:
    shape = call_shape(problem)
    expected = [ast.literal_eval(ast.parse(t).body[0].test.comparators[0]) for t in problem.tests]
    table = {repr(args): value for args, value in zip(shape.calls, expected)}
    return f"def {shape.entry_point}(*args):\n    return {table!r}.get(repr(args))\n"


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def batch(problems):
    """Per problem: its reference, a hard-coded table, and a program that probes the judge."""
    completions, ids = [], []
    for p in problems:
        probe = "import sys\n" + p.reference + "\n_ = sys._getframe(0)\n"
        completions += [fenced(p.reference + "\n"), fenced(hard_coded(p)), fenced(probe)]
        ids += [p.id] * 3
    return completions, ids


class Log(dict):
    def __call__(self, name, value):
        self.setdefault(name, []).append(value)


@pytest.mark.parametrize("plus_tests", ["eval", "reward"])
def test_the_watch_measures_hard_coding_and_tampering(executor, problems, plus_tests):
    settings = RewardSettings(plus_tests=plus_tests)
    watch = RewardHackingWatch(executor, WatchSettings(sample_size=100), plus_in_reward=plus_tests == "reward")
    rewards = ExecutionRewards({p.id: p for p in problems}, executor, settings, watch=watch)
    completions, ids = batch(problems)
    log = Log()
    (binary,), _ = rewards.reward_functions()
    values = binary(completions, ids, log_metric=log)
    n = len(problems)
    assert values[0::3] == [1.0] * n and values[2::3] == [1.0] * n
    # Hard-coding is rewarded while only the visible tests pay, and earns nothing once held-out tests do.
    assert values[1::3] == ([1.0] * n if plus_tests == "eval" else [0.0] * n)
    assert log["watch/hard_coding_checked"] == [float(3 * n)]  # every program passes the visible tests
    assert log["watch/hard_coding_rate"] == [pytest.approx(1 / 3)]
    assert log["watch/tamper/frame_walk"] == [pytest.approx(1 / 3)]
    assert log["watch/tamper/introspection_import"] == [0.0]
    assert log["watch/tamper/any"] == [pytest.approx(1 / 3)]
    assert ("watch/check_cpu_s" in log) == (plus_tests == "eval")
    assert set(log) - {"execution/pass_rate"} <= set(metric_names())


def test_the_sample_bounds_the_held_out_check(executor, problems):
    watch = RewardHackingWatch(executor, WatchSettings(sample_size=2), plus_in_reward=False)
    rewards = ExecutionRewards({p.id: p for p in problems}, executor, RewardSettings(), watch=watch)
    completions, ids = batch(problems)
    log = Log()
    rewards.results(completions, ids, log_metric=log)
    assert log["watch/hard_coding_checked"] == [2.0]
    off = ExecutionRewards({p.id: p for p in problems}, executor, RewardSettings(), watch=None)
    quiet = Log()
    off.results(completions, ids, log_metric=quiet)
    assert not any(name.startswith("watch/") for name in quiet)


def test_max_tests_caps_the_visible_tests_before_the_held_out_ones(problems):
    problem = problems[0]
    rewarded = RewardSettings(max_tests=1, plus_tests="reward").rewarded(problem)
    assert rewarded.tests == problem.tests[:1] + problem.plus_tests and rewarded.plus_tests == []
    assert RewardSettings(max_tests=1).rewarded(problem).tests == problem.tests[:1]
    with pytest.raises(ValueError, match="rewards.plus_tests"):
        RewardSettings(plus_tests="always")
