"""Settings of the games and of the held-out tests change what they name: the code game's
opponent's sampling temperature, SPIRAL's evaluation temperature and opponents, and the time
limit of the reference's runs that make held-out tests. Each test compares two values of one
setting on real objects (the tiny model, the sandbox)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

from conftest import build_tiny_model
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.sandbox import Executor

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")
PLAIN = PromptConfig(template="{prompt}\n", num_tests_shown=0, chat_template="never")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    texts = ["print(1 + 2)\n3\n", "What does this Python program print?", "[0] [1] [2] [3] [4]"] * 30
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts)


def trainer_of(model_path: str):
    """What the code game's opponent and SPIRAL's evaluation read of a trainer on one CPU process:
    its tokenizer, accelerator and model, with `log` keeping what it is given."""
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logged: list[dict] = []
    return SimpleNamespace(
        processing_class=AutoTokenizer.from_pretrained(model_path),
        accelerator=Accelerator(cpu=True),
        model_wrapped=AutoModelForCausalLM.from_pretrained(model_path).eval(),
        args=SimpleNamespace(gradient_checkpointing_kwargs=None),
        log=logged.append,
        logged=logged,
    )


# ------------------------------------------------------------------ code_game.opponent_temperature


@linux_only
def test_the_opponent_samples_its_predictions_at_the_opponent_temperature(tiny_model):
    """One program shown to the opponent eight times: at `opponent_temperature` 0 it predicts the
    same output every time (greedy), at 3 the eight predictions differ."""
    from execrl.training.code_game import CodeGameRewards, opponent_predictor
    from execrl.training.code_game_settings import CodeGameSettings
    from execrl.training.exec_reward import ExecRewardSettings

    trainer = trainer_of(tiny_model)
    completions = ["```python\nprint(1 + 2)\n```"] * 8
    predictions = {}
    with Executor(workers=1) as executor:
        for temperature in (0.0, 3.0):
            settings = CodeGameSettings(opponent_temperature=temperature, max_prediction_tokens=12,
                                        require_deterministic=False)  # fmt: skip
            game = CodeGameRewards(executor, settings, ExecRewardSettings(), opponent_predictor(settings, tiny_model), PLAIN)
            game.prompt(Problem(id="p", prompt="Print a number.", test_type="assert", tests=["assert True"]), PLAIN,
                        trainer.processing_class)
            game.bind(trainer)
            torch.manual_seed(0)
            runs, _, predictions[temperature] = game.play(completions)
            assert all(run.ran and run.stdout == "3\n" for run in runs)
    assert len(set(predictions[0.0])) == 1
    assert len(set(predictions[3.0])) > 1


# ---------------------------------------------------------- spiral.eval_temperature, eval_opponents


def evaluation_of(model_path: str, **spiral):
    """SPIRAL's evaluation (`GameEvaluation`) of the tiny model as a trainer samples it
    (`TransformersPolicySampler`), recording the temperature of every sampling call."""
    from execrl.generation.policy_sampling import TransformersPolicySampler
    from execrl.generation.sampling import SamplingSettings
    from execrl.training.spiral_trainer import GameEvaluation, SelfPlayTask
    from execrl.training.spiral import SPIRALSettings

    temperatures: list[float | None] = []

    class RecordingSampler(TransformersPolicySampler):
        def __call__(self, prompt_texts, temperature=None):
            temperatures.append(temperature)
            return super().__call__(prompt_texts, temperature)

    # Kuhn poker: its perfect opponent is a fixed strategy (tic-tac-toe's searches the game tree).
    settings = SPIRALSettings(game="kuhn_poker", observation="compact", eval_every=1, eval_games=2, **spiral)
    task = SelfPlayTask(settings, PLAIN, seed=0)
    trainer = trainer_of(model_path)
    evaluation = GameEvaluation(task, lambda trainer: RecordingSampler(trainer, 6, SamplingSettings(temperature=1.0)))
    evaluation.trainer = trainer
    return evaluation, trainer.logged, temperatures


def test_the_evaluation_samples_at_eval_temperature(tiny_model, monkeypatch):
    """`spiral.eval_temperature` is the temperature of every sampling call of the evaluation: at 0
    two evaluations give the same replies (greedy), at 3 they differ; the sampler's own
    temperature (1.0 here, the rollouts') is never used."""
    from execrl.games import play

    replies: list[list[str]] = []
    original = play.play_matches

    def recording_matches(*args, **kwargs):
        episodes = original(*args, **kwargs)
        replies.append([turn.completion for episode in episodes for turn in episode.turns if turn.completion])
        return episodes

    monkeypatch.setattr("execrl.training.spiral.play_matches", recording_matches)
    for temperature in (0.0, 3.0):
        evaluation, _, temperatures = evaluation_of(tiny_model, eval_temperature=temperature)
        torch.manual_seed(0)
        evaluation.evaluate(0)
        evaluation.evaluate(1)
        assert temperatures and set(temperatures) == {temperature}
    greedy_first, greedy_second, hot_first, hot_second = replies
    assert greedy_first and greedy_first == greedy_second
    assert hot_first != hot_second


def test_the_evaluation_plays_only_eval_opponents(tiny_model):
    """`spiral.eval_opponents`: the logged record has rates against those opponents and no other."""
    def opponents_logged(**spiral) -> set[str]:
        evaluation, logged, _ = evaluation_of(tiny_model, eval_temperature=0.0, **spiral)
        evaluation.evaluate(0)
        (record,) = logged
        return {name.split("/")[2] for name in record}

    assert opponents_logged() == {"random", "perfect"}
    assert opponents_logged(eval_opponents=["random"]) == {"random"}
    assert opponents_logged(eval_opponents=["perfect"]) == {"perfect"}


# ------------------------------------------------------------------------------- plus_tests.timeout_s

SLOW_OFF_THE_VISIBLE_INPUTS = Problem(
    id="slow", prompt="Triple x.", test_type="assert", entry_point="f",
    tests=["assert f(1) == 3", "assert f(2) == 6"],
    # A pure-Python loop of a quarter of a second of CPU or more on every input but the visible ones.
    reference="def f(x):\n    if x not in (1, 2):\n        n = 0\n        for _ in range(10_000_000):\n"
              "            n += 1\n    return 3 * x\n",
)  # fmt: skip


@linux_only
def test_the_reference_is_cut_at_the_plus_tests_timeout():
    """`plus_tests.timeout_s` is the CPU time the reference gets per input when held-out tests are
    made (`make_plus_tests_sandboxed`, the workflow's way): the reference above passes its visible
    tests under either limit, but keeps held-out tests only where the limit lets its slow inputs finish."""
    from execrl.watch.plus_tests import PlusTestSettings, make_plus_tests_sandboxed

    kept = {}
    for timeout_s in (0.1, 10.0):
        settings = PlusTestSettings(tests_per_problem=2, candidates_per_test=1, hash_seeds=(1,), timeout_s=timeout_s)
        (problem,), report = make_plus_tests_sandboxed([SLOW_OFF_THE_VISIBLE_INPUTS], settings, workers=2, memory_mb=512)
        assert report.skipped == {}  # the visible tests pass under either limit
        kept[timeout_s] = problem.plus_tests
    assert kept[0.1] == []
    assert len(kept[10.0]) == 2 and all(test.startswith("assert f(") for test in kept[10.0])


@linux_only
def test_the_memory_cap_decides_whether_a_program_that_needs_the_memory_passes():
    """`execution.memory_mb`, handed to the sandbox as the workflow does (`ExecutionLimits(**execution)`):
    a correct program that holds 400 MB passes under 1024 MB and fails under 256 MB."""
    from execrl.config import merged_config
    from execrl.sandbox import ExecutionLimits

    problem = Problem(id="m/0", prompt="f() returns the length of a 400 MB buffer.", test_type="assert",
                      tests=["assert f() == 400 * 2**20"], entry_point="f")  # fmt: skip
    program = "def f():\n    buffer = bytearray(400 * 2**20)\n    return len(buffer)\n"
    execution = {key: value for key, value in merged_config()["execution"].items() if key != "workers"}
    verdicts = {}
    for memory_mb in (256, 1024):
        with Executor(workers=1, limits=ExecutionLimits(**{**execution, "memory_mb": memory_mb})) as executor:
            verdicts[memory_mb] = executor.run(problem, program)
    assert verdicts[1024].status == "pass", verdicts[1024]
    assert (verdicts[256].status, verdicts[256].error_type) == ("error", "MemoryError"), verdicts[256]
