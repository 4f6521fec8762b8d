"""Sampling from the policy a TRL trainer is training, between its steps: SRRL's rollouts and the
interval evaluation of every trained method (GRPO's, SRRL's and DPO's) draw from the model as
trained so far, not from a copy loaded from disk.
"""

from __future__ import annotations

import functools

from execrl.generation.sampling import SamplingSettings

Sample = tuple[list[int], list[int], str, list[float] | None]
"""(prompt_ids, completion_ids, text, logprobs) of one completion; logprobs may be None."""


def generate_with_merged_adapter(model) -> None:
    """Make a PEFT model's `generate` run with its LoRA weights merged into the base layers.

    Unmerged, every adapted linear layer costs three matrix products per decoded token, which
    dominates sampling time for small models on CPU. Merging for the length of one `generate`
    call (PEFT's `merge_adapter`, as TRL does before syncing weights to vLLM) samples from the
    same policy at the cost of the base model; training still sees the unmerged adapter.

    The merge goes into copies of the adapted layers' base weights, and the originals are put back
    after: merging and unmerging in place leaves w + Δ - Δ, which rounds away from w, so the base
    weights would drift with every call, and a run resumed from a checkpoint (base weights read
    afresh from disk) would part from the run never interrupted. The copies cost one more set of
    the adapted layers' weights while sampling.
    """
    original = model.generate

    @functools.wraps(original)
    def generate(*args, **kwargs):
        bases = adapted_base_parameters(model)
        kept = [parameter.data for parameter in bases]
        try:
            for parameter in bases:
                parameter.data = parameter.data.clone()
            model.merge_adapter()
            try:
                return original(*args, **kwargs)
            finally:
                model.unmerge_adapter()
        finally:
            for parameter, data in zip(bases, kept, strict=True):
                parameter.data = data

    model.generate = generate


def adapted_base_parameters(model) -> list:
    """The base-layer weights and biases of every LoRA layer of `model`: what merging its adapters writes."""
    from peft.tuners.lora import LoraLayer

    parameters = {}
    for layer in model.modules():
        if isinstance(layer, LoraLayer):
            base = layer.get_base_layer()
            for parameter in (base.weight, getattr(base, "bias", None)):
                if parameter is not None:
                    parameters[id(parameter)] = parameter
    return list(parameters.values())


class TransformersPolicySampler:
    """One sample per prompt text from `trainer`'s model, with transformers' `generate` on the
    model unwrapped from its DDP or DeepSpeed wrapper (TRL's `unwrap_model_for_generation`), LoRA
    adapter included. Samples carry no log-probabilities (None), as in TRL's transformers path.
    """

    batch = 64
    """Prompts per `generate` call."""

    def __init__(self, trainer, max_new_tokens: int, sampling: SamplingSettings):
        self.trainer = trainer
        self.tokenizer = trainer.processing_class
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling

    def __call__(self, prompt_texts: list[str], temperature: float | None = None) -> list[Sample]:
        """Samples as the sampler's settings say, at `temperature` (0: greedy) when given."""
        temperature = self.sampling.temperature if temperature is None else temperature
        prompt_ids = [self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in prompt_texts]
        completion_ids, logprobs = [], []
        for start in range(0, len(prompt_ids), self.batch):
            ids, lps = self._generate(prompt_ids[start : start + self.batch], temperature)
            completion_ids.extend(ids)
            logprobs.extend(lps)
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return list(zip(prompt_ids, completion_ids, texts, logprobs, strict=True))

    def texts(self, prompt_texts: list[str], temperature: float) -> list[str]:
        """One completion text per prompt (the interval evaluation's sampler)."""
        return [sample[2] for sample in self(prompt_texts, temperature)]

    def _generate(self, prompt_ids: list[list[int]], temperature: float) -> tuple[list[list[int]], list]:
        from trl.models.utils import unwrap_model_for_generation

        from execrl.generation.transformers_backend import generate_token_ids

        trainer = self.trainer
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model:
            sampling = self.sampling.at_temperature(temperature)
            completion_ids = generate_token_ids(model, self.tokenizer, prompt_ids, sampling, self.max_new_tokens)
        return completion_ids, [None] * len(completion_ids)
