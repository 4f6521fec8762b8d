"""Sampling with vLLM on GPUs: a base model, a merged model, or a base model plus a LoRA adapter."""

from __future__ import annotations

from execrl.generation.base import GenerationBackend, GenerationSettings


class VLLMBackend(GenerationBackend):
    name = "vllm"

    def __init__(self, model_path: str, adapter_path: str | None = None):
        super().__init__(model_path, adapter_path)
        from vllm import LLM

        self.llm = LLM(model=model_path, enable_lora=adapter_path is not None)

    @property
    def tokenizer(self):
        return self.llm.get_tokenizer()

    def generate(self, prompts: list[str], settings: GenerationSettings) -> list[list[str]]:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        params = SamplingParams(
            n=settings.num_samples,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_new_tokens,
            seed=settings.seed,
        )
        lora = LoRARequest("adapter", 1, self.adapter_path) if self.adapter_path else None
        results = self.llm.generate(prompts, params, lora_request=lora, use_tqdm=True)
        return [[choice.text for choice in result.outputs] for result in results]
