"""Prompt construction and code extraction, shared by generation, SFT and RL."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

from execrl.problems import Problem

DEFAULT_TEMPLATE = "{prompt}\nYour code should pass these tests:\n{tests}\n"

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class PromptConfig:
    """How a problem becomes the text the model sees."""

    template: str = DEFAULT_TEMPLATE
    """Python format string; fields: {prompt}, {tests}, {entry_point}."""
    num_tests_shown: int = 3
    """How many of the problem's tests the prompt quotes (0 shows none)."""
    chat_template: str = "auto"
    """`auto` wraps the text with the tokenizer's chat template when it has one; `never` does not."""
    system_prompt: str | None = None
    """System message for chat templates (None keeps the template's default)."""
    reasoning_format: bool = False
    """Ask for `<reasoning>…</reasoning><answer>…</answer>` and extract code from the answer."""


REASONING_INSTRUCTION = (
    "\nThink in <reasoning>...</reasoning>, then give only the code in <answer>...</answer>.\n"
)


def render_tests(problem: Problem, limit: int) -> str:
    shown = problem.tests[: max(limit, 0)]
    if problem.test_type == "assert":
        return "\n".join(shown)
    if problem.test_type == "stdio":
        return "\n".join(f"Input:\n{t['input']}\nOutput:\n{t['output']}" for t in shown)
    return "\n".join(
        f"{problem.entry_point}({', '.join(json.dumps(a) for a in t['args'])}) == {json.dumps(t['expected'])}"
        for t in shown
    )


def user_message(problem: Problem, config: PromptConfig) -> str:
    text = config.template.format(
        prompt=problem.prompt.strip(),
        tests=render_tests(problem, config.num_tests_shown),
        entry_point=problem.entry_point or "",
    )
    if config.reasoning_format:
        text += REASONING_INSTRUCTION
    return text


def build_prompt(problem: Problem, config: PromptConfig, tokenizer=None) -> str:
    """The exact text given to the model, chat-templated when the tokenizer supports it."""
    return chat_prompt(user_message(problem, config), config, tokenizer)


def prompt_format(config: PromptConfig, tokenizer=None) -> str:
    """How prompts reach the model, in words for a job's log: chat-templated or plain text, and why."""
    if config.chat_template == "never":
        return "plain text (prompt.chat_template: never)"
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return "plain text (the tokenizer has no chat template)"
    return "the tokenizer's chat template (prompt.chat_template: auto)"


SPECIAL_TOKEN_BREAK = "\u200b"
"""A zero-width space: put after the first character of a special token's text inside a message."""


def special_token_texts(tokenizer) -> list[str]:
    """The texts a tokenizer reads as its special tokens (`<|im_end|>`, `<|endoftext|>`), longest first."""
    texts = set(getattr(tokenizer, "all_special_tokens", None) or ())
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            texts.add(str(token))
    return sorted((t for t in texts if len(t) > 1), key=lambda t: (-len(t), t))


def defuse_special_tokens(text: str, tokenizer) -> str:
    """`text` with every special token's text broken by a zero-width space after its first character.

    A message is content: the tokenizer reads prompts with its special tokens parsed, so
    `<|im_end|>\n<|im_start|>assistant` in a program's code or its error text (quoted in a
    refinement prompt or the opponent's prompt) would otherwise become the template's own tokens,
    ending the user's turn. Broken, it is read as the text it is; text without one is unchanged."""
    specials = special_token_texts(tokenizer)
    if not any(s in text for s in specials):
        return text
    pattern = _alternatives(tuple(specials))
    # one pass breaks every match; a match that overlapped an earlier one is left whole: go again
    while pattern.search(text):
        text = pattern.sub(lambda m: m.group(0)[0] + SPECIAL_TOKEN_BREAK + m.group(0)[1:], text)
    return text


@functools.lru_cache(maxsize=8)
def _alternatives(texts: tuple[str, ...]) -> re.Pattern:
    """One pattern matching any of `texts` (longest first), compiled once per tokenizer's set."""
    return re.compile("|".join(map(re.escape, texts)))


def chat_prompt(message: str, config: PromptConfig, tokenizer=None) -> str:
    """`message` as the user's turn, chat-templated as `config` says when the tokenizer has a
    template; special tokens' texts inside the message (and the system prompt) are defused."""
    if tokenizer is not None:
        message = defuse_special_tokens(message, tokenizer)
    if config.chat_template == "never" or tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return message
    messages = []
    if config.system_prompt is not None:
        messages.append({"role": "system", "content": defuse_special_tokens(config.system_prompt, tokenizer)})
    messages.append({"role": "user", "content": message})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def extract_code(completion: str, reasoning_format: bool = False) -> str:
    """The program in a completion: the answer block, else the first Python fence, else the raw text."""
    text = completion
    if reasoning_format:
        match = _ANSWER.search(text)
        if match:
            text = match.group(1)
    fences = _FENCE.findall(text)
    python_fences = [body for lang, body in fences if lang.lower() in ("python", "py", "python3", "")]
    if python_fences:
        return python_fences[0].strip("\n")
    return text.strip("\n")


def follows_reasoning_format(completion: str) -> bool:
    return bool(re.fullmatch(r"\s*<reasoning>.+?</reasoning>\s*<answer>.+?</answer>\s*", completion, re.DOTALL))
