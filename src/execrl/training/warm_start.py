"""Warm-start examples in the formats of methods a model fine-tuned only on first attempts never saw.

- SRRL's refinements: a broken attempt, its real execution feedback, the fix. A model fine-tuned
  only on first attempts has never seen a refinement prompt, so SRRL's refinements (c2) start far
  out of its distribution. Examples in SRRL's own template, built from a deliberately broken copy
  of the reference solution and the feedback the sandbox gives for it, with the reference as the
  completion, give c2 a working start.
- The code-output game: a program that prints (the reference solution, the call of its first
  test assigned to `result`, and `print(result)`) answering the game's prompt, and that
  program's real output (run in the sandbox) answering the opponent's prompt, so both players
  start able to play. The call follows `result = ` rather than `print(` because a small BPE
  tokenizer spells a name after a space (`def h`, `= h`) as one token but splits it after `(`:
  the tiny model then has to copy the token it wrote in `def`, which it learns, instead of
  respelling the name, which it does not (most of its programs then failed with a NameError).
- SPIRAL's game: the observation of a state reached by random play, answered by a uniformly
  random legal move in the answer format. The model learns the format and the rules' legal moves,
  not a strategy: what it wins beyond a random player, self-play taught it.
"""

from __future__ import annotations

import ast
import io
import random
import tokenize

from execrl.training.code_game import game_prompt, opponent_prompt
from execrl.training.code_game_settings import CodeGameSettings
from execrl.games import get_game
from execrl.problems import Problem
from execrl.prompting import PromptConfig, chat_prompt
from execrl.sandbox.programs import run_programs
from execrl.training.spiral import SPIRALSettings
from execrl.refinement import refinement_prompt
from execrl.training.srrl import SRRLSettings

_OPERATOR_SWAPS = {
    "+": "-", "-": "+", "*": "+", "//": "%", "%": "//", "<": "<=", "<=": "<", ">": ">=", ">=": ">",
    "==": "!=", "!=": "==",
}
_NAME_SWAPS = {"and": "or", "or": "and", "True": "False", "False": "True", "min": "max", "max": "min"}


def _replace_token(code: str, token: tokenize.TokenInfo, text: str) -> str:
    lines = code.splitlines(keepends=True)
    (row, start), (_, end) = token.start, token.end
    line = lines[row - 1]
    lines[row - 1] = line[:start] + text + line[end:]
    return "".join(lines)


def mutations(code: str, rng: random.Random) -> list[str]:
    """Small edits of `code` (an operator, a constant, a name swapped; a line dropped), shuffled."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    variants = []
    for token in tokens:
        if token.type == tokenize.OP and token.string in _OPERATOR_SWAPS:
            variants.append(_replace_token(code, token, _OPERATOR_SWAPS[token.string]))
        elif token.type == tokenize.NAME and token.string in _NAME_SWAPS:
            variants.append(_replace_token(code, token, _NAME_SWAPS[token.string]))
        elif token.type == tokenize.NUMBER and token.string.isdigit():
            variants.append(_replace_token(code, token, str(int(token.string) + 1)))
    lines = code.rstrip("\n").splitlines()
    if len(lines) > 1:
        variants.append("\n".join(lines[:-1]) + "\n")
    rng.shuffle(variants)
    return variants


def broken_attempts(problems: list[Problem], executor, seed: int, tries: int = 4) -> dict[str, tuple[str, dict]]:
    """Per problem id: a mutated reference that the sandbox confirms fails, with its result."""
    rng = random.Random(seed)
    candidates = {p.id: mutations(p.reference, rng)[:tries] for p in problems if p.reference}
    items = [(p, code) for p in problems for code in candidates.get(p.id, [])]
    results = executor.run_batch(items) if items else []
    chosen: dict[str, tuple[str, dict]] = {}
    for (problem, code), result in zip(items, results, strict=True):
        if problem.id not in chosen and result.status != "pass":
            chosen[problem.id] = (code, result.to_dict())
    return chosen


def refinement_examples(
    problems: list[Problem],
    share: float,
    srrl: SRRLSettings,
    prompt_config: PromptConfig,
    executor,
    tokenizer,
    seed: int = 0,
) -> list[dict]:
    """Prompt-completion pairs in SRRL's refinement template for a seeded `share` of the problems."""
    with_reference = [p for p in problems if p.reference]
    picked = random.Random(seed).sample(with_reference, round(share * len(with_reference)))
    attempts = broken_attempts(picked, executor, seed)
    examples = []
    for problem in picked:
        if problem.id not in attempts:
            continue
        code, result = attempts[problem.id]
        prompt = refinement_prompt(problem, code.rstrip("\n"), result, srrl, prompt_config, tokenizer)
        examples.append({"prompt": prompt, "completion": problem.reference.strip("\n") + "\n"})
    return examples


