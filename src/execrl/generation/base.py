"""The backend interface and the candidate records every backend's output becomes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

from execrl.generation.sampling import SamplingSettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt, extract_code

BACKENDS = ("transformers", "vllm")


@dataclass(frozen=True)
class GenerationSettings:
    """How candidates are sampled: the distribution (`sampling`, the fields of
    `execrl.generation.sampling.SamplingSettings`, which GRPO's rollouts share) and how much of it."""

    num_samples: int = 16
    """Completions per problem (n in pass@k)."""
    temperature: float = 0.8
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    use_model_generation_config: bool = False
    max_new_tokens: int = 1024
    seed: int = 0
    batch_size: int = 64
    """Sequences per forward pass (transformers backend)."""

    def __post_init__(self) -> None:
        SamplingSettings.of(asdict(self))  # raises on a sampling field out of range

    @property
    def sampling(self) -> SamplingSettings:
        return SamplingSettings.of(asdict(self))


@dataclass(frozen=True)
class VLLMSettings:
    """How the vLLM backend loads the model (its engine arguments); the tensor-parallel size is the job's GPUs."""

    gpu_memory_utilization: float = 0.9
    """Share of each GPU's memory vLLM may take for weights, activations and KV cache (vLLM's default)."""
    max_model_len: int | None = None
    """Context window, prompt plus completion (None: the model's own, which may not fit in memory)."""
    dtype: str = "auto"
    """Weights' dtype: `auto` (the model's, fp16 for fp32 checkpoints), `bfloat16`, `float16`, `float32`."""

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"vllm.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")


class GenerationBackend(ABC):
    """Loads a model once and samples n completions for each prompt."""

    name: str

    def __init__(self, model_path: str):
        self.model_path = model_path

    @property
    @abstractmethod
    def tokenizer(self):
        """The model's tokenizer (for chat templates)."""

    @abstractmethod
    def generate(self, prompts: list[str], settings: GenerationSettings) -> list[list[str]]:
        """For each prompt, `settings.num_samples` completions, deterministic for a seed."""


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
