"""Refinement examples, an analysis stage: a failed first attempt (c1), the refinement prompt
SRRL builds from its execution feedback, and second attempts (c2) sampled from a trained model
on that prompt.

SRRL's training rollouts are not stored, so `sample_refinements` samples real c2s after
training: the same failed c1s (the base model's train-split candidates, the first failure of
each chosen problem) are turned into refinement prompts with `execrl.refinement.refinement_prompt`,
and every compared model (the SRRL model and the base model) answers the same prompts. The c2s
are executed by the sandbox like any candidate. The report only reads the records.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict

from execrl.generation import GenerationBackend, GenerationSettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig, extract_code
from execrl.refinement import RefinementSettings, refinement_message, refinement_prompt

FAILED_STATUSES = ("fail", "error", "syntax_error", "timeout")
"""Failure kinds in the order examples take them: wrong answer, runtime error, syntax error, timeout."""
C1_FIELDS = ("sample_index", "code", "status", "tests_passed", "tests_total", "error_type", "error_message")
C2_FIELDS = ("status", "tests_passed", "tests_total", "error_type", "error_message")


def select_failed_attempts(problems: list[Problem], annotations: list[dict], max_prompts: int) -> list[tuple[Problem, dict]]:
    """Up to max_prompts (problem, first failed candidate) pairs, one per problem, taking failure
    kinds in turn (wrong answer, runtime error, syntax error, timeout; each kind in problem order),
    so the first few examples show every kind of feedback the data has."""
    failures: dict[str, dict] = {}
    for record in sorted(annotations, key=lambda r: (r["problem_id"], r.get("sample_index", 0))):
        if record["status"] != "pass" and record["problem_id"] not in failures:
            failures[record["problem_id"]] = record
    queues: dict[str, list[Problem]] = defaultdict(list)
    for problem in problems:
        if problem.id in failures:
            queues[failures[problem.id]["status"]].append(problem)
    chosen: list[Problem] = []
    while len(chosen) < max_prompts and any(queues.values()):
        for status in FAILED_STATUSES:
            if queues[status] and len(chosen) < max_prompts:
                chosen.append(queues[status].pop(0))
    return [(problem, failures[problem.id]) for problem in chosen]


def sample_refinements(
    selected: list[tuple[Problem, dict]],
    backend: GenerationBackend,
    generation: GenerationSettings,
    prompt_config: PromptConfig,
    srrl: RefinementSettings,
    executor,
) -> list[dict]:
    """One record per refinement prompt: the c1, the prompt, and `generation.num_samples` executed c2s."""
    if not selected:
        return []
    messages = [refinement_message(problem, c1["code"], c1, srrl, prompt_config) for problem, c1 in selected]
    prompts = [refinement_prompt(problem, c1["code"], c1, srrl, prompt_config, backend.tokenizer) for problem, c1 in selected]
    completions = backend.generate(prompts, generation)
    items = [
        (problem, extract_code(text, prompt_config.reasoning_format))
        for (problem, _), texts in zip(selected, completions, strict=True)
        for text in texts
    ]
    results = iter(result.to_dict() for result in executor.run_batch(items))
    records = []
    for (problem, c1), message, prompt, texts in zip(selected, messages, prompts, completions, strict=True):
        c2 = []
        for index, text in enumerate(texts):
            result = next(results)
            c2.append(
                {
                    "sample_index": index,
                    "completion": text,
                    "code": extract_code(text, prompt_config.reasoning_format),
                    **{key: result[key] for key in C2_FIELDS},
                }
            )
        records.append(
            {
                "problem_id": problem.id,
                "problem": problem.prompt,
                "c1": {key: c1.get(key) for key in C1_FIELDS},
                "refinement_message": message,
                "refinement_prompt": prompt,
                "c2": c2,
                "generation": {"backend": backend.name, **asdict(generation)},
            }
        )
    return records
