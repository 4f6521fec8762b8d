"""Refinement-shaped warm-start examples: a broken attempt, its real execution feedback, the fix.

A model fine-tuned only on first attempts has never seen a refinement prompt, so SRRL's
refinements (c2) start far out of its distribution. Adding some examples in SRRL's own
template, built from a deliberately broken copy of the reference solution and the feedback the
sandbox gives for it, with the reference as the completion, gives c2 a working start.
"""

from __future__ import annotations

import io
import random
import tokenize

from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.srrl import SRRLSettings, refinement_prompt

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
