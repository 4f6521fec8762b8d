"""Sampling with vLLM on the job's GPUs, from a base model or a merged one."""

from __future__ import annotations

from execrl.generation.base import GenerationBackend, GenerationSettings, VLLMSettings


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
            **cpu_only,
        )

    @property
    def tokenizer(self):
        return self.llm.get_tokenizer()

    def generate(self, prompts: list[str], settings: GenerationSettings) -> list[list[str]]:
        from vllm import SamplingParams

        params = SamplingParams(
            n=settings.num_samples,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_new_tokens,
            seed=settings.seed,
        )
        results = self.llm.generate(prompts, params, use_tqdm=True)
        return [[choice.text for choice in result.outputs] for result in results]
