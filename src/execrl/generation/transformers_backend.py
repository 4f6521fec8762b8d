"""Batched sampling with transformers (CPU or GPU)."""

from __future__ import annotations

from functools import cached_property

from tqdm.auto import tqdm

from execrl.generation.base import GenerationBackend, GenerationSettings
from execrl.generation.sampling import SamplingSettings, eos_token_ids


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
        sampling = settings.sampling.for_model(self.model_path)
        # Greedy decoding gives one completion per prompt (transformers refuses to return more): n copies of it.
        drawn = 1 if sampling.greedy else n
        generation_config = sampling.generation_config(
            max_new_tokens=settings.max_new_tokens,
            eos_token_ids=eos_token_ids(self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id),
            pad_token_id=self.tokenizer.pad_token_id,
            bos_token_id=self.tokenizer.bos_token_id,
            num_return_sequences=drawn,
        )
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
                generated = self.model.generate(**encoded, generation_config=generation_config)
            new_tokens = generated[:, encoded["input_ids"].shape[1] :]
            texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            outputs.extend(texts[i * drawn : (i + 1) * drawn] * (n // drawn) for i in range(len(batch)))
        return outputs


def generate_token_ids(
    model, tokenizer, prompt_ids: list[list[int]], sampling: SamplingSettings, max_new_tokens: int
) -> list[list[int]]:
    """Sample one completion per prompt as `sampling` says (greedy at temperature 0); each ends at
    (and keeps) its first end-of-sequence token."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos_ids = eos_token_ids(tokenizer.eos_token_id, model.generation_config.eos_token_id)
    generation_config = sampling.generation_config(
        max_new_tokens=max_new_tokens, eos_token_ids=eos_ids, pad_token_id=pad_id, bos_token_id=tokenizer.bos_token_id
    )
    width = max(len(ids) for ids in prompt_ids)
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + ids for ids in prompt_ids], device=model.device)
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids], device=model.device)
    with torch.no_grad():
        generated = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=generation_config,
        )
    completions = []
    for row in generated[:, width:].tolist():
        ids = []
        for token in row:
            ids.append(token)
            if token in eos_ids:
                break
        completions.append(ids)
    return completions
