"""SRRL's refinement prompt: a failed attempt, its execution feedback, and the request to fix it.

The second prompt format beside `execrl.prompting`'s first attempt. SRRL trains on it
(`execrl.training.srrl`), the tiny model's warm start writes examples in it
(`execrl.training.warm_start`), and the report's refinement examples are sampled on it
(`execrl.evaluation.refinement_samples`). It reads three of SRRL's settings
(`execrl.training.srrl.SRRLSettings`): `feedback_tests`, `refinement_template` and `max_trace_chars`.
"""

from __future__ import annotations

from typing import Protocol

from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt, user_message

DEFAULT_REFINEMENT_TEMPLATE = (
    "{prompt}\nA previous attempt:\n{code}\nIt failed ({status}): {error}\n{failed_tests}\n"
    "Write a corrected program.\n"
)
FEEDBACK_TESTS = ("shown", "all", "none")


class RefinementSettings(Protocol):
    """What a refinement prompt reads of SRRL's settings (`execrl.training.srrl.SRRLSettings`)."""

    feedback_tests: str
    """Which tests the prompt may quote: `shown`, `all` or `none` (FEEDBACK_TESTS)."""
    refinement_template: str
    """Format string with {prompt}, {code}, {status}, {error}, {failed_tests}, {trace}."""
    max_trace_chars: int


def allowed_test_indices(problem: Problem, settings: RefinementSettings, prompt_config: PromptConfig) -> set[int]:
    if settings.feedback_tests == "all":
        return set(range(len(problem.tests)))
    if settings.feedback_tests == "shown":
        return set(range(min(prompt_config.num_tests_shown, len(problem.tests))))
    return set()


def describe_test(problem: Problem, index: int) -> str:
    test = problem.tests[index]
    if problem.test_type == "assert":
        return test
    if problem.test_type == "stdio":
        return f"input {test['input']!r} expects output {test['output']!r}"
    return f"{problem.entry_point}(*{test['args']!r}) expects {test['expected']!r}"


def quotable_test_indices(
    problem: Problem, judged: Problem, settings: RefinementSettings, prompt_config: PromptConfig
) -> set[int]:
    """The indices of `result`'s test outcomes that feedback may quote, where the result was
    judged on `judged`'s tests: those feedback may show of the problem's own, and only where the
    judged test at that index is the problem's own. A reward that runs a problem's first
    `max_tests` tests and then its held-out tests (`RewardSettings.rewarded`) puts held-out
    tests at indices the problem's own tests also have: never quoted, nor their errors."""
    allowed = allowed_test_indices(problem, settings, prompt_config)
    return {i for i in allowed if i < len(judged.tests) and judged.tests[i] == problem.tests[i]}


def refinement_message(
    problem: Problem,
    code: str,
    result: dict,
    settings: RefinementSettings,
    prompt_config: PromptConfig,
    judged: Problem | None = None,
) -> str:
    """The user message asking to fix a failed attempt, quoting only the tests feedback may show.
    `judged`: the problem whose tests `result` is indexed over, when it is not `problem` itself."""
    allowed = quotable_test_indices(problem, judged or problem, settings, prompt_config)
    failed = [o for o in result.get("test_outcomes", []) if o.get("status") != "pass" and o.get("status") != "not_run"]
    visible_failures = [o for o in failed if o.get("index") in allowed]
    first_failure_visible = not failed or failed[0].get("index") in allowed or result["status"] == "syntax_error"
    if first_failure_visible:
        error = f"{result.get('error_type') or result['status']}: {result.get('error_message') or ''}".strip()
        # `trace[-0:]` would be the whole trace: 0 characters means none.
        trace = (result.get("trace") or "")[-settings.max_trace_chars :] if settings.max_trace_chars else ""
    else:
        error, trace = "a hidden test did not pass", ""
    failed_tests = "\n".join(f"Failed test: {describe_test(problem, o['index'])}" for o in visible_failures)
    return settings.refinement_template.format(
        prompt=user_message(problem, prompt_config).rstrip("\n"),
        code=code,
        status=result["status"],
        error=error.rstrip(": "),
        failed_tests=failed_tests,
        trace=trace,
    )


def refinement_prompt(problem, code, result, settings, prompt_config, tokenizer=None, judged=None) -> str:
    message = refinement_message(problem, code, result, settings, prompt_config, judged)
    # Reuse the chat-template path of first prompts with the refinement as the user's message.
    return build_prompt(
        Problem(id=problem.id, prompt=message, test_type=problem.test_type, tests=problem.tests, entry_point=problem.entry_point),
        PromptConfig(template="{prompt}", num_tests_shown=0, chat_template=prompt_config.chat_template, system_prompt=prompt_config.system_prompt),
        tokenizer,
    )
