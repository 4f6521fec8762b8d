from execrl.problems import Problem
from execrl.prompting import (PromptConfig, build_prompt, extract_code, follows_reasoning_format, prompt_format,
                              user_message)


def problem(**overrides):
    fields = dict(
        id="p/1",
        prompt="Write a function add(a, b).",
        test_type="assert",
        tests=["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
        entry_point="add",
    )
    fields.update(overrides)
    return Problem(**fields)


class ChatTokenizer:
    chat_template = "yes"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


def test_template_shows_requested_tests():
    text = user_message(problem(), PromptConfig(template="{prompt}|{tests}|{entry_point}", num_tests_shown=1))
    assert text == "Write a function add(a, b).|assert add(1, 2) == 3|add"


def test_stdio_and_call_tests_render():
    stdio = problem(test_type="stdio", tests=[{"input": "1 2\n", "output": "3\n"}])
    assert "Input:\n1 2" in user_message(stdio, PromptConfig(template="{tests}"))
    call = problem(test_type="call", tests=[{"args": [1, [2]], "expected": "x"}])
    assert user_message(call, PromptConfig(template="{tests}")) == 'add(1, [2]) == "x"'


def test_chat_template_used_only_when_available():
    config = PromptConfig(template="{prompt}", system_prompt="be brief")
    assert build_prompt(problem(), config, ChatTokenizer()) == (
        "<system>be brief<user>Write a function add(a, b).<assistant>"
    )
    assert build_prompt(problem(), PromptConfig(template="{prompt}", chat_template="never"), ChatTokenizer()) == (
        "Write a function add(a, b)."
    )
    assert build_prompt(problem(), config, object()) == "Write a function add(a, b)."


def test_the_prompt_format_a_job_logs_is_the_one_its_prompts_have():
    """`prompt_format` (the generate job's log line) says what `build_prompt` did, for each case."""
    cases = [(PromptConfig(template="{prompt}"), ChatTokenizer(), "the tokenizer's chat template"),
             (PromptConfig(template="{prompt}", chat_template="never"), ChatTokenizer(), "plain text (prompt.chat_template: never)"),
             (PromptConfig(template="{prompt}"), object(), "plain text (the tokenizer has no chat template)")]
    for config, tokenizer, said in cases:
        assert prompt_format(config, tokenizer).startswith(said)
        templated = build_prompt(problem(), config, tokenizer) != "Write a function add(a, b)."
        assert templated == said.startswith("the tokenizer's")


def test_extract_code_from_fences_and_raw():
    assert extract_code("Here:\n```python\ndef f():\n    return 1\n```\nDone.") == "def f():\n    return 1"
    assert extract_code("```\nx = 1\n```") == "x = 1"
    assert extract_code("```bash\nls\n```\n```py\ny = 2\n```") == "y = 2"
    assert extract_code("def f():\n    return 1\n") == "def f():\n    return 1"
    # an unterminated fence (generation cut at max tokens) still yields its body
    assert extract_code("```python\ndef f():\n    return") == "def f():\n    return"


def test_reasoning_format():
    completion = "<reasoning>add them</reasoning>\n<answer>\n```python\ndef add(a, b):\n    return a + b\n```\n</answer>"
    assert extract_code(completion, reasoning_format=True) == "def add(a, b):\n    return a + b"
    assert follows_reasoning_format(completion)
    assert not follows_reasoning_format("def add(a, b): return a + b")
    text = user_message(problem(), PromptConfig(template="{prompt}", reasoning_format=True))
    assert "<reasoning>" in text and "<answer>" in text
