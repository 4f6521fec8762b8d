"""Warm-start examples: refinements of broken references confirmed failing by the sandbox, and
the code-output game's two formats."""

import random

from execrl.training.code_game import prediction_matches
from execrl.training.code_game_settings import CodeGameSettings
from execrl.datasets.builtin import generate
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.sandbox import Executor
from execrl.training.srrl import SRRLSettings
from execrl.sandbox.programs import run_programs
from execrl.games import get_game
from execrl.games.moves import parse_move
from execrl.training.spiral import SPIRALSettings
from execrl.training.warm_start import (
    broken_attempts,
    code_game_examples,
    entry_point_call,
    game_move_examples,
    mutations,
    refinement_examples,
)

CONFIG = PromptConfig(template="{prompt}\nTest: {tests}\n", num_tests_shown=1)


def test_mutations_are_small_edits_of_the_reference():
    code = "def f(x):\n    if x > 2:\n        return x + 1\n    return max(x, 0)\n"
    variants = mutations(code, random.Random(0))
    assert code not in variants and len(set(variants)) == len(variants)
    assert "def f(x):\n    if x >= 2:\n        return x + 1\n    return max(x, 0)\n" in variants
    assert "def f(x):\n    if x > 2:\n        return x + 2\n    return max(x, 0)\n" in variants
    assert "def f(x):\n    if x > 2:\n        return x + 1\n    return min(x, 0)\n" in variants
    assert mutations("def f(:\n    '''", random.Random(0)) == []


def test_refinement_examples_quote_a_failing_attempt_and_teach_the_reference():
    train = generate("train", seed=0, n=40)
    with Executor(workers=2) as executor:
        attempts = broken_attempts(train, executor, seed=0)
        examples = refinement_examples(train, 0.5, SRRLSettings(), CONFIG, executor, tokenizer=None, seed=0)
        # Every chosen attempt really fails in the sandbox.
        results = executor.run_batch([(p, attempts[p.id][0]) for p in train if p.id in attempts])
    assert attempts and all(r.status != "pass" for r in results)
    assert 15 <= len(examples) <= 20
    references = {p.reference.strip("\n") + "\n" for p in train}
    for example in examples:
        assert "A previous attempt:" in example["prompt"] and "It failed (" in example["prompt"]
        assert example["completion"] in references
        assert example["completion"].strip() not in example["prompt"]


def test_entry_point_call_is_the_call_in_the_first_test():
    def problem(tests, test_type="assert", entry_point="f"):
        return Problem(id="p", prompt="p", test_type=test_type, tests=tests, entry_point=entry_point)

    assert entry_point_call(problem(["assert f(3, 'a') == 4"])) == "f(3, 'a')"
    assert entry_point_call(problem(["assert 4 == f(3)"])) is None  # the call is not the compared value
    assert entry_point_call(problem(["assert g(3) == 4"])) is None  # not the entry point
    assert entry_point_call(problem(["x = f(1)\nassert x == 2"])) is None
    assert entry_point_call(problem([{"args": [1, [2]], "expected": 3}], "call")) == "f(*[1, [2]])"
    assert entry_point_call(problem([{"input": "1", "output": "2"}], "stdio", None)) is None
    # past what ast.unparse (deep nesting that compiles) or repr (a long integer) take: no call, no crash
    assert entry_point_call(problem(["assert f(" + "-" * 2000 + "1) == 1"])) is None
    assert entry_point_call(problem([{"args": [10**5000], "expected": 3}], "call")) is None


def test_code_game_examples_print_and_give_the_real_output():
    train = generate("train", seed=0, n=40)
    settings = CodeGameSettings()
    with Executor(workers=2) as executor:
        examples = code_game_examples(train, 0.5, settings, CONFIG, executor, tokenizer=None, seed=0)
        programs, outputs = examples[0::2], examples[1::2]
        reruns = run_programs(executor, [e["completion"] for e in programs])
    assert 30 <= len(examples) <= 40
    for program, output, rerun in zip(programs, outputs, reruns, strict=True):
        assert program["prompt"].startswith(settings.program_template.split("{")[0])
        # the call after `result = `, where a small tokenizer spells the name as in `def`
        last_lines = program["completion"].rstrip("\n").split("\n")[-2:]
        assert last_lines[0].startswith("result = ") and last_lines[1] == "print(result)"
        assert program["completion"].strip() in output["prompt"]
        assert rerun.printed and prediction_matches(output["completion"], rerun.stdout, "exact")


def test_game_move_examples_answer_a_legal_move_in_the_format():
    settings = SPIRALSettings(game="tictactoe", observation="compact")
    examples = game_move_examples(settings, 200, CONFIG, tokenizer=None, seed=0)
    assert len(examples) == 200
    moves = set()
    for example in examples:
        legal = tuple(example["prompt"].split("Legal: ")[1].split("\n")[0].replace("[", "").replace("]", "").split())
        parsed = parse_move(example["completion"], legal)
        assert parsed.legal and example["completion"] == f"[{parsed.move}]"
        moves.add(parsed.move)
    assert moves == {str(i) for i in range(9)}  # random play reaches every cell
    # later positions too, not only first moves
    assert sum(example["prompt"].count("X") > 1 for example in examples) > 50
    kuhn = game_move_examples(SPIRALSettings(game="kuhn_poker"), 20, CONFIG, tokenizer=None, seed=0)
    assert all(get_game("kuhn_poker").title in e["prompt"] for e in kuhn)
