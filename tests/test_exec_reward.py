"""Seed 002's execution reward and the code-output game's reward, on crafted programs and predictions."""

from __future__ import annotations

import os

import pytest

from execrl.training.code_game import (
    CodeGameRewards,
    deterministic,
    game_reward,
    prediction_matches,
)
from execrl.training.code_game_settings import CodeGameSettings
from execrl.training.exec_reward import ExecRewardSettings, ProgramRewards
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


def test_game_rewards_are_the_configured_win_and_loss():
    """`code_game.win` and `code_game.loss` are what a program that beats, or loses to, the opponent earns."""
    settings, exec_settings = CodeGameSettings(win=2.5, loss=-0.25), ExecRewardSettings()
    ran = ProgramRun("ran", "7\n")
    assert game_reward(ran, predicted_right=False, settings=settings, exec_settings=exec_settings) == 2.5
    assert game_reward(ran, predicted_right=True, settings=settings, exec_settings=exec_settings) == -0.25
    # not running pays the lower of the exec reward (-0.5 for a syntax error) and the loss
    assert game_reward(ProgramRun("syntax_error"), False, settings, exec_settings) == -0.5


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
    # an object's default repr prints its address: the same within one worker, not across two,
    # so it is refused whether the two runs landed on one worker or on two
    point = ProgramRun("ran", "<__main__.Point object at 0x7fc2c108a790>\n")
    assert deterministic(point, point).error_type == "Nondeterministic"
    assert deterministic(ProgramRun("ran", "0xdeadbeef\n"), ProgramRun("ran", "0xdeadbeef\n")).status == "ran"


class ByteTokenizer:
    """One token per byte of UTF-8: the tokenizer interface the game counts output with."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(text.encode())}

    def decode(self, ids):
        return bytes(ids).decode(errors="ignore")


class ScriptedOpponent:
    """Predicts from a table of program text to answer, writing at most `max_tokens` tokens of it
    (as a sampler stops there); records the prompts it saw."""

    def __init__(self, answers: dict[str, str], tokenizer=ByteTokenizer()):
        self.answers = answers
        self.tokenizer = tokenizer
        self.prompts: list[str] = []

    def __call__(self, prompts, temperature, max_tokens):
        self.prompts += prompts
        answers = [next((a for code, a in self.answers.items() if code in p), "no idea") for p in prompts]
        return [self.tokenizer.decode(self.tokenizer(a)["input_ids"][:max_tokens]) for a in answers]


def game(executor, answers, **settings):
    from execrl.problems import Problem

    opponent = ScriptedOpponent(answers)
    prompt_config = PromptConfig(chat_template="never")
    rewards = CodeGameRewards(
        executor, CodeGameSettings(**settings), ExecRewardSettings(), lambda trainer: opponent, prompt_config
    )
    # the trainer builds the game's prompts with its tokenizer, which the game then counts output with
    rewards.prompt(Problem(id="p", prompt="Print.", test_type="assert", tests=["assert True"]), prompt_config, ByteTokenizer())
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


@pytest.mark.parametrize("workers", [1, 2])
def test_addresses_hashes_and_uids_are_refused_with_any_number_of_workers(workers):
    """A bare address, a hash of one and the worker's uid cannot be predicted from the code. The
    second run is in a pool of its own, so it never shares the first's process: the program is
    refused with one worker as with two (in one pool, one worker ran both runs in processes forked
    from one forker, with one address layout and one uid, and they passed). Workers get uids of
    their own only in the sandbox's root mode (run as root); elsewhere the uid is one constant."""
    unpredictable = ["print(id(int))", "print(hash(object()))"] + (["import os\nprint(os.getuid())"] if os.geteuid() == 0 else [])
    fixed = "print(sum(range(10)))"
    limits = ExecutionLimits(timeout_s=0.5, wall_timeout_s=2.0, memory_mb=256)
    with Executor(workers=workers, limits=limits) as pool:
        rewards, _ = game(pool, {})
        try:
            logged = {}
            got = rewards.reward_functions()[0][0]([*unpredictable, fixed], log_metric=logged.__setitem__)
            assert rewards.second_pool() is not pool and rewards.second_pool().workers == workers
        finally:
            rewards.close()
    assert got == [-1.0] * len(unpredictable) + [1.0]  # refused (an error), and a fixed output the opponent missed wins
    assert logged["code_game/nondeterministic_rate"] == pytest.approx(len(unpredictable) / (len(unpredictable) + 1))


def test_without_the_determinism_check_an_unseeded_program_wins(executor):
    unseeded = "import random\nprint(random.random())"
    rewards, _ = game(executor, {}, require_deterministic=False)
    assert rewards.reward_functions()[0][0]([unseeded]) == [1.0]


