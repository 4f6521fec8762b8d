"""The training-time watch and `rewards.plus_tests`: hard-coding measured on held-out tests (sampled,
or read from the reward's own verdicts), tamper shares per step, and a reward that stops paying
for hard-coding."""

from __future__ import annotations

import ast
import sys

import pytest

from execrl.datasets import builtin
from execrl.training.rewards import ExecutionRewards, RewardSettings
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.monitor import (
    BY_PROBLEM,
    RewardHackingWatch,
    WatchSettings,
    is_count,
    metric_names,
    per_problem,
    pooled_rates,
    split_per_problem,
)
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
    assert log["watch/hard_coding_flagged"] == [float(n)]  # the hard-coded tables fail held-out tests
    assert pooled_rates({k: v[0] for k, v in log.items()}) == {"watch/hard_coding_rate": pytest.approx(1 / 3)}
    assert not any(k.endswith(("/c1", "/c2")) for k in log)  # no sample kinds: GRPO's
    assert log["watch/tamper/frame_walk"] == [pytest.approx(1 / 3)]
    assert log["watch/tamper/introspection_import"] == [0.0]
    assert log["watch/tamper/any"] == [pytest.approx(1 / 3)]
    assert ("watch/check_cpu_s" in log) == (plus_tests == "eval")
    assert {k for k in log if split_per_problem(k) is None} - {"execution/pass_rate"} <= set(metric_names())
    assert log[per_problem("watch/hard_coding_checked", problems[0].id)] == [3.0]
    assert log[per_problem("watch/hard_coding_flagged", problems[0].id)] == [1.0]


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


def test_srrl_first_attempts_and_refinements_are_counted_apart(executor, problems):
    """With SRRL's sample kinds the counts are logged per kind too, and add up to the totals."""
    watch = RewardHackingWatch(executor, WatchSettings(sample_size=100), plus_in_reward=False)
    rewards = ExecutionRewards({p.id: p for p in problems}, executor, RewardSettings(), watch=watch)
    completions, ids = batch(problems)
    kinds = ["c1", "c2", "c1"] * len(problems)  # the hard-coded tables are the refinements
    log = Log()
    rewards.results(completions, ids, sample_kind=kinds, log_metric=log)
    n = len(problems)
    assert log["watch/hard_coding_checked/c1"] == [float(2 * n)] and log["watch/hard_coding_flagged/c1"] == [0.0]
    assert log["watch/hard_coding_checked/c2"] == [float(n)] and log["watch/hard_coding_flagged/c2"] == [float(n)]
    assert pooled_rates({k: v[0] for k, v in log.items()}) == {
        "watch/hard_coding_rate": pytest.approx(1 / 3), "watch/hard_coding_rate/c1": 0.0, "watch/hard_coding_rate/c2": 1.0}
    assert {k for k in log if k.startswith("watch/") and split_per_problem(k) is None} <= set(metric_names())
    # The same counts per problem, for the report's intervals: they add up to the totals.
    per_problem_counts = {}
    for name, values in log.items():
        if (split := split_per_problem(name)) is not None:
            per_problem_counts.setdefault(split[0], {})[split[1]] = values[0]
    assert set(per_problem_counts["watch/hard_coding_checked/c2"]) == {p.id for p in problems}
    for name in ("watch/hard_coding_checked", "watch/hard_coding_flagged/c2", "watch/hard_coding_checked/c1"):
        assert sum(per_problem_counts[name].values()) == log[name][0]
    assert "watch/hard_coding_flagged/c1" not in per_problem_counts  # no problem had one: nothing logged
    # Counts are summed over processes by the trainer; rates and shares are not counts.
    assert is_count("watch/hard_coding_checked/c2") and is_count("watch/check_cpu_s")
    assert is_count(per_problem("watch/hard_coding_flagged/c1", "HumanEval/38"))
    assert split_per_problem("watch/hard_coding_flagged/c1@HumanEval/38") == ("watch/hard_coding_flagged/c1", "HumanEval/38")
    assert split_per_problem("watch/hard_coding_checked") is None and split_per_problem("user@name") is None
    assert not is_count("watch/hard_coding_rate") and not is_count("watch/tamper/any")


