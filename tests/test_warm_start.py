"""Refinement-shaped warm-start examples: broken references confirmed failing by the sandbox."""

import random

from execrl.datasets.builtin import generate
from execrl.prompting import PromptConfig
from execrl.sandbox import Executor
from execrl.srrl import SRRLSettings
from execrl.warm_start import broken_attempts, mutations, refinement_examples

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
