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

After every sync the weights vLLM serves are checked against the trainer's (`check_served_weights`): both
compute the log-probabilities of one fixed short token sequence (`PROBE_TEXT`), and a difference beyond
rounding (`logprob_tolerance`) stops the run with `ServedWeightsMismatch`, naming the step. A server that
samples from other weights than the trained ones would otherwise leave nothing but an importance-sampling
ratio drifting away from 1 in the metrics.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Callable, Iterator, Sequence

import torch

# The probe: a short code line every tokenizer of code models splits into several tokens.
PROBE_TEXT = "def add(a, b):\n    return a + b\n"
# Rounded operations a logit passes through per transformer block (attention: q, k, v, scores, softmax,
# weighted sum, output projection, residual, norm; MLP: gate, up, activation, product, down, residual, norm).
ROUNDINGS_PER_BLOCK = 16
CPU_KERNEL_PIN = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2"


class ServedWeightsMismatch(RuntimeError):
    """vLLM serves other weights than the trainer's after a weight sync."""


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the gap between 1 and the next number of `dtype`: the largest relative error of one rounding."""
    return torch.finfo(dtype).eps / 2


def logprob_tolerance(dtype: torch.dtype, num_layers: int, scale: float) -> float:
    """How far two correct implementations' log-probabilities of one token may lie apart when both compute
    with the same weights in `dtype` through `num_layers` transformer blocks, `scale` being the size of the
    numbers involved (the largest |logit| plus the largest |log-probability|).

    The two differ only in how they round: each rounding moves a value by at most `unit_roundoff(dtype)`
    of itself; a logit passes through about ROUNDINGS_PER_BLOCK of them per block, and once more for the
    embedding and the LM head; independent roundings add up like a random walk (the square root of their
    number); and a log-probability, z_t - logsumexp(z), moves by at most twice the largest logit's error.
    Float32, 2 blocks, scale 6.5 (the tests' tiny model): 5.4e-6; on a 28-layer model at scale 40,
    float16: 0.84 and bfloat16: 6.7 (there only gross mismatches show: rounding noise is that large)."""
    roundings = ROUNDINGS_PER_BLOCK * (num_layers + 1)
    return 2 * unit_roundoff(dtype) * math.sqrt(roundings) * max(scale, 1.0)


def logprob_mismatch(trainer: Sequence[float], served: Sequence[float], tolerance: float) -> float | None:
    """The largest |difference| between the trainer's and the served log-probabilities of the probe's
    tokens, where it exceeds `tolerance` (a token the server gives no finite log-probability counts as an
    infinite difference); None where they agree."""
    if len(trainer) != len(served):
        raise ValueError(f"{len(trainer)} trainer log-probabilities against {len(served)} served ones")
    differences = [abs(t - s) if math.isfinite(s) else math.inf for t, s in zip(trainer, served, strict=True)]
    largest = max(differences)
    return largest if largest > tolerance else None


def mismatch_message(step, largest: float, tolerance: float, dtype: torch.dtype, tokens: int, on_cpu: bool) -> str:
    cause = ("a sync that did not reach vLLM, or kernels that kept packed copies of the old weights through the "
             "reload")
    if on_cpu:
        cause += (" (vLLM's CPU build packs weights for its oneDNN/SGL kernels at load time; "
                  "execrl.generation.vllm_cpu.repack_kept_weights repacks the layers it knows of after each reload. "
                  f"To rule the CPU kernels' ISA out, pin them: {CPU_KERNEL_PIN})")
    return (f"after the weight sync at step {step}, vLLM's log-probabilities of a fixed {tokens}-token probe differ "
            f"from the trainer's by up to {largest:.4g} (tolerance {tolerance:.3g} for {str(dtype).removeprefix('torch.')}):"
            f" vLLM samples from other weights than the trained ones. Likely cause: {cause}.")


def policy_logprobs(model, token_ids: list[int], device) -> tuple[list[float], float]:
    """The log-probabilities `model` gives each token of `token_ids` after the ones before it, in eval mode
    (no dropout, LoRA's included), and the scale `logprob_tolerance` takes: the largest |logit| plus the
    largest |log-probability|. A forward pass: under ZeRO-3 every process must call it."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([token_ids], device=device), use_cache=False).logits[0, :-1].float()
    finally:
        model.train(was_training)
    picked = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(token_ids[1:], device=logits.device)[:, None])[:, 0]
    return picked.tolist(), float(logits.abs().max() + picked.abs().max())


def as_dtype(value) -> torch.dtype | None:
    """A floating-point torch dtype from a dtype or its name ("bfloat16", "torch.bfloat16"); None otherwise."""
    if isinstance(value, str):
        value = getattr(torch, value.removeprefix("torch."), None)
    return value if isinstance(value, torch.dtype) and value.is_floating_point else None


def coarsest_dtype(*dtypes) -> torch.dtype:
    """The dtype of the largest rounding error among `dtypes` (names or dtypes; others are ignored)."""
    return max(filter(None, map(as_dtype, dtypes)), key=unit_roundoff)


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
        # The trainer's step, for the mismatch error (set by execrl.training.grpo once the trainer exists).
        current_step: Callable[[], int] | None = None

        def sync_weights(self):
            self._push_weights()
            self.check_served_weights()

        def _push_weights(self):
            super().sync_weights()

        def check_served_weights(self) -> None:
            """Raise ServedWeightsMismatch, on every process, where vLLM's log-probabilities of the probe
            differ from the trainer's beyond rounding. In server mode rank 0 asks the server; in colocate mode
            every process asks its own engine (not while vLLM's sleep mode has put its KV cache away)."""
            from accelerate.utils import broadcast_object_list

            if self.mode == "colocate" and self.enable_sleep_mode:
                return
            tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
            token_ids = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
            trainer, scale = policy_logprobs(self.model, token_ids, self.accelerator.device)
            largest = tolerance = dtype = None
            if self.mode == "colocate" or self.accelerator.is_main_process:
                # The coarser of the two sides' dtypes rounds: vLLM serves a float32 checkpoint in bfloat16
                # under `--dtype auto`, on CPU as on GPU.
                dtype = coarsest_dtype(next(self.model.parameters()).dtype, self._serving_dtype())
                tolerance = logprob_tolerance(dtype, self.model.config.get_text_config().num_hidden_layers, scale)
                largest = logprob_mismatch(trainer, self._served_logprobs(token_ids), tolerance)
            if self.mode == "server":
                largest, tolerance, dtype = broadcast_object_list([largest, tolerance, dtype])
            else:
                local = torch.tensor(-1.0 if largest is None else largest, device=self.accelerator.device)
                found = float(self.accelerator.gather(local[None]).max())
                largest = None if found < 0 else found
            if largest is not None:
                from execrl.generation.vllm_cpu import vllm_on_cpu

                step = self.current_step() if self.current_step is not None else "?"
                raise ServedWeightsMismatch(mismatch_message(step, largest, tolerance, dtype, len(token_ids),
                                                             on_cpu=vllm_on_cpu()))

        def _serving_dtype(self):
            """The dtype vLLM computes in (its resolved model config's)."""
            if self.mode == "server":
                return self.vllm_client.get_server_info().get("model_config", {}).get("dtype")
            return self.llm.llm_engine.model_config.dtype

        def _served_logprobs(self, token_ids: list[int]) -> list[float]:
            """vLLM's log-probability of each token of `token_ids` after the ones before it (its prompt log-probs)."""
            if self.mode == "server":
                served = self.vllm_client.get_sequence_logprobs([token_ids], [1], top_logprobs=1)
                return [position[0] for position in served["actual_logprobs"][0]]
            from vllm import SamplingParams

            (output,) = self.llm.generate([{"prompt_token_ids": token_ids}],
                                          SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=1),
                                          use_tqdm=False)
            return [output.prompt_logprobs[i][token].logprob for i, token in enumerate(token_ids) if i > 0]

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


