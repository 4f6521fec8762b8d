"""Architecture-driven memory terms that DeepSpeed's and accelerate's estimators do not cover.

DeepSpeed (`estimate_zero3_model_states_mem_needs`, `estimate_zero2_model_states_mem_needs`) and
accelerate (`calculate_maximum_sizes`) estimate weights, gradients and optimizer state; this module
holds only what they lack: the model's shape read from its config.json (shipped for the models the
configs name, since the hub is unreachable at plan time), checkpointed activations, the KV cache a
vLLM server needs and the GPU sizes per `gpu_model`. It is arithmetic not yet checked on a GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3

# GPU memory (GB as sold) and whether the GPU computes in bf16 (pre-Ampere GPUs have fp16 only).
GPU_MODELS: dict[str, tuple[float, bool]] = {
    "V100": (32.0, False),
    "A100-40": (40.0, True),
    "A100": (80.0, True),
    "A100-80": (80.0, True),
    "H100": (80.0, True),
    "H200": (141.0, True),
}
DEFAULT_GPU_MODEL = "A100-80"


@dataclass(frozen=True)
class Architecture:
    """The config.json fields the memory terms depend on."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool

    @classmethod
    def from_config(cls, config: dict) -> Architecture:
        try:
            return cls(
                hidden_size=int(config["hidden_size"]),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=int(config["num_attention_heads"]),
                num_key_value_heads=int(config.get("num_key_value_heads", config["num_attention_heads"])),
                intermediate_size=int(config["intermediate_size"]),
                vocab_size=int(config["vocab_size"]),
                tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            )
        except KeyError as missing:
            raise ValueError(f"model config.json lacks {missing}, needed for the memory plan") from None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def parameters(self) -> int:
        """Parameter count of a Qwen2/Llama-style decoder (q/k/v biases as in Qwen2)."""
        h, kv, inter = self.hidden_size, self.kv_dim, self.intermediate_size
        attention = h * h + 2 * h * kv + h * h + (h + 2 * kv)
        mlp = 3 * h * inter
        per_layer = attention + mlp + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * per_layer + embeddings + h

    def kv_cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.num_hidden_layers * self.kv_dim * dtype_bytes

    def checkpointed_activation_bytes(self, micro_batch: int, sequence_length: int, dtype_bytes: int = 2) -> int:
        """Peak activations of one micro-batch under gradient checkpointing.

        Kept: each layer's input (micro × T × hidden). Recomputed at backward: one layer's
        intermediates (q/k/v/attention output, the MLP's gate/up/activation) and, at the head, the
        logits in the compute dtype plus their fp32 copy for the loss.
        """
        tokens = micro_batch * sequence_length
        h = self.hidden_size
        layer_inputs = self.num_hidden_layers * tokens * h * dtype_bytes
        one_layer = tokens * (4 * h + 2 * self.kv_dim + 3 * self.intermediate_size) * dtype_bytes
        logits = tokens * self.vocab_size * (dtype_bytes + 4)
        return layer_inputs + one_layer + logits


SHIPPED_CONFIGS = Path(__file__).with_name("model_configs.json")


def architecture(source: str, local_dir: str | Path | None = None) -> Architecture:
    """The model's shape: a local or staged folder's config.json when present, else the shipped copy."""
    if local_dir is not None and (Path(local_dir) / "config.json").exists():
        return Architecture.from_config(json.loads((Path(local_dir) / "config.json").read_text()))
    shipped = json.loads(SHIPPED_CONFIGS.read_text())
    if source not in shipped:
        raise ValueError(
            f"no config.json for model {source!r}: stage it locally or add it to {SHIPPED_CONFIGS.name} "
            f"(shipped: {', '.join(sorted(shipped))})"
        )
    return Architecture.from_config(shipped[source])


def gpu_memory_bytes(gpu_model: str | None) -> tuple[float, bool]:
    """(bytes of memory, bf16 supported) for `gpu_model`; the default when unset."""
    name = gpu_model or DEFAULT_GPU_MODEL
    if name not in GPU_MODELS:
        raise ValueError(f"unknown gpu_model {name!r}; known: {', '.join(GPU_MODELS)}")
    gigabytes, bf16 = GPU_MODELS[name]
    return gigabytes * 1e9, bf16


def vllm_server_kv_cache_bytes(arch: Architecture, max_model_len: int, concurrent_sequences: int) -> int:
    """KV cache a vLLM server needs to hold `concurrent_sequences` sequences of `max_model_len` tokens."""
    return arch.kv_cache_bytes_per_token() * max_model_len * concurrent_sequences