def test_output_longer_than_the_opponent_may_write_loses(executor):
    """The opponent writes at most max_prediction_tokens tokens, so longer output can never be
    predicted: without the rule printing a long string wins every game, even against an opponent
    that knows every program's output."""
    limit = 16
    at_limit, long = "print('a' * 16)", "print('a' * 17)"
    spaced = "print('a ' * 16)"  # 32 characters, 31 once the comparison collapses white space
    knows_all = {at_limit: "a" * 16, long: "a" * 17, spaced: "a " * 16}
    rewards, _ = game(executor, knows_all, max_prediction_tokens=limit)
    logged = {}
    got = rewards.reward_functions()[0][0]([at_limit, long, spaced], log_metric=logged.__setitem__)
    # the exploit no longer pays: long output gets no more than a program the opponent predicts
    assert got == [-1.0, -1.0, -1.0]
    assert logged["code_game/long_output_rate"] == pytest.approx(2 / 3)
    assert logged["code_game/opponent_accuracy"] == pytest.approx(1 / 3)  # it could write only the first
    exploitable, _ = game(executor, knows_all, max_prediction_tokens=limit, long_output_loses=False)
    assert exploitable.reward_functions()[0][0]([at_limit, long, spaced]) == [-1.0, 1.0, 1.0]
    # the length is what the comparison reads: exact keeps the spaces, normalized collapses them
    assert rewards.too_long([ProgramRun("ran", "a  b\n" * 4)]) == [False]  # "a b a b a b a b": 15 tokens
    exact, _ = game(executor, {}, max_prediction_tokens=limit, comparison="exact")
    assert exact.too_long([ProgramRun("ran", "a  b\n" * 4)]) == [True]  # 19 tokens
    # output the sandbox cut off is long; a program that did not run is scored as before
    assert rewards.too_long([ProgramRun("ran", "a", stdout_truncated=True), ProgramRun("error", "a" * 99)]) == [True, False]


def test_game_reward_of_long_output():
    settings, exec_settings = CodeGameSettings(), ExecRewardSettings()
    ran = ProgramRun("ran", "x" * 500)
    assert game_reward(ran, False, settings, exec_settings, too_long=True) == settings.loss
    assert game_reward(ran, False, CodeGameSettings(long_output_loses=False), exec_settings, too_long=True) == settings.win
    assert game_reward(ProgramRun("syntax_error"), False, settings, ExecRewardSettings(syntax_error=-3.0), too_long=True) == -3.0


def test_counting_output_needs_the_trainers_tokenizer(executor):
    rewards = CodeGameRewards(executor, CodeGameSettings(), ExecRewardSettings(), lambda t: ScriptedOpponent({}), PromptConfig())
    rewards.bind(trainer=None)
    with pytest.raises(RuntimeError, match="long_output_loses counts tokens"):
        rewards.reward_functions()[0][0](["print(1)"])
    silent = CodeGameRewards(
        executor, CodeGameSettings(long_output_loses=False), ExecRewardSettings(), lambda t: ScriptedOpponent({}), PromptConfig()
    )
    silent.bind(trainer=None)
    assert silent.reward_functions()[0][0](["print(1)"]) == [1.0]


def test_the_policy_cannot_be_its_own_opponent():
    """Its predictions would never be trained, and a wrong one is its own win: it would learn to predict worse."""
    from execrl.config import ConfigError, check_retired

    with pytest.raises(ValueError, match="code_game.opponent: policy is no longer an opponent.*predicting worse; use base"):
        CodeGameSettings(opponent="policy")
    with pytest.raises(ConfigError, match="^code_game.opponent: policy is no longer"):
        check_retired({"code_game": {"opponent": "policy"}})
    with pytest.raises(ConfigError, match="^method_overrides.code_game.code_game.opponent: policy"):
        check_retired({"method_overrides": {"code_game": {"code_game": {"opponent": "policy"}}}})
    with pytest.raises(ConfigError, match="^method_variants.game2.overrides.code_game.opponent: policy"):
        check_retired({"method_variants": {"game2": {"method": "code_game", "overrides": {"code_game": {"opponent": "policy"}}}}})
    check_retired({"code_game": {"opponent": "base"}})


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
    # `code_game.program_template` and `opponent_template` are the prompts' text.
    own, _ = game(None, {}, program_template="Make it hard: {prompt}", opponent_template="Guess:\n{code}")
    assert "Make it hard: Reverse a list." in own.prompt(problem, PromptConfig(chat_template="never"), tokenizer=None)
    assert "Guess:\nprint(1)" in own.opponent_prompt("print(1)") and "What does" not in own.opponent_prompt("print(1)")