def cpu_vllm_generation_class():
    """`vllm_generation_class()`'s `VLLMGeneration` with the weight sync that works on vLLM's CPU build
    (`execrl.generation.vllm_cpu`: why TRL's fails there, and the repacking and server reload used here)."""
    from trl.generation.vllm_generation import VLLMClient

    from execrl.generation import vllm_cpu

    class CPUVLLMGeneration(vllm_generation_class()):
        def _init_vllm(self):
            if self.mode != "server":
                super()._init_vllm()
                return
            # TRL's server-mode start without `init_communicator`: its NCCL group needs a CUDA device.
            if self.accelerator.is_main_process:
                base_url = self.server_base_url or f"http://{self.server_host}:{self.server_port}"
                self.vllm_client = VLLMClient(base_url=base_url, group_port=self.group_port,
                                              connection_timeout=self.server_timeout)
            self.accelerator.wait_for_everyone()

        def _push_weights(self):
            # Every process walks the parameters: under ZeRO-3 each gather is a collective. The
            # tensors are copied, since a gathered parameter is freed when the walk moves on.
            weights = {name: tensor.detach().to("cpu", copy=True) for name, tensor in self._iter_named_params()}
            if self.mode == "colocate":
                runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
                runner.reload_weights(weights_iterator=iter(weights.items()))
                vllm_cpu.repack_kept_weights(runner.get_model())
                self.llm.reset_prefix_cache()
            elif self.accelerator.is_main_process:
                vllm_cpu.reload_server_weights(self.vllm_client, weights)
                self.vllm_client.reset_prefix_cache()
            self.accelerator.wait_for_everyone()

    return CPUVLLMGeneration


@contextlib.contextmanager
def trl_vllm_generation(use_vllm: bool = True):
    """While a GRPO trainer is built (TRL builds its `VLLMGeneration` inside `GRPOTrainer.__init__`, with no
    other hook): where it uses vLLM, the trainer's `VLLMGeneration` is `vllm_generation_class()`'s, and on
    vLLM's CPU build `cpu_vllm_generation_class()`'s (built on it)."""
    if not use_vllm:
        yield
        return
    import trl.trainer.grpo_trainer as grpo_trainer

    from execrl.generation.vllm_cpu import vllm_on_cpu

    original = grpo_trainer.VLLMGeneration
    grpo_trainer.VLLMGeneration = cpu_vllm_generation_class() if vllm_on_cpu() else vllm_generation_class()
    try:
        yield
    finally:
        grpo_trainer.VLLMGeneration = original
