"""Seed 002's execution reward and the code-output game's reward, on crafted programs and predictions."""

from __future__ import annotations

import pytest

from execrl.code_game import (
    CodeGameRewards,
    CodeGameSettings,
    deterministic,
    game_reward,
    prediction_matches,
)
from execrl.program_rewards import ExecRewardSettings, ProgramRewards, execution_reward
from execrl.prompting import PromptConfig
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.programs import ProgramRun

PROGRAMS = {
    "printed": "print(sum(range(5)))",
    "silent": "def f(x):\n    return x + 1\n",
    "syntax_error": "def f(x)\n    return x",
    "indentation_error": "def f(x):\nreturn x",
    "runtime_error": "print('partial')\n[][1]",
    "timeout": "while True:\n    pass",
}
SEED_002 = {"printed": 1.0, "silent": 0.5, "syntax_error": -0.5, "indentation_error": -0.5, "runtime_error": -1.0, "timeout": -1.0}


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=0.5, wall_timeout_s=2.0, memory_mb=256)) as ex:
        yield ex


def fenced(code: str) -> str:
    return f"Here is my program:\n```python\n{code}\n```\n"


def test_exec_reward_has_seed_002s_values(executor):
    exec_reward = ProgramRewards(executor, ExecRewardSettings()).reward_functions()[0][0]
    logged = {}
    rewards = exec_reward([fenced(code) for code in PROGRAMS.values()], log_metric=logged.__setitem__)
    assert dict(zip(PROGRAMS, rewards)) == SEED_002
    assert logged["program/run_rate"] == pytest.approx(2 / 6)
    assert logged["program/syntax_error_rate"] == pytest.approx(2 / 6)
    assert logged["program/output_chars"] == pytest.approx(len("10\n") / 2)


def test_exec_reward_values_are_configurable(executor):
    settings = ExecRewardSettings(printed=2.0, silent=0.0, syntax_error=-3.0, error=-4.0, timeout=-5.0)
    exec_reward = ProgramRewards(executor, settings).reward_functions()[0][0]
    assert exec_reward(list(PROGRAMS.values())) == [2.0, 0.0, -3.0, -3.0, -4.0, -5.0]


def test_reasoning_format_runs_the_answer_block_only(executor):
    exec_reward = ProgramRewards(executor, ExecRewardSettings(), reasoning_format=True).reward_functions()[0][0]
    completion = "<reasoning>this is not code!</reasoning><answer>print('from the answer')</answer>"
    assert exec_reward([completion]) == [1.0]


@pytest.mark.parametrize(
    "prediction, output, normalized, exact",
    [
        ("10", "10\n", True, True),
        ("1  2\n3", "1 2 3\n", True, False),
        ("```\n[1, 2]\n```", "[1, 2]\n", True, True),
        ("10.0", "10\n", False, False),
        ("", "", True, True),
        ("hello", "", False, False),
    ],
)
def test_prediction_comparison(prediction, output, normalized, exact):
    assert prediction_matches(prediction, output, "normalized") is normalized
    assert prediction_matches(prediction, output, "exact") is exact


def test_game_reward_wins_on_a_wrong_prediction_and_never_pays_more_for_not_running():
    settings, exec_settings = CodeGameSettings(), ExecRewardSettings()
    ran = ProgramRun("ran", "7\n")
    assert game_reward(ran, predicted_right=False, settings=settings, exec_settings=exec_settings) == 1.0
    assert game_reward(ran, predicted_right=True, settings=settings, exec_settings=exec_settings) == -1.0
    # seed 002's exec reward pays -0.5 for a syntax error; in the game that would beat a predicted -1
    assert exec_settings.syntax_error == -0.5
    assert game_reward(ProgramRun("syntax_error"), False, settings, exec_settings) == -1.0
    assert game_reward(ProgramRun("timeout"), False, settings, exec_settings) == -1.0
    # below the loss, the exec reward's own order among failures stands
    harsh = ExecRewardSettings(syntax_error=-3.0, error=-2.0)
    assert game_reward(ProgramRun("syntax_error"), False, settings, harsh) == -3.0
    assert game_reward(ProgramRun("error"), False, settings, harsh) == -2.0