def test_the_trainer_sums_counts_over_processes_and_rounds():
    """CountingGRPOTrainer's flush, with a second process's counts stood in for by the gather (no
    second process here): counts are summed over processes, and over the rounds of one logged
    step; the rate is recomputed from the sums, where TRL would average the processes' rates."""
    from collections import defaultdict
    from types import SimpleNamespace

    import torch

    from execrl.training.grpo import CountingGRPOTrainer

    other = {"watch/hard_coding_checked": 10.0, "watch/hard_coding_flagged": 5.0, "watch/check_cpu_s": 0.5}

    def gather(local):  # this process's counts, then the other's (sorted names, as the flush sends them)
        return torch.cat([local, torch.tensor([other[name] for name in sorted(other)], dtype=local.dtype)])

    trainer = SimpleNamespace(accelerator=SimpleNamespace(gather=gather, device="cpu"),
                              _metrics={"train": defaultdict(list)}, _pending_counts={}, _problem_counts={})
    log = lambda name, value: CountingGRPOTrainer._log_metric(trainer, name, value)  # noqa: E731
    log("watch/hard_coding_checked", 30.0)
    log("watch/hard_coding_flagged", 0.0)
    log("watch/check_cpu_s", 0.25)
    CountingGRPOTrainer._flush_counts(trainer)
    metrics = trainer._metrics["train"]
    assert metrics["watch/hard_coding_checked"] == [40.0] and metrics["watch/hard_coding_flagged"] == [5.0]
    assert metrics["watch/check_cpu_s"] == [0.75]
    assert metrics["watch/hard_coding_rate"] == [5.0 / 40.0]  # not (0/30 + 5/10) / 2
    # A second round before the step is logged: its counts add to the step's.
    log("watch/hard_coding_checked", 2.0)
    log("watch/hard_coding_flagged", 2.0)
    log("watch/check_cpu_s", 0.0)
    CountingGRPOTrainer._flush_counts(trainer)
    assert metrics["watch/hard_coding_checked"] == [52.0] and metrics["watch/hard_coding_flagged"] == [12.0]
    assert metrics["watch/hard_coding_rate"] == [12.0 / 52.0]
    assert trainer._pending_counts == {}
    # Per-problem counts: summed over processes and rounds the same way, kept out of the metrics.
    # (the stand-in gather needs both processes to send the same names, as `gather_object` makes them)
    other.clear()
    other.update({"watch/hard_coding_checked@p1": 4.0, "watch/hard_coding_checked@p2": 0.0})
    log("watch/hard_coding_checked@p1", 1.0)
    log("watch/hard_coding_checked@p2", 3.0)
    CountingGRPOTrainer._flush_counts(trainer)
    other.clear()
    other.update({"watch/hard_coding_checked@p1": 0.0})
    log("watch/hard_coding_checked@p1", 2.0)
    CountingGRPOTrainer._flush_counts(trainer)
    assert trainer._problem_counts == {"watch/hard_coding_checked": {"p1": 7.0, "p2": 3.0}}
    assert not [name for name in metrics if "@" in name]


def test_the_step_record_holds_the_per_problem_counts_and_the_next_starts_empty(tmp_path, monkeypatch):
    """`CountingGRPOTrainer.log` hands the step's per-problem counts to the metrics file's next record
    (one object under `watch/hard_coding_by_problem`), not to TRL's metrics (W&B)."""
    import json
    from types import SimpleNamespace

    from trl import GRPOTrainer

    from execrl.training.common import MetricsFileCallback
    from execrl.training.grpo import CountingGRPOTrainer

    metrics_file = MetricsFileCallback(tmp_path / "metrics.jsonl")
    state = SimpleNamespace(global_step=3, epoch=0.5, is_world_process_zero=True)
    seen = []

    def trl_log(self, logs, start_time=None):  # what TRL's log hands on to the callbacks
        seen.append(dict(logs))
        metrics_file.on_log(None, state, None, logs=logs)

    monkeypatch.setattr(GRPOTrainer, "log", trl_log)
    trainer = object.__new__(CountingGRPOTrainer)
    trainer.callback_handler = SimpleNamespace(callbacks=[object(), metrics_file])
    trainer._problem_counts = {"watch/hard_coding_checked": {"p1": 7.0}, "watch/hard_coding_flagged": {"p1": 1.0}}
    trainer.log({"loss": 0.25})
    trainer.log({"loss": 0.5})
    first, second = (json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())
    assert first[BY_PROBLEM] == {"watch/hard_coding_checked": {"p1": 7.0}, "watch/hard_coding_flagged": {"p1": 1.0}}
    assert first["loss"] == 0.25 and BY_PROBLEM not in second and second["loss"] == 0.5
    assert all(BY_PROBLEM not in logs for logs in seen)  # TRL's logs (and so W&B) never see it
    assert trainer._problem_counts == {}


def test_the_watch_seed_decides_which_passing_programs_are_checked(executor, problems):
    """`watch.seed`: the sample of passing programs checked on held-out tests is drawn from it (and
    the step), so one seed draws the same sample every time and other seeds draw others."""
    results = [{"status": "pass"}] * len(problems)
    codes = [p.reference for p in problems]

    def checked(seed):
        watch = RewardHackingWatch(executor, WatchSettings(sample_size=2, seed=seed), plus_in_reward=False)
        return tuple(watch._hard_coding(problems, codes, results)[1])

    samples = {seed: checked(seed) for seed in range(6)}
    assert checked(0) == samples[0] and all(len(s) == 2 for s in samples.values())
    assert len(set(samples.values())) > 1
