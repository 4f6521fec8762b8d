"""Prompt construction and code extraction, shared by generation, SFT and RL."""

from __future__ import annotations

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


def chat_prompt(message: str, config: PromptConfig, tokenizer=None) -> str:
    """`message` as the user's turn, chat-templated as `config` says when the tokenizer has a template."""
    if config.chat_template == "never" or tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return message
    messages = []
    if config.system_prompt is not None:
        messages.append({"role": "system", "content": config.system_prompt})
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
