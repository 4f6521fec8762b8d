"""The backend interface and the candidate records every backend's output becomes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt, extract_code

BACKENDS = ("transformers", "vllm")


@dataclass(frozen=True)
class GenerationSettings:
    """How candidates are sampled."""

    num_samples: int = 8
    """Completions per problem (n in pass@k)."""
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    seed: int = 0
    batch_size: int = 64
    """Sequences per forward pass (transformers backend)."""


class GenerationBackend(ABC):
    """Loads a model once and samples n completions for each prompt."""

    name: str

    def __init__(self, model_path: str, adapter_path: str | None = None):
        self.model_path = model_path
        self.adapter_path = adapter_path

    @property
    @abstractmethod
    def tokenizer(self):
        """The model's tokenizer (for chat templates)."""

    @abstractmethod
    def generate(self, prompts: list[str], settings: GenerationSettings) -> list[list[str]]:
        """For each prompt, `settings.num_samples` completions, deterministic for a seed."""


def get_backend(name: str, model_path: str, adapter_path: str | None = None) -> GenerationBackend:
    """Instantiate a backend by name; vLLM is imported only when chosen."""
    if name == "transformers":
        from execrl.generation.transformers_backend import TransformersBackend

        return TransformersBackend(model_path, adapter_path)
    if name == "vllm":
        from execrl.generation.vllm_backend import VLLMBackend

        return VLLMBackend(model_path, adapter_path)
    raise ValueError(f"unknown generation backend {name!r}; choose one of {BACKENDS}")


def candidate_records(
    problems: list[Problem],
    backend: GenerationBackend,
    settings: GenerationSettings,
    prompt_config: PromptConfig,
) -> list[dict]:
    prompts = [build_prompt(p, prompt_config, backend.tokenizer) for p in problems]
    completions = backend.generate(prompts, settings)
    generation = {"backend": backend.name, **asdict(settings)}
    records = []
    for problem, prompt, samples in zip(problems, prompts, completions, strict=True):
        for index, completion in enumerate(samples):
            records.append(
                {
                    "problem_id": problem.id,
                    "sample_index": index,
                    "prompt": prompt,
                    "completion": completion,
                    "code": extract_code(completion, prompt_config.reasoning_format),
                    "generation": generation,
                }
            )
    return records
