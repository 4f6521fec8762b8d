"""A model's shape, the config.json fields the memory plan depends on, and the bytes it implies:
parameters, LoRA adapters, the KV cache, one micro-batch's activations on TRL 1.16's path and one
generation round's. The shapes of the Qwen2.5 models the configs name are shipped (SHIPPED_SHAPES):
the hub is unreachable when the DAG is planned. Nothing here imports torch or TRL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# TRL 1.16's fused LM head projects tiles of 4096 tokens (trl/kernels/chunked_logprob.py,
# TOKEN_CHUNK_SIZE) by 32768 vocabulary entries (trl/trainer/utils.py, _CHUNKED_LOGPROB_CHUNK_SIZE).
HEAD_TOKEN_TILE = 4096
HEAD_VOCAB_TILE = 32768


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
    # The count a config.json does not state; derived from the shape when not given.
    parameter_count: int | None = None

    @classmethod
    def from_config(cls, config: dict, parameter_count: int | None = None) -> Architecture:
        try:
            return cls(
                hidden_size=int(config["hidden_size"]),
                num_hidden_layers=int(config["num_hidden_layers"]),
                num_attention_heads=int(config["num_attention_heads"]),
                num_key_value_heads=int(config.get("num_key_value_heads", config["num_attention_heads"])),
                intermediate_size=int(config["intermediate_size"]),
                vocab_size=int(config["vocab_size"]),
                tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
                parameter_count=parameter_count,
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
        """Parameter count: the given one, else that of a Qwen2/Llama-style decoder (q/k/v biases as in Qwen2)."""
        if self.parameter_count is not None:
            return self.parameter_count
        h, kv, inter = self.hidden_size, self.kv_dim, self.intermediate_size
        attention = h * h + 2 * h * kv + h * h + (h + 2 * kv)
        mlp = 3 * h * inter
        per_layer = attention + mlp + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * per_layer + embeddings + h

    def largest_layer_parameters(self) -> int:
        """The largest single weight ZeRO-3 gathers at once: the embedding, or one layer's MLP projection."""
        return max(self.vocab_size * self.hidden_size, self.hidden_size * self.intermediate_size)

    def lora_parameters(self, rank: int) -> int:
        """Adapter parameters of rank `rank` on every linear projection (q, k, v, o, gate, up, down)."""
        h, kv, inter = self.hidden_size, self.kv_dim, self.intermediate_size
        shapes = [(h, h), (h, kv), (h, kv), (h, h), (h, inter), (h, inter), (inter, h)]
        return self.num_hidden_layers * sum(rank * (fan_in + fan_out) for fan_in, fan_out in shapes)

    def kv_cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.num_hidden_layers * self.kv_dim * dtype_bytes

    def layer_activation_bytes(self, tokens: int, dtype_bytes: int = 2, lora_dropout: bool = False,
                               trains_norms: bool = False) -> int:
        """What autograd keeps of one Qwen2 decoder layer's forward for `tokens` tokens.

        RMSNorm (twice) upcasts its input to fp32 and keeps that copy (in fp32 training the first
        is the layer input itself) and its output in the compute dtype, plus the normalised copy its
        weight's gradient needs when the norms train; attention keeps the rotated q and k, v and
        its output (and its reshaped copy o_proj reads); the MLP keeps gate, its activation, up and
        their product. LoRA's dropout (when lora_dropout > 0) keeps a dropped copy of each adapted
        projection's input and its 1-byte mask: q, k, v, gate and up read the normalised hidden
        state, o the attention output, down the MLP product.
        """
        h, kv, inter, d = self.hidden_size, self.kv_dim, self.intermediate_size, dtype_bytes
        fp32_copies = (2 if d < 4 else 1) * 4 * h
        norms = fp32_copies + 2 * d * h + (2 * d * h if trains_norms else 0)
        attention = d * (h + 2 * kv) + 2 * d * h + 4 * self.num_attention_heads
        mlp = 4 * d * inter
        dropout = (6 * h + inter) * (d + 1) if lora_dropout else 0
        return tokens * (norms + attention + mlp + dropout)

    def layer_backward_bytes(self, tokens: int, dtype_bytes: int = 2) -> int:
        """The gradients alive beside one layer's recomputed activations as it back-propagates: two of
        the MLP's width (the activation's and up's gradient, from the product's)."""
        return tokens * 2 * dtype_bytes * self.intermediate_size

    def activation_bytes(
        self,
        micro_batch: int,
        sequence_length: int,
        dtype_bytes: int = 2,
        scored_length: int | None = None,
        row_chunks: int = 1,
        gradient_checkpointing: bool = True,
        lora_dropout: bool = False,
        trains_head: bool = False,
        fused_kernel: bool = True,
    ) -> dict[str, int]:
        """Bytes of one micro-batch's activations by term, on TRL 1.16's path (GRPO and DPO both
        patch the model with `trl.trainer.utils.add_fused_lm_head`: the logits are never
        materialised whole).

        `saved_activations`: what the forward keeps until the backward. Under gradient
        checkpointing, each layer's input and the last layer's output (micro × T × hidden); without
        it, every layer's activations (layer_activation_bytes). Plus the head's inputs: the final
        RMSNorm's fp32 copy, the hidden states the head keeps (on CUDA, with Triton, only the
        `scored_length` positions per row whose label is not -100: GRPO's completion; elsewhere
        every position) and its per-token fp32 statistics.

        `lm_head`: the fused head's backward (trl/kernels/chunked_logprob.py,
        ChunkedLogProbFunction.backward): one buffer of min(scored tokens, 4096) × 32768 logits in
        the compute dtype, turned into its gradient in place by the Triton kernel (`fused_kernel`;
        without Triton, torch ops make seven fp32 copies of the tile and a 1-byte mask), the fp32
        accumulators of the hidden states' gradient and, when the head's weight trains (full
        weights), of the weight's whole gradient (vocab × hidden × 4 bytes); then, beside those
        accumulators, their casts to the compute dtype that the backward returns (`.to(dtype)`:
        a copy in bf16, none in fp32): for full weights another vocab × hidden × 2 bytes, the
        term a bf16 step adds that an fp32 one does not. Without Triton in a 16-bit dtype the
        fp32 products (`_addmm_fp32`'s fallback) copy the tile and a vocabulary slice of the
        weight to fp32 between the tile's fold and its products.

        `recompute`: under checkpointing one layer's activations recomputed, plus its backward's
        gradients (layer_backward_bytes); without checkpointing the backward's gradients alone
        (one of the MLP's width and one of the hidden width: the saved activations free as they go);
        with all weights training, also the largest projection's weight gradient before autograd
        adds it to the parameter's.

        `row_chunks`: GRPO's micro-batch is scored in execrl.training.grpo.LengthChunkedGRPOTrainer's
        chunks of rows, each through its own head call and its own backward; DPO's in one.
        `embedding_gradient`: with all weights training, the embedding's weight gradient, made last.

        The peak is at most saved_activations + max(lm_head, recompute, embedding_gradient): the
        head's backward ends before the first layer is recomputed, and the embedding comes last.
        """
        d, h, vocab = dtype_bytes, self.hidden_size, self.vocab_size
        tokens = micro_batch * sequence_length
        chunk_tokens = -(-micro_batch // row_chunks) * sequence_length
        scored_per_row = (scored_length or sequence_length) if fused_kernel else sequence_length
        scored = micro_batch * scored_per_row
        chunk_scored = -(-micro_batch // row_chunks) * scored_per_row
        one_layer = self.layer_activation_bytes(chunk_tokens, d, lora_dropout, trains_norms=trains_head)
        if gradient_checkpointing:
            layers = (self.num_hidden_layers + 1) * tokens * h * d
        else:
            layers = self.num_hidden_layers * self.layer_activation_bytes(tokens, d, lora_dropout, trains_head)
        # The final RMSNorm's fp32 copy of its input (in fp32 the last layer's output itself) and, when
        # its weight trains, the normalised copy that weight's gradient needs.
        final_norm_copy = (tokens * 4 * h if d < 4 else 0) + (tokens * h * d if trains_head else 0)
        head_inputs = final_norm_copy + (scored if fused_kernel else tokens) * h * d + scored * 16
        # The tile's buffer is always 32768 wide (TRL allocates it before looking at the vocabulary).
        rows = min(chunk_scored, HEAD_TOKEN_TILE)
        vocab_tile = min(vocab, HEAD_VOCAB_TILE)
        tile_bytes = rows * HEAD_VOCAB_TILE * d
        # What lives inside the loop over tiles beside the buffer and the accumulators, one step at a time:
        # the torch fallback's fold (seven fp32 copies, a mask, the tile's fp32 copy in 16 bits), then
        # in 16 bits the fp32 copies `_addmm_fp32` makes of the tile and of the weight's slice.
        fold = 0 if fused_kernel else rows * vocab_tile * (7 * 4 + 1 + (4 if d < 4 else 0))
        products = rows * vocab_tile * 4 + vocab_tile * h * 4 if not fused_kernel and d < 4 else 0
        accumulators = chunk_scored * h * 4 + (vocab * h * 4 if trains_head else 0)
        # The returned gradients, cast from the fp32 accumulators while those are still alive.
        casts = (chunk_scored * h + (vocab * h if trains_head else 0)) * d if d < 4 else 0
        if gradient_checkpointing:
            recompute = one_layer + self.layer_backward_bytes(chunk_tokens, d)
        else:  # the saved activations are freed as their gradients appear: one of the MLP's width, one of the hidden
            recompute = chunk_tokens * d * (self.intermediate_size + h)
        if trains_head:  # all weights train: each projection's weight gradient, made before it is accumulated
            recompute += max(h * self.intermediate_size, h * h) * d
        return {
            "saved_activations": layers + head_inputs,
            "lm_head": tile_bytes + accumulators + max(fold, products, casts),
            "recompute": recompute,
            # Training all weights, the input embedding's backward makes its whole weight gradient at
            # the end of the backward (vocabulary × hidden), when the other activations are freed.
            "embedding_gradient": vocab * h * d if trains_head else 0,
        }

    def generation_bytes(self, sequences: int, prompt_length: int, completion_length: int,
                         dtype_bytes: int = 2) -> dict[str, int]:
        """Bytes of one generation round with transformers' `generate` (what TRL's GRPO runs without
        vLLM, and what the preflight's probe samples with), all `sequences` at once, by phase:

        `prefill`: the prompts' KV cache and one layer's forward over every prompt token at once
        (q, k, v, the attention output and the residual; the MLP's gate, up, their activation and
        product), plus the last position's logits (transformers keeps one position) and their fp32 copy;
        `decode`: the whole KV cache at the round's end, one layer's cache copied as the dynamic
        cache grows by concatenation, and the sampling buffers of one token per sequence over
        the vocabulary (fp32 logits, the temperature's and top-p's copies, the sort's int64
        indices, the probabilities).
        The round's peak is the larger of the two.
        """
        d, h, kv, inter, vocab = dtype_bytes, self.hidden_size, self.kv_dim, self.intermediate_size, self.vocab_size
        prompt_tokens = sequences * prompt_length
        total_tokens = sequences * (prompt_length + completion_length)
        per_token = self.kv_cache_bytes_per_token(d)
        layer_forward = prompt_tokens * d * (2 * h + 2 * kv + h + 4 * inter)
        last_logits = sequences * vocab * (d + 4)
        sampling = sequences * vocab * (4 * 4 + 8)
        return {
            "prefill": prompt_tokens * per_token + layer_forward + last_logits,
            "decode": total_tokens * per_token + total_tokens * per_token // self.num_hidden_layers + sampling,
        }

    def checkpointed_activation_bytes(self, micro_batch: int, sequence_length: int, dtype_bytes: int = 2) -> int:
        """Peak activation bytes of one micro-batch under gradient checkpointing, LoRA without
        dropout, every position scored: saved_activations + max(lm_head, recompute)."""
        terms = self.activation_bytes(micro_batch, sequence_length, dtype_bytes)
        return terms["saved_activations"] + max(terms["lm_head"], terms["recompute"], terms["embedding_gradient"])


def _qwen2(hidden, layers, heads, kv_heads, intermediate, vocab, tied) -> dict:
    return {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    }


# The config.json shapes of the Qwen2.5 models the configs name (the hub is unreachable when the
# DAG is planned); the base and Instruct models share their shape.
_QWEN25 = {
    "0.5B": _qwen2(896, 24, 14, 2, 4864, 151936, True),
    "1.5B": _qwen2(1536, 28, 12, 2, 8960, 151936, True),
    "3B": _qwen2(2048, 36, 16, 2, 11008, 151936, True),
    "7B": _qwen2(3584, 28, 28, 4, 18944, 152064, False),
    "14B": _qwen2(5120, 48, 40, 8, 13824, 152064, False),
    "32B": _qwen2(5120, 64, 40, 8, 27648, 152064, False),
}
SHIPPED_SHAPES: dict[str, dict] = {
    f"Qwen/Qwen2.5-{size}{suffix}": shape for size, shape in _QWEN25.items() for suffix in ("", "-Instruct")
}


class UnknownShape(ValueError):
    """Neither a config.json nor the shipped table gives the model's shape."""


def architecture(source: str, local_dir: str | Path | None = None) -> Architecture:
    """The model's shape: a local or staged folder's config.json when present, else the shipped table."""
    if local_dir is not None:
        config = Path(local_dir) / "config.json"
        if config.exists():
            return Architecture.from_config(json.loads(config.read_text()))
    if source not in SHIPPED_SHAPES:
        raise UnknownShape(
            f"no config.json for model {source!r}: stage it locally or add its shape to "
            f"execrl.planning.architecture.SHIPPED_SHAPES (shipped: {', '.join(sorted(SHIPPED_SHAPES))})"
        )
    return Architecture.from_config(SHIPPED_SHAPES[source])