def entry_point_call(problem: Problem) -> str | None:
    """The call of the problem's entry point in its first test, as source (`f(3)`), if it has one."""
    if not problem.tests:
        return None
    # a data set's test can be past what the parser, the unparser or repr take (deep nesting, an
    # integer of more than 4300 digits): such a problem has no call to show
    try:
        return _first_call(problem, problem.tests[0])
    except (SyntaxError, IndexError, ValueError, MemoryError, RecursionError):
        return None


def _first_call(problem: Problem, test) -> str | None:
    if problem.test_type == "call" and problem.entry_point:
        return f"{problem.entry_point}(*{test['args']!r})"
    if problem.test_type != "assert":
        return None
    statement = ast.parse(test).body[0]
    if isinstance(statement, ast.Assert) and isinstance(statement.test, ast.Compare):
        left = statement.test.left
        if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == problem.entry_point:
            return ast.unparse(left)
    return None


def code_game_examples(
    problems: list[Problem],
    share: float,
    settings: CodeGameSettings,
    prompt_config: PromptConfig,
    executor,
    tokenizer,
    seed: int = 0,
) -> list[dict]:
    """For a seeded `share` of the problems: the game's prompt answered by a printing program, and the
    opponent's prompt for that program answered by what it printed in the sandbox."""
    programs = {
        p.id: f"{p.reference.strip()}\n\nresult = {call}\nprint(result)\n"
        for p in problems
        if p.reference and (call := entry_point_call(p))
    }
    eligible = [p for p in problems if p.id in programs]
    picked = random.Random(seed).sample(eligible, round(share * len(eligible)))
    runs = run_programs(executor, [programs[p.id] for p in picked])
    examples = []
    for problem, run in zip(picked, runs, strict=True):
        if not run.printed or run.stdout_truncated:
            continue
        program = programs[problem.id]
        examples.append({"prompt": game_prompt(problem, settings, prompt_config, tokenizer), "completion": program})
        examples.append({"prompt": opponent_prompt(program.rstrip("\n"), settings, prompt_config, tokenizer), "completion": run.stdout})
    return examples


def game_move_examples(settings: SPIRALSettings, n: int, prompt_config: PromptConfig, tokenizer, seed: int = 0) -> list[dict]:
    """`n` turns of random play of SPIRAL's game: the observation of the player to move, answered
    by a uniformly random legal move written in the answer format."""
    game, rules = get_game(settings.game), settings.match_rules()
    rng = random.Random(f"{seed}/game-moves")
    examples = []
    while len(examples) < n:
        state = game.initial_state(rng)
        while not game.is_terminal(state) and len(examples) < n:
            player = game.current_player(state)
            move = rng.choice(game.legal_moves(state))
            observation = game.observation(state, player, rules.answer_format, rules.observation == "compact")
            examples.append({"prompt": chat_prompt(observation, prompt_config, tokenizer), "completion": rules.answer_format.render(move)})
            state = game.apply_move(state, move)
    return examples
