"""How GRPO and SRRL push the policy's weights into vLLM: TRL's `VLLMGeneration`, with a LoRA adapter
merged out of place.

TRL 1.16 syncs a PEFT model by merging its adapters into the base weights (`merge_adapter()`), sending
the base weights and unmerging again (`unmerge_adapter()`). In bf16, w + Δ - Δ is not w: each sync
moves the frozen base model by a rounding error, and a run syncs once per generation round, with an
adapter that has moved since the last one, so the errors pile up. Here each adapted layer's merged
weight is computed into a new tensor, W + Δ as PEFT's `merge` adds it (PEFT's `get_delta_weight`,
added in the base weight's dtype), and the base weights are never written. Everything else (which
tensors are sent, under which names, gathered from ZeRO-3 shards, how they reach vLLM) is TRL's.

Under FSDP TRL's own sync (merge in place) runs unchanged; execrl does not train with FSDP.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator

import torch


def out_of_place_merges(model) -> dict[int, Callable[[], torch.Tensor]]:
    """id(base parameter) → a function giving that parameter with the active LoRA adapters merged, a new
    tensor, for every LoRA layer of the PEFT `model` that has an active adapter not merged yet. The merge is
    the arithmetic of PEFT's `merge()` (safe_merge=False): the delta of each adapter in turn, added to the
    weight and rounded to its dtype once per adapter; a LoRA bias likewise."""
    from peft.tuners.lora import LoraLayer
    from peft.tuners.tuners_utils import check_adapters_to_merge

    merges = {}
    for name, layer in model.named_modules():
        if not isinstance(layer, LoraLayer):
            continue
        adapters = [a for a in check_adapters_to_merge(layer, None) if a in layer.lora_A]
        if not adapters:
            continue
        variants = [a for a in adapters if a in getattr(layer, "lora_variant", {})]
        if variants:
            raise NotImplementedError(
                f"{name}: adapter {variants[0]!r} is a LoRA variant ({type(layer.lora_variant[variants[0]]).__name__}, "
                "e.g. DoRA); execrl merges plain LoRA adapters out of place only"
            )
        base = layer.get_base_layer()
        merges[id(base.weight)] = functools.partial(_merged_weight, layer, adapters)
        if any(layer.lora_bias[a] for a in adapters):
            if getattr(base, "bias", None) is None:
                raise RuntimeError(f"{name}: a LoRA bias cannot be merged into a layer without a bias")
            merges[id(base.bias)] = functools.partial(_merged_bias, layer, adapters)
    return merges


def _merged_weight(layer, adapters: list[str]) -> torch.Tensor:
    weight = layer.get_base_layer().weight.data
    merged = weight
    for adapter in adapters:
        # `weight.data += delta` computes in the promoted dtype and rounds to the weight's: the same here.
        merged = torch.add(merged, layer.get_delta_weight(adapter)).to(weight.dtype)
    return merged


def _merged_bias(layer, adapters: list[str]) -> torch.Tensor:
    bias = layer.get_base_layer().bias.data
    merged = bias
    for adapter in adapters:
        merged = torch.add(merged, layer.lora_B[adapter].bias * layer.scaling[adapter]).to(bias.dtype)
    return merged


def vllm_generation_class(base_class=None):
    """`base_class` (TRL's `VLLMGeneration` by default) whose weight sync sends a PEFT model's weights with
    the adapters merged out of place. Only `_iter_named_params`, the walk every sync mode reads the weights
    from, is overridden; it names and skips tensors as TRL's does."""
    if base_class is None:
        from trl.generation.vllm_generation import VLLMGeneration as base_class

    class OutOfPlaceLoRAVLLMGeneration(base_class):
        def _iter_named_params(self) -> Iterator[tuple[str, torch.Tensor]]:
            from accelerate.utils import is_peft_model

            model = self.model
            if not is_peft_model(model) or self._dist.is_fsdp:
                yield from super()._iter_named_params()
                return
            # As TRL: under ZeRO-3 every process gathers the whole model (a collective) before merging.
            with self._dist.gather_params(list(model.parameters())):
                merges = out_of_place_merges(model)
                for name, param in model.named_parameters():
                    name = name.removeprefix("base_model.model.").replace(".base_layer", "")
                    # The adapters' own tensors do not exist in vLLM; a module to save replaces its original.
                    if model.prefix in name or "original_module" in name:
                        continue
                    name = self._fix_param_name_to_vllm(name, extra_prefixes=["modules_to_save.default."])
                    merge = merges.get(id(param))
                    yield name, merge() if merge is not None else param.data

    return OutOfPlaceLoRAVLLMGeneration


@contextlib.contextmanager
def trl_vllm_generation(use_vllm: bool = True):
    """While a GRPO trainer is built (TRL builds its `VLLMGeneration` inside `GRPOTrainer.__init__`, with no
    other hook): where it uses vLLM, the trainer's `VLLMGeneration` is `vllm_generation_class()`'s, and on
    vLLM's CPU build `execrl.generation.vllm_cpu.cpu_vllm_generation_class()`'s (built on it)."""
    if not use_vllm:
        yield
        return
    import trl.trainer.grpo_trainer as grpo_trainer

    from execrl.generation.vllm_cpu import cpu_vllm_generation_class, vllm_on_cpu

    original = grpo_trainer.VLLMGeneration
    grpo_trainer.VLLMGeneration = cpu_vllm_generation_class() if vllm_on_cpu() else vllm_generation_class()
    try:
        yield
    finally:
        grpo_trainer.VLLMGeneration = original
