"""Interval evaluation: before training, every N steps and after the last, at its own temperature
and sample count, with an interval over problems."""

import pytest
from accelerate import Accelerator
from transformers import TrainerControl, TrainerState

from execrl.interval_eval import IntervalEvaluation, pass_at_1_interval
from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

PROBLEMS = [
    Problem(id=f"p/{i}", prompt=f"Return {i}.", test_type="assert", tests=[f"assert f() == {i}"], entry_point="f")
    for i in range(4)
]


class RecordingTrainer:
    def __init__(self):
        self.accelerator = Accelerator(cpu=True)
        self.logged = []

    def log(self, metrics):
        self.logged.append(metrics)
        # As Trainer.log does: its on_log handling resets the step's control flags.
        if getattr(self, "control", None) is not None:
            self.control.should_log = False


def test_interval_is_the_normal_approximation_over_problems():
    mean, low, high = pass_at_1_interval([4, 0, 2, 2], samples=4)
    assert mean == pytest.approx(0.5)
    assert low == pytest.approx(0.5 - 1.959964 * (1 / 6) ** 0.5 / 2)
    assert high == pytest.approx(0.5 + 1.959964 * (1 / 6) ** 0.5 / 2)
    assert pass_at_1_interval([3, 3], samples=3) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        pass_at_1_interval([], samples=1)


def test_evaluates_at_step_0_every_n_steps_and_at_the_end_at_its_own_temperature():
    asked = []

    def sample(prompts, temperature):
        asked.append((len(prompts), temperature))
        # Problems 0 and 1 are solved by every sample, problem 2 by every other one, 3 never.
        answers = []
        for position, prompt in enumerate(prompts):
            value = int(prompt.split()[1].rstrip("."))
            right = value in (0, 1) or (value == 2 and position % 2 == 0)
            answers.append(f"def f():\n    return {value if right else -1}\n")
        return answers

    trainer = RecordingTrainer()
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=2)) as executor:
        interval = IntervalEvaluation(PROBLEMS, [p.prompt for p in PROBLEMS], executor, sample, every=2, samples=2, temperature=0.2)
        interval.trainer = trainer
        state = TrainerState()
        interval.on_train_begin(None, state, None)
        for step in range(1, 6):
            state.global_step = step
            control = trainer.control = TrainerControl(should_log=True)
            interval.on_step_end(None, state, control)
            assert control.should_log  # the step's own record (loss, learning rate) is still written
        interval.on_train_end(None, state, None)
    assert [n for n, _ in asked] == [8] * 4  # steps 0, 2, 4 and the last (5)
    assert {t for _, t in asked} == {0.2}
    first = trainer.logged[0]
    assert first["interval_eval/pass_at_1"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert first["interval_eval/problems_passed"] == 3
    assert first["interval_eval/pass_at_1_low"] < first["interval_eval/pass_at_1"] < first["interval_eval/pass_at_1_high"]


class CountingEvaluation(IntervalEvaluation):
    def evaluate(self, step):
        self.steps.append(step)
        self._last_step = step


def test_a_resumed_run_does_not_evaluate_step_0_again_and_the_last_step_only_once():
    interval = CountingEvaluation(PROBLEMS[:1], ["Return 0."], None, None, every=2, samples=1, temperature=0.2)
    interval.trainer, interval.steps = RecordingTrainer(), []
    state = TrainerState()
    state.global_step = 4  # resumed from checkpoint-4
    interval.on_train_begin(None, state, None)
    state.global_step = 6
    interval.on_step_end(None, state, TrainerControl(should_log=True))
    interval.on_train_end(None, state, None)
    assert interval.steps == [6]
