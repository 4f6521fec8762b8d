"""Batched sampling with transformers (CPU or GPU)."""

from __future__ import annotations

from functools import cached_property

from tqdm.auto import tqdm

from execrl.generation.base import GenerationBackend, GenerationSettings


class TransformersBackend(GenerationBackend):
    name = "transformers"

    def __init__(self, model_path: str):
        super().__init__(model_path)
        import torch
        from transformers import AutoModelForCausalLM

        self._device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if self._device == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(self._device).eval()

    @cached_property
    def tokenizer(self):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model_path, padding_side="left")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return tokenizer

    def generate(self, prompts: list[str], settings: GenerationSettings) -> list[list[str]]:
        import torch

        n = settings.num_samples
        prompts_per_batch = max(1, settings.batch_size // n)
        outputs: list[list[str]] = []
        batches = range(0, len(prompts), prompts_per_batch)
        for batch_index, start in enumerate(tqdm(batches, desc="generating", unit="batch")):
            batch = prompts[start : start + prompts_per_batch]
            # One seed per batch keeps candidates reproducible for the same settings and order.
            torch.manual_seed(settings.seed * 1_000_003 + batch_index)
            encoded = self.tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
            encoded = encoded.to(self._device)
            with torch.inference_mode():
                generated = self.model.generate(
                    **encoded,
                    do_sample=settings.temperature > 0,
                    temperature=settings.temperature if settings.temperature > 0 else None,
                    top_p=settings.top_p,
                    max_new_tokens=settings.max_new_tokens,
                    num_return_sequences=n,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new_tokens = generated[:, encoded["input_ids"].shape[1] :]
            texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            outputs.extend(texts[i * n : (i + 1) * n] for i in range(len(batch)))
        return outputs


def generate_token_ids(model, tokenizer, prompt_ids: list[list[int]], temperature: float, top_p: float, max_new_tokens: int) -> list[list[int]]:
    """Sample one completion per prompt (greedy at temperature 0); each ends at (and keeps) its first end-of-sequence token."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(ids) for ids in prompt_ids)
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + ids for ids in prompt_ids], device=model.device)
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids], device=model.device)
    with torch.no_grad():
        generated = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=top_p if temperature > 0 else None,
            max_new_tokens=max_new_tokens,
            pad_token_id=pad_id,
        )
    eos_ids = set(model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, list) else [model.generation_config.eos_token_id or tokenizer.eos_token_id])
    completions = []
    for row in generated[:, width:].tolist():
        ids = []
        for token in row:
            ids.append(token)
            if token in eos_ids:
                break
        completions.append(ids)
    return completions