def test_a_program_that_prints_nothing_loses_the_game():
    silent, exec_settings = ProgramRun("ran", ""), ExecRewardSettings()
    # the opponent's prediction was wrong, but printing nothing is not a hard output
    assert game_reward(silent, False, CodeGameSettings(), exec_settings) == -1.0
    assert game_reward(ProgramRun("ran", " \n"), False, CodeGameSettings(), exec_settings) == -1.0
    judged = CodeGameSettings(silent_loses=False)
    assert game_reward(silent, False, judged, exec_settings) == 1.0
    assert game_reward(silent, True, judged, exec_settings) == -1.0


def test_a_second_run_that_differs_is_an_error():
    first = ProgramRun("ran", "0.1\n")
    assert deterministic(first, ProgramRun("ran", "0.1\n")) is first
    flaky = deterministic(first, ProgramRun("ran", "0.7\n"))
    assert flaky.status == "error" and flaky.error_type == "Nondeterministic"
    assert deterministic(first, ProgramRun("timeout")).status == "error"


class ScriptedOpponent:
    """Predicts from a table of program text to answer; records the prompts it saw."""

    def __init__(self, answers: dict[str, str]):
        self.answers = answers
        self.prompts: list[str] = []

    def __call__(self, prompts, temperature, max_tokens):
        self.prompts += prompts
        return [next((a for code, a in self.answers.items() if code in p), "no idea") for p in prompts]


def game(executor, answers, **settings):
    opponent = ScriptedOpponent(answers)
    rewards = CodeGameRewards(
        executor, CodeGameSettings(**settings), ExecRewardSettings(), lambda trainer: opponent, PromptConfig(chat_template="never")
    )
    rewards.bind(trainer=None)
    return rewards, opponent


def test_code_game_on_crafted_programs(executor):
    obvious, tricky = "print(2 + 2)", "print(sum(i * i for i in range(7)))"
    unseeded = "import random\nprint(random.random())"
    clock = "import time\nprint(time.time_ns())"
    rewards, opponent = game(executor, {obvious: "4", tricky: "42"})
    reward = rewards.reward_functions()[0][0]
    logged = {}
    got = reward([obvious, tricky, unseeded, clock, "print(", "1/0"], log_metric=logged.__setitem__)
    # right about 2 + 2, wrong about 91; unpredictable programs do not win, they are errors
    assert got == [-1.0, 1.0, -1.0, -1.0, -1.0, -1.0]
    # a program that does not run ("print(") never scores above one the opponent predicts (2 + 2)
    assert got[4] <= got[0]
    assert logged["code_game/opponent_accuracy"] == pytest.approx(1 / 2)
    assert logged["program/run_rate"] == pytest.approx(2 / 6)
    assert logged["code_game/nondeterministic_rate"] == pytest.approx(2 / 6)
    assert logged["code_game/reward"] == pytest.approx(sum(got) / 6)
    # the opponent saw the code, once per completion, never its output
    assert len(opponent.prompts) == 6 and tricky in opponent.prompts[1] and "91" not in opponent.prompts[1]


def test_without_the_determinism_check_an_unseeded_program_wins(executor):
    unseeded = "import random\nprint(random.random())"
    rewards, _ = game(executor, {}, require_deterministic=False)
    assert rewards.reward_functions()[0][0]([unseeded]) == [1.0]


def test_an_unbound_opponent_is_an_error(executor):
    rewards = CodeGameRewards(executor, CodeGameSettings(), ExecRewardSettings(), lambda t: None, PromptConfig())
    with pytest.raises(RuntimeError, match="not bound"):
        rewards.reward_functions()[0][0](["print(1)"])


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"opponent": "human"}, "code_game.opponent"),
        ({"comparison": "fuzzy"}, "code_game.comparison"),
        ({"opponent_template": "predict {program}"}, "code_game.opponent_template"),
        ({"program_template": "{task}"}, "code_game.program_template"),
    ],
)
def test_bad_settings_name_the_key(settings, message):
    with pytest.raises(ValueError, match=message):
        CodeGameSettings(**settings)


def test_game_prompts_fill_the_templates():
    from execrl.problems import Problem

    rewards, _ = game(None, {})
    problem = Problem(id="p", prompt="  Reverse a list.  ", test_type="assert", tests=["assert f([1]) == [1]"])
    prompt = rewards.prompt(problem, PromptConfig(chat_template="never"), tokenizer=None)
    assert "Task: Reverse a list." in prompt and "assert" not in prompt
    assert rewards.opponent_prompt("print(1)").startswith("What does this Python program print?")
    assert "print(1)" in rewards.opponent_prompt("print(1)")
