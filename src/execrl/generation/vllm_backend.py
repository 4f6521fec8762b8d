"""Sampling with vLLM on the job's GPUs, from a base model or a merged one."""

from __future__ import annotations

from execrl.generation.base import GenerationBackend, GenerationSettings, VLLMSettings
from execrl.generation.sampling import SamplingSettings, model_eos_token_ids

ENGINE_SAMPLING_ARGS = {"generation_config": "vllm"}
"""vLLM's own defaults under the sampling arguments, not the model's generation config (which vLLM
applies by default): every sampling setting comes from execrl's (`sampling_params_kwargs`)."""


def sampling_params_kwargs(settings: GenerationSettings, sampling: SamplingSettings, eos_ids: list[int]) -> dict:
    """SamplingParams' arguments for `settings`, drawing from `sampling` (`settings.sampling` as it
    applies to the model). `eos_ids` are stop tokens beside the tokenizer's end-of-sequence token:
    under ENGINE_SAMPLING_ARGS vLLM no longer adds the model's declared ones itself."""
    return {
        "n": settings.num_samples,
        **sampling.vllm_kwargs(),
        "max_tokens": settings.max_new_tokens,
        "seed": settings.seed,
        "stop_token_ids": list(eos_ids),
    }


class VLLMBackend(GenerationBackend):
    name = "vllm"

    def __init__(self, model_path: str, tensor_parallel_size: int, settings: VLLMSettings):
        super().__init__(model_path)
        from vllm import LLM

        from execrl.generation.vllm_cpu import vllm_on_cpu

        # vLLM's CPU build fails seeded sampling once a prompt's prefill is split over engine steps (it
        # rewinds the request's generator, and a CPU generator has no offset to rewind):
        # "CPU Generator does not use offset". Whole prefills avoid it.
        cpu_only = {"enable_chunked_prefill": False} if vllm_on_cpu() else {}
        self.llm = LLM(
            model=model_path,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            max_model_len=settings.max_model_len,
            dtype=settings.dtype,
            **ENGINE_SAMPLING_ARGS,
            **cpu_only,
        )

    @property
    def tokenizer(self):
        return self.llm.get_tokenizer()

    def generate(self, prompts: list[str], settings: GenerationSettings) -> list[list[str]]:
        from vllm import SamplingParams

        sampling = settings.sampling.for_model(self.model_path)
        eos_ids = model_eos_token_ids(self.model_path, self.tokenizer)
        params = SamplingParams(**sampling_params_kwargs(settings, sampling, eos_ids))
        results = self.llm.generate(token_prompts(self.tokenizer, prompts), params, use_tqdm=True)
        return [[choice.text for choice in result.outputs] for result in results]


def token_prompts(tokenizer, prompts: list[str]) -> list[dict]:
    """vLLM's token prompts of `prompts`, tokenized without special tokens as the transformers
    backend and the training paths tokenize them: the chat template's text holds them already,
    and vLLM, given text, would add a BOS-prepending tokenizer's BOS a second time."""
    return [{"prompt_token_ids": tokenizer(prompt, add_special_tokens=False)["input_ids"]} for prompt in prompts]
