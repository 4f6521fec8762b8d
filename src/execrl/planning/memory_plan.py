"""GPU memory plan of a training job or a vLLM server, term by term, from the model's shape.

Per-GPU gigabytes (1e9 bytes) by term (plan_training names each): weights, gradients, optimizer
state (LoRA or full weights; DDP or ZeRO-3 sharded over the processes; optionally the optimizer
offloaded to the CPU); one micro-batch's activations on TRL 1.16's path, whose GRPO and DPO
trainers score tokens through a fused, chunked LM head (Architecture.activation_bytes:
saved_activations, and backward_peak, the larger of lm_head and recompute); DeepSpeed's buffers,
the CUDA context and NCCL's buffers; the colocated vLLM share; frozen copies (a reference sharded
like the policy) and code_game's opponent (whole on every GPU). A vLLM server: its weights, KV
cache and profiling peak per tensor-parallel GPU. Colocated vLLM is checked to hold its weights
and the round's KV cache in its share. The capacity is what the GPU's driver reports
(execrl.planning.cluster.Gpu.capacity_gb).

Bytes per parameter follow DeepSpeed's own estimator (`estimate_zero3_model_states_mem_needs`,
checked against it in tests/test_memory_plan.py): under ZeRO-3 a GPU holds 2 bytes of 16-bit weights,
4 of fp32 master weights, 4 of fp32 gradient partition and 8 of Adam's two moments per parameter,
divided by the processes, plus 4 bytes per parameter of the largest layer gathered at a time.
The terms are placed where DeepSpeed 0.19.8 allocates them (deepspeed/runtime/zero/stage3.py,
`_setup_for_real_optimizer`): the 16-bit partition, the fp32 master partition, the fp32 gradient
partition (`grad_partitions_flat_buffer`) and the reduce bucket exist before the first step
(Plan.resident); Adam's moments appear at the first optimizer step; the gathered layers only
during the forward and backward. Optimizer offload moves the master weights, gradient partition
and moments to the host. A job's
layout must also fit its node's host memory and CPUs (execrl.planning.cluster.Node: a GPU partition of the
Slurm executor's partition file). The activation terms are checked on the CPU against a real TRL
trainer step (tests/test_memory_plan_trl.py, execrl.planning.memory_measure), in fp32 and in bf16;
the CUDA context, NCCL, DeepSpeed and vLLM figures are estimates from the sources named beside
them. The workflow sizes every training job with `training_job_layout`
when the DAG is planned (workflow/rules/resources.smk); nothing here imports torch or TRL.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from execrl.planning.cluster import A100_80GB, Gpu, Node
from execrl.planning.resources import gpu_job_cpus, gpu_job_host_gb, least_gpu_job_cpus

GB = 1e9
GIB = 1024**3
# TRL 1.16's fused LM head projects tiles of 4096 tokens (trl/kernels/chunked_logprob.py,
# TOKEN_CHUNK_SIZE) by 32768 vocabulary entries (trl/trainer/utils.py, _CHUNKED_LOGPROB_CHUNK_SIZE).
HEAD_TOKEN_TILE = 4096
HEAD_VOCAB_TILE = 32768
# execrl.training.grpo.LengthChunkedGRPOTrainer.score_chunks: GRPO scores a micro-batch in 4 chunks of rows
# (tests/test_memory_plan_trl.py holds the two equal; importing execrl.training.grpo would import TRL).
GRPO_SCORE_CHUNKS = 4
# Offloaded optimizer state on the host, bytes per trainable parameter: DeepSpeed ZeRO-3 with
# `offload_optimizer: cpu` keeps the fp32 master weights (4), Adam's two fp32 moments (8) and the
# fp32 gradient partition the CPU optimizer reads (4) in pinned host memory (pin_memory defaults
# to true in DeepSpeed 0.19), all processes' partitions on the one node. This is what DeepSpeed's
# estimator counts (`estimate_zero3_model_states_mem_needs`, zero_init) without its 1.5 safety
# factor (`additional_buffer_factor`): the rest of the job's host memory (CUDA contexts, loading
# the weights) is counted separately by execrl.planning.resources.gpu_job_host_gb.
OFFLOADED_BYTES_PER_PARAMETER = 4 + 8 + 4
# DeepSpeed ZeRO-3's gradient reduce bucket: accelerate's generated DeepSpeed config (from
# workflow/accelerate/zero3.yaml's keys) sets no bucket key, so DeepSpeed's defaults hold
# (deepspeed/runtime/zero/config.py): reduce_bucket_size 5e8 elements, allocated whole in the 16-bit
# dtype once per communication dtype when the optimizer is built (stage3.py,
# `_setup_for_real_optimizer`: `bucket.buffer`; one dtype here), and stage3_prefetch_bucket_size
# 5e7 elements of parameters gathered ahead during the forward and backward.
DEEPSPEED_REDUCE_BUCKET = 5e8
DEEPSPEED_PREFETCH_BUCKET = 5e7
# Estimates, not measured on a GPU by this project: the CUDA context and the kernels torch loads
# into it (per process), NCCL's communicator buffers of a training process that talks to others
# (DDP, ZeRO-3, weights sent to a vLLM server), and on a vLLM server the communicator that
# receives the trainer's weights (2 to 3.6 GB: the larger is planned) and its CUDA graphs, which
# vLLM captures outside its gpu_memory_utilization budget (vllm/v1/worker/gpu_worker.py: its
# estimate is applied only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
CUDA_CONTEXT_GB = 0.5
NCCL_GB = 1.0
SERVER_NCCL_GB = 3.6
VLLM_CUDA_GRAPHS_GB = 1.0
# vLLM's start-up profiling run (vllm/engine/arg_utils.py defaults for the LLM class, which both
# colocated vLLM and `trl vllm-serve` build, on GPUs of 70 GiB and more other than A100):
# a forward of 16384 tokens and sampling logits for 1024 sequences; 8192 and 256 on other GPUs.
VLLM_PROFILE_TOKENS = {True: 16384, False: 8192}
VLLM_PROFILE_SEQUENCES = {True: 1024, False: 256}


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
            f"execrl.planning.memory_plan.SHIPPED_SHAPES (shipped: {', '.join(sorted(SHIPPED_SHAPES))})"
        )
    return Architecture.from_config(SHIPPED_SHAPES[source])


def vllm_server_kv_cache_bytes(arch: Architecture, max_model_len: int, concurrent_sequences: int) -> int:
    """KV cache a vLLM server needs to hold `concurrent_sequences` sequences of `max_model_len` tokens."""
    return arch.kv_cache_bytes_per_token() * max_model_len * concurrent_sequences


@dataclass(frozen=True)
class TrainingJob:
    """The settings of one training job that decide its per-GPU memory."""

    finetune: str = "full"  # "full" or "lora"
    zero_stage: int = 3  # 0: DDP, every process holds everything; 3: ZeRO-3 sharded over the processes
    processes: int = 1
    micro_batch: int = 1
    sequence_length: int = 2048
    offload_optimizer: bool = False
    lora_rank: int = 16
    lora_dropout: float = 0.0  # > 0: PEFT keeps a dropped copy of each adapted projection's input
    colocated_vllm_fraction: float = 0.0  # vllm_gpu_memory_utilization when vLLM shares the GPU
    frozen_copies: int = 0  # copies sharded like the policy under ZeRO-3: DPO's or GRPO's reference
    whole_copies: int = 0  # copies every GPU loads whole: code_game's opponent
    gpu: Gpu = A100_80GB  # the GPU each process gets (execrl.planning.cluster.target_gpu in the workflow)
    gradient_checkpointing: bool = True
    scored_length: int | None = None  # positions per sequence the LM head scores (GRPO: the completion)
    row_chunks: int = 1  # GRPO: GRPO_SCORE_CHUNKS, each scored and back-propagated on its own
    server_weight_sync: bool = False  # the trainer sends its weights to a vLLM server over NCCL

    def __post_init__(self):
        if self.finetune not in ("full", "lora"):
            raise ValueError(f"finetune must be 'full' or 'lora', not {self.finetune!r}")
        if self.zero_stage not in (0, 3):
            raise ValueError(f"zero_stage must be 0 (DDP) or 3 (ZeRO-3), not {self.zero_stage}")
        if self.offload_optimizer and self.zero_stage == 0:
            raise ValueError("offload_optimizer needs ZeRO-3 (zero_stage 3); DDP keeps the optimizer on the GPU")
        if self.processes < 1 or self.micro_batch < 1:
            raise ValueError(f"processes ({self.processes}) and micro_batch ({self.micro_batch}) must be >= 1")


# The terms of a training plan that hold activations (Plan.activations_gb).
ACTIVATION_TERMS = ("saved_activations", "backward_peak")
# Terms torch's allocator does not see or the preflight does not run: the CUDA context, NCCL's
# buffers, colocated vLLM's share.
UNMEASURED_TERMS = ("cuda_context", "nccl", "colocated_vllm")


@dataclass(frozen=True)
class Plan:
    """Per-GPU gigabytes by term, the host memory the offloaded state needs, and the GPU's capacity.

    `terms` add up to the GPU's peak; `parts` are named pieces of a term that do not add up (a
    training plan's `lm_head`, `recompute` and `embedding_gradient`: `backward_peak` is the largest).
    `resident`: the terms allocated before the first optimizer step (loaded weights, and what
    DeepSpeed or DDP allocate when the model and optimizer are prepared); `after_first_step`: the
    terms the first optimizer step creates and keeps (Adam's moments). The rest of the measured
    terms live only during a step's forward and backward."""

    terms: dict[str, float]
    host_gb: float
    gpu_memory_gb: float
    dtype: str
    micro_batch: int = 1
    accumulation: int = 1
    offload_optimizer: bool = False
    parts: dict[str, float] = dataclasses.field(default_factory=dict)
    resident: tuple[str, ...] = ()
    after_first_step: tuple[str, ...] = ()

    def measured_groups(self) -> dict[str, tuple[str, ...]]:
        """The plan's terms grouped as a probe of one step measures them (execrl.planning.preflight_step):
        `weights` allocated before training begins, `optimizer_state` kept after the first step, and
        `activations` the update's peak above what was there when it began."""
        during = tuple(t for t in self.terms if t not in self.resident + self.after_first_step + UNMEASURED_TERMS)
        return {"weights": self.resident, "optimizer_state": self.after_first_step, "activations": during}

    @property
    def total_gb(self) -> float:
        return sum(self.terms.values())

    @property
    def fits(self) -> bool:
        return self.total_gb <= self.gpu_memory_gb

    @property
    def activations_gb(self) -> float:
        return sum(self.terms.get(name, 0.0) for name in ACTIVATION_TERMS)

    def describe(self) -> str:
        terms = ", ".join(f"{name} {gb:.1f}" for name, gb in self.terms.items() if gb)
        if self.parts and "recompute" in self.parts:
            terms += " [backward_peak = max of " + ", ".join(f"{n} {gb:.1f}" for n, gb in self.parts.items() if gb) + "]"
        elif self.parts:
            terms += "; beside it: " + ", ".join(f"{n} {gb:.1f}" for n, gb in self.parts.items())
        return f"{self.total_gb:.1f} of {self.gpu_memory_gb:.1f} GB per GPU ({terms})"


def plan_training(arch: Architecture, job: TrainingJob) -> Plan:
    """Per-GPU memory of one training process of `job`, term by term (GB):

    weights: the 16-bit weights (under ZeRO-3 this process's partition; LoRA's adapters under DDP
      are fp32 and counted as master_weights);
    master_weights, gradients, optimizer: fp32 master weights (ZeRO-3's partition; LoRA's fp32
      adapters under DDP), the gradients (ZeRO-3: the fp32 partition it allocates up front; DDP:
      16-bit, made by each backward and freed at zero_grad) and Adam's two fp32 moments (made by
      the first optimizer step);
    gathered: under ZeRO-3 the largest layer gathered whole with its 16-bit gradient (4 bytes a
      parameter) and the prefetch bucket, alive only during the forward and backward;
    saved_activations, backward_peak: one micro-batch's activations on TRL's path
      (Architecture.activation_bytes; backward_peak is the largest of its lm_head, recompute and,
      training all weights, embedding_gradient);
    deepspeed_buffers: ZeRO-3's reduce bucket; under DDP with several processes, DDP's gradient
      buckets (a copy of the trainable gradients);
    cuda_context, nccl: the process's CUDA context; NCCL buffers when it talks to other GPUs;
    colocated_vllm: vLLM's share of the GPU's capacity when it runs inside the process;
    frozen_copies: references sharded like the policy; opponent: copies loaded whole on each GPU.
    """
    device = job.gpu
    dtype_bytes = 2
    params = arch.parameters()
    zero3 = job.zero_stage == 3
    shards = job.processes if zero3 else 1
    trainable = params if job.finetune == "full" else arch.lora_parameters(job.lora_rank)
    # ZeRO-3 partitions every parameter in 16 bits, adapters included; under DDP the base model is
    # 16-bit and the trained parameters are the fp32 masters themselves.
    sixteen_bit = params + (trainable if job.finetune == "lora" else 0) if zero3 else params
    # ZeRO-3 keeps the gradient partition in fp32 for the optimizer; DDP all-reduces 16-bit gradients.
    gradient_bytes = 4 if zero3 else 2
    activations = arch.activation_bytes(
        job.micro_batch,
        job.sequence_length,
        dtype_bytes,
        scored_length=job.scored_length,
        row_chunks=job.row_chunks,
        gradient_checkpointing=job.gradient_checkpointing,
        lora_dropout=job.finetune == "lora" and job.lora_dropout > 0,
        trains_head=job.finetune == "full",
    )
    if zero3:
        buckets = DEEPSPEED_REDUCE_BUCKET * dtype_bytes
        gathered = 4 * arch.largest_layer_parameters() + DEEPSPEED_PREFETCH_BUCKET * dtype_bytes
    else:
        buckets = trainable * gradient_bytes if job.processes > 1 else 0
        gathered = 0
    offloaded = job.offload_optimizer
    talks = job.processes > 1 or job.server_weight_sync
    parts = {name: activations[name] / GB for name in ("lm_head", "recompute", "embedding_gradient")}
    terms = {
        "weights": 2 * sixteen_bit / shards / GB,
        "master_weights": 0.0 if offloaded else trainable * 4 / shards / GB,
        "gradients": 0.0 if offloaded else trainable * gradient_bytes / shards / GB,
        "optimizer": 0.0 if offloaded else trainable * 8 / shards / GB,
        "gathered": gathered / GB,
        "saved_activations": activations["saved_activations"] / GB,
        "backward_peak": max(parts.values()),
        "deepspeed_buffers": buckets / GB,
        "cuda_context": CUDA_CONTEXT_GB,
        "nccl": NCCL_GB if talks else 0.0,
        "colocated_vllm": job.colocated_vllm_fraction * device.capacity_gb,
        "frozen_copies": job.frozen_copies * 2 * params / shards / GB,
        "opponent": job.whole_copies * 2 * params / GB,
    }
    resident = ("weights", "master_weights", "deepspeed_buffers", "frozen_copies", "opponent")
    if zero3:
        resident += ("gradients",)
    # Offloaded state lives in host memory: every process's partition, on the one node.
    host_gb = trainable * OFFLOADED_BYTES_PER_PARAMETER / shards * job.processes / GB if offloaded else 0.0
    return Plan(terms, host_gb, device.capacity_gb, device.dtype, job.micro_batch, 1, offloaded, parts,
                resident=resident, after_first_step=("optimizer",))


class DoesNotFit(ValueError):
    """No micro-batch and offload choice fits the job on one node's GPUs."""


def fit(
    arch: Architecture,
    job: TrainingJob,
    completions_per_step: int,
    allow_offload: bool = True,
    gpus_per_node: int = 8,
    other_gpus: tuple[Gpu, ...] = (),
) -> Plan:
    """The largest micro-batch (and accumulation keeping `completions_per_step`) that fits, offloading
    the optimizer only when nothing fits without it.

    Each process takes completions_per_step / processes completions per optimizer step, as
    micro_batch × accumulation. Raises DoesNotFit naming the numbers and what would make it fit.
    """
    if job.processes > gpus_per_node:
        raise DoesNotFit(
            f"{job.processes} training processes do not fit one node of {gpus_per_node} GPUs "
            "(multi-node training is not planned)"
        )
    if completions_per_step % job.processes:
        raise ValueError(f"completions per step ({completions_per_step}) do not split over {job.processes} processes")
    per_process = completions_per_step // job.processes
    micro_batches = [m for m in range(per_process, 0, -1) if per_process % m == 0]
    offload_choices = [False] + ([True] if allow_offload and job.zero_stage == 3 else [])
    for offload in offload_choices:
        for micro in micro_batches:
            plan = plan_training(arch, dataclasses.replace(job, micro_batch=micro, offload_optimizer=offload))
            if plan.fits:
                return dataclasses.replace(plan, accumulation=per_process // micro)
    smallest = plan_training(arch, dataclasses.replace(job, micro_batch=1, offload_optimizer=offload_choices[-1]))
    raise DoesNotFit(
        f"{arch.parameters() / 1e9:.1f}B {job.finetune} training on {job.processes} processes "
        f"(ZeRO stage {job.zero_stage}, {job.sequence_length} tokens) does not fit even at micro-batch 1"
        f"{' with the optimizer offloaded' if smallest.offload_optimizer else ''}: {smallest.describe()}. "
        f"Would help: {_what_would_help(arch, job, completions_per_step, allow_offload, other_gpus)}"
    )


def _fits(arch: Architecture, job: TrainingJob, completions_per_step: int, allow_offload: bool) -> bool:
    try:
        fit(arch, job, completions_per_step, allow_offload)
    except DoesNotFit:
        return False
    return True


def _what_would_help(
    arch: Architecture, job: TrainingJob, completions_per_step: int, allow_offload: bool, other_gpus: tuple[Gpu, ...]
) -> str:
    remedies = []
    if job.finetune == "full" and _fits(
        arch, dataclasses.replace(job, finetune="lora"), completions_per_step, allow_offload
    ):
        remedies.append("finetune: lora")
    if job.zero_stage == 0 and _fits(arch, dataclasses.replace(job, zero_stage=3), completions_per_step, True):
        remedies.append("ZeRO-3 with optimizer offload")
    elif not allow_offload and _fits(arch, job, completions_per_step, True):
        remedies.append("optimizer offload to the CPU")
    larger = [
        other.name
        for other in other_gpus
        if other.memory_gb > job.gpu.memory_gb
        and _fits(arch, dataclasses.replace(job, gpu=other), completions_per_step, allow_offload)
    ]
    if larger:
        remedies.append(f"a larger GPU (gpu_model: {', '.join(larger)})")
    return "; ".join(remedies) if remedies else "no single change (LoRA, optimizer offload, a larger GPU) suffices"


def vllm_profile_bytes(arch: Architecture, tokens: int, sequences: int, tensor_parallel: int = 1) -> int:
    """vLLM's start-up profiling peak: a forward of `tokens` tokens (qkv, the MLP's fused gate/up and
    its activation, split over tensor parallelism; the residual stream whole) and the fp32 sampling
    logits and probabilities of `sequences` sequences over the whole vocabulary."""
    h, kv, inter = arch.hidden_size, arch.kv_dim, arch.intermediate_size
    forward = tokens * ((h + 2 * kv + 3 * inter) / tensor_parallel + 2 * h) * 2
    return int(forward + sequences * arch.vocab_size * 4 * 2)


def _large_gpu(device: Gpu) -> bool:
    """vLLM's larger defaults: GPUs of 70 GiB or more other than A100 (vllm/engine/arg_utils.py)."""
    return device.capacity_gb * GB >= 70 * GIB and "a100" not in device.name.lower()


def plan_vllm_server(
    arch: Architecture,
    max_model_len: int,
    concurrent_sequences: int,
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
    device: Gpu = A100_80GB,
) -> Plan:
    """Per-GPU memory of a vLLM server (`trl vllm-serve`, vLLM's LLM class): inside its
    `gpu_memory_utilization` share of the GPU's capacity, the weights and KV cache split over
    `tensor_parallel` GPUs and its start-up profiling peak (vllm_profile_bytes at vLLM's defaults
    for the GPU; vLLM counts its CUDA context and start-up NCCL buffers inside the share, as
    memory torch did not allocate); beside the share (`parts`), its CUDA graphs and the NCCL
    communicator that receives the trainer's weights, both made after vLLM sized its KV cache."""
    large = _large_gpu(device)
    terms = {
        "weights": 2 * arch.parameters() / tensor_parallel / GB,
        "kv_cache": vllm_server_kv_cache_bytes(arch, max_model_len, concurrent_sequences) / tensor_parallel / GB,
        "profile_peak": vllm_profile_bytes(
            arch, VLLM_PROFILE_TOKENS[large], VLLM_PROFILE_SEQUENCES[large], tensor_parallel
        ) / GB,
    }
    terms["cuda_context"] = CUDA_CONTEXT_GB
    beside = {"cuda_graphs": VLLM_CUDA_GRAPHS_GB, "nccl": SERVER_NCCL_GB}
    return Plan(terms, 0.0, gpu_memory_utilization * device.capacity_gb, device.dtype, parts=beside)


def fit_vllm_server(
    arch: Architecture,
    max_model_len: int,
    concurrent_sequences: int,
    gpu_memory_utilization: float = 0.9,
    device: Gpu = A100_80GB,
    gpus_per_node: int = 8,
) -> tuple[int, Plan]:
    """The smallest tensor parallelism (a power of two dividing the attention heads, as vLLM requires)
    whose per-GPU weights, KV cache and profiling peak fit; DoesNotFit naming the numbers when none on
    one node does. What the server holds beside its share (Plan.parts) is shown, not checked: those
    are estimates not yet measured on a GPU."""
    sizes = [tp for tp in (1, 2, 4, 8, 16) if tp <= gpus_per_node and arch.num_attention_heads % tp == 0]
    for tensor_parallel in sizes:
        plan = plan_vllm_server(
            arch, max_model_len, concurrent_sequences, tensor_parallel, gpu_memory_utilization, device
        )
        if plan.fits:
            return tensor_parallel, plan
    raise DoesNotFit(
        f"a vLLM server of {arch.parameters() / 1e9:.1f}B for {concurrent_sequences} sequences of "
        f"{max_model_len} tokens does not fit even at tensor parallelism {sizes[-1]}: {plan.describe()}. "
        "Would help: a smaller max_model_len or fewer concurrent sequences, or a larger GPU (gpu_model)"
    )


def colocated_vllm_plan(
    arch: Architecture,
    fraction: float,
    device: Gpu,
    tensor_parallel: int,
    sequences: int,
    sequence_length: int,
    max_model_len: int,
) -> Plan:
    """What vLLM inside a training process needs of its `fraction` of the GPU's capacity (TRL's
    colocate mode: an LLM with max_num_seqs = the process's completions of a round × tensor
    parallelism, max_num_batched_tokens 4096): the weights over tensor parallelism, the KV cache
    of all those `sequences` (the tensor-parallel group's) of `sequence_length` tokens at once (at
    least one of `max_model_len`, which vLLM checks at start), and its profiling peak."""
    kv_tokens = max(sequences * sequence_length, max_model_len)
    terms = {
        "weights": 2 * arch.parameters() / tensor_parallel / GB,
        "kv_cache": arch.kv_cache_bytes_per_token() * kv_tokens / tensor_parallel / GB,
        "profile_peak": vllm_profile_bytes(arch, 4096, sequences, tensor_parallel) / GB,
    }
    return Plan(terms, 0.0, fraction * device.capacity_gb, device.dtype)


@dataclass(frozen=True)
class TrainingLayout:
    """One training job's shape on one node: training processes (one GPU each), the vLLM server's
    GPUs (its tensor parallelism), ZeRO stage, the per-GPU plans that chose them, and the host
    memory and CPUs the job asks of the node."""

    processes: int
    server_gpus: int
    zero_stage: int
    plan: Plan
    server_plan: Plan | None = None
    server_max_model_len: int | None = None
    # The settings' own gradient_accumulation_steps: the plan cuts each of their micro-batches
    # into plan.accumulation pieces.
    settings_accumulation: int = 1
    node: Node = Node()
    # The job's host memory: execrl.planning.resources.gpu_job_host_gb plus the offloaded optimizer state.
    host_gb: float = 0.0
    cpus: int = 0
    sandbox_workers: int = 0  # per training process
    # What colocated vLLM needs of its share of each training GPU (None: no colocated vLLM).
    colocated_plan: Plan | None = None

    @property
    def gpus(self) -> int:
        return self.processes + self.server_gpus

    @property
    def micro_batch(self) -> int:
        return self.plan.micro_batch

    @property
    def accumulation(self) -> int:
        """The trainer's gradient_accumulation_steps: micro-batches of `micro_batch` per optimizer step."""
        return self.plan.accumulation * self.settings_accumulation

    @property
    def offload_optimizer(self) -> bool:
        return self.plan.offload_optimizer

    def describe(self) -> str:
        """One line for the dry run: GPUs, micro-batch × accumulation, offload, GB per GPU by term,
        and the host memory and CPUs against the node's."""
        line = (
            f"{self.processes} training GPU(s) (ZeRO stage {self.zero_stage}), micro-batch {self.micro_batch} "
            f"x accumulation {self.accumulation}, optimizer offload {'on' if self.offload_optimizer else 'off'}"
            f"{f' ({self.plan.host_gb:.0f} GB of it on the host)' if self.offload_optimizer else ''}: "
            f"{self.plan.describe()} ({self.node.gpu.name})"
        )
        if self.server_plan is not None:
            line += (
                f"; vLLM server on {self.server_gpus} GPU(s), max_model_len {self.server_max_model_len}: "
                f"{self.server_plan.describe()}, KV cache room for {self.server_sequences} such sequences at once"
            )
        line += f"; host memory {self.host_gb:.0f} of {_amount(self.node.memory_gb)} GB, " \
            f"{self.cpus} of {_amount(self.node.cpus)} CPUs{f' (partition {self.node.partition})' if self.node.partition else ''}"
        if self.colocated_plan is not None:
            line += f"; colocated vLLM in its share: {self.colocated_plan.describe()}"
        return line

    @property
    def server_sequences(self) -> int:
        """Sequences of `server_max_model_len` tokens the server's KV cache holds at once (0: no server)."""
        if self.server_plan is None:
            return 0
        terms = self.server_plan.terms
        room_gb = self.server_plan.gpu_memory_gb - sum(gb for name, gb in terms.items() if name != "kv_cache")
        per_sequence_gb = terms["kv_cache"]  # planned for one sequence
        return int(room_gb // per_sequence_gb)


def _amount(value: float) -> str:
    return "unlimited" if math.isinf(value) else f"{value:.0f}"


def plan_training_layout(
    arch: Architecture,
    job: TrainingJob,
    completions_for: Callable[[int], int],
    processes: int | None = None,
    server_gpus: int = 0,
    server_max_model_len: int | None = None,
    server_gpu_memory_utilization: float = 0.9,
    node: Node | None = None,
    settings_accumulation: int = 1,
    params_b: float | None = None,
    sandbox_workers: int = 0,
    other_gpus: tuple[Gpu, ...] = (),
) -> TrainingLayout:
    """The job's GPUs, ZeRO stage, micro-batch × accumulation and offload on one `node`.

    `completions_for(n)` is the number of sequences one optimizer step's micro-batches hold over
    `n` processes (a ValueError when the step does not split over n). `processes` None: the fewest
    that fit without offloading the optimizer, else the most with it. Full-weight training runs under
    ZeRO-3; LoRA under DDP when it fits one GPU per process, else ZeRO-3. `server_gpus` (0: no
    server) is the least the vLLM server gets: more when its weights and one `server_max_model_len`
    sequence (what vLLM checks at start) need a larger tensor parallelism. Each process's GPU is
    `node.gpu` (None: a node of 8 GPUs of `job.gpu` and unlimited host). A layout must also fit the node's host memory
    (execrl.planning.resources.gpu_job_host_gb for `params_b`, default the shape's count, plus the offloaded
    state) and CPUs (execrl.planning.resources.gpu_job_cpus with `sandbox_workers` per process). DoesNotFit
    names the numbers and what would help (`other_gpus`: the cluster's other GPU types).
    """
    node = Node(gpu=job.gpu) if node is None else node
    job = dataclasses.replace(job, gpu=node.gpu)
    gpus_per_node = node.gpus
    if params_b is None:
        params_b = arch.parameters() / 1e9
    server_plan = None
    if server_gpus:
        length = server_max_model_len or job.sequence_length
        tensor_parallel, server_plan = fit_vllm_server(
            arch, length, 1, server_gpu_memory_utilization, job.gpu, gpus_per_node - 1
        )
        server_gpus = max(server_gpus, tensor_parallel)
        if tensor_parallel < server_gpus:
            server_plan = plan_vllm_server(arch, length, 1, server_gpus, server_gpu_memory_utilization, job.gpu)
        server_max_model_len = length
    room = gpus_per_node - server_gpus
    counts = [processes] if processes is not None else list(range(1, room + 1))
    stages = [3] if job.finetune == "full" else [0, 3]
    splittable = []
    for count in counts:
        try:
            splittable.append((count, completions_for(count)))
        except ValueError:
            continue
    if not splittable:
        raise ValueError(f"the step's sequences split over none of {counts} training processes")
    last_error: DoesNotFit | None = None
    host_error: DoesNotFit | None = None
    # Without offload the fewest GPUs that fit; with it, the most (more GPUs share the host's optimizer work).
    for allow_offload, order in ((False, splittable), (True, splittable[::-1])):
        for count, completions in order:
            for stage in stages:
                candidate = dataclasses.replace(job, processes=count, zero_stage=stage)
                try:
                    plan = fit(arch, candidate, completions, allow_offload, room, other_gpus)
                except DoesNotFit as error:
                    last_error = error
                    continue
                gpus = count + server_gpus
                base_gb = gpu_job_host_gb(gpus, params_b)
                host_gb = base_gb + plan.host_gb
                cpus = gpu_job_cpus(gpus, count, sandbox_workers, node.cpus)
                if host_gb > node.memory_gb or cpus is None:
                    host_error = host_error or DoesNotFit(
                        f"{arch.parameters() / 1e9:.1f}B {job.finetune} training on {count} processes fits its "
                        f"GPUs ({plan.describe()}) but not the node's host: it needs {host_gb:.0f} GB of host memory "
                        f"({base_gb:.0f} GB for {gpus} GPUs and {params_b:.1f}B of weights"
                        f"{f', {plan.host_gb:.0f} GB of offloaded optimizer state' if plan.offload_optimizer else ''}"
                        f") of the node's {_amount(node.memory_gb)} GB, and at least "
                        f"{least_gpu_job_cpus(gpus, count, sandbox_workers)} CPUs of its {_amount(node.cpus)}. "
                        "Would help: finetune: lora, or a partition with more host memory and CPUs (cluster.partitions)"
                    )
                    continue
                return TrainingLayout(
                    count, server_gpus, stage, plan, server_plan, server_max_model_len, settings_accumulation,
                    node, host_gb, cpus[0], cpus[1],
                )
    error = host_error or last_error
    assert error is not None
    more = ""
    if processes is not None:
        try:
            other = plan_training_layout(
                arch, job, completions_for, None, server_gpus, server_max_model_len,
                server_gpu_memory_utilization, node, settings_accumulation, params_b, sandbox_workers,
            )
            more = f"; or training_processes: {other.processes}"
        except (DoesNotFit, ValueError):
            pass
    raise DoesNotFit(f"{error}{more} (node: {node.describe()}; {server_gpus} of its GPUs serving vLLM)")


def check_colocated_vllm(arch: Architecture, layout: TrainingLayout, grpo, job_name: str) -> TrainingLayout:
    """`layout` with the plan of its colocated vLLM (colocated_vllm_plan for `grpo`'s settings, a
    GRPOSettings), or DoesNotFit naming the job, the term and what would fit: the smallest
    grpo.vllm_tensor_parallel_size that would, vllm_mode: server, or the share it needs."""
    length = _planned_length(grpo)
    max_model_len = grpo.vllm_max_model_length or length

    def colocated(tensor_parallel: int) -> Plan:
        sequences = grpo.per_process_completions(layout.processes) * tensor_parallel
        return colocated_vllm_plan(arch, grpo.vllm_gpu_memory_utilization, layout.node.gpu, tensor_parallel,
                                   sequences, length, max_model_len)

    tensor_parallel = grpo.vllm_tensor_parallel_size
    chosen = colocated(tensor_parallel)
    if chosen.fits:
        return dataclasses.replace(layout, colocated_plan=chosen)
    remedies = [
        f"grpo.vllm_tensor_parallel_size: {tp}"
        for tp in (2, 4, 8)
        if tp > tensor_parallel and layout.processes % tp == 0 and arch.num_attention_heads % tp == 0
        and colocated(tp).fits
    ][:1]
    remedies.append("grpo.vllm_mode: server (vLLM on GPUs of its own)")
    share = chosen.total_gb / layout.node.gpu.capacity_gb
    if share < 1:
        remedies.append(f"grpo.vllm_gpu_memory_utilization of at least {math.ceil(share * 100) / 100:.2f}, if the "
                        "training still fits beside it")
    raise DoesNotFit(
        f"{job_name}: colocated vLLM does not fit its share of each training GPU (term colocated_vllm): "
        f"{chosen.describe()} at grpo.vllm_tensor_parallel_size {tensor_parallel} "
        f"(share: grpo.vllm_gpu_memory_utilization {grpo.vllm_gpu_memory_utilization} of "
        f"{layout.node.gpu.name}'s {layout.node.gpu.capacity_gb:.1f} GB). Would help: {'; or '.join(remedies)}"
    )


def _planned_length(grpo) -> int:
    """The sequence length planned for a GRPO step: completion plus PROMPT_TOKENS, at most vLLM's window."""
    length = grpo.max_completion_length + PROMPT_TOKENS
    return min(length, grpo.vllm_max_model_length) if grpo.vllm_max_model_length else length


# Prompt tokens planned beside the completion when vLLM's context window is not set: the prompts'
# own length is known only once the data is prepared, after the DAG is planned.
PROMPT_TOKENS = 1024
# Below this size a model trains on CPU (execrl.planning.resources.CPU_ONLY_BELOW_B): no GPU plan.
_CPU_ONLY_BELOW_B = 0.1


def training_job_layout(config: dict, model: str, method: str, model_dir: str | Path | None = None) -> TrainingLayout | None:
    """The layout of the `train` job of `method` on `model` under the merged workflow `config`,
    or None for a model that trains on CPU. The model's shape comes from `model_dir`'s
    config.json when present, else from SHIPPED_SHAPES (the hub is not asked). The node is the
    first GPU partition of `cluster.partitions` the job fits, with the GPU execrl.planning.cluster.target_gpu
    plans for; DoesNotFit names each partition's numbers when it fits none, ClusterError a
    description that cannot place it."""
    from execrl.planning.cluster import gpu_types, target_nodes
    from execrl.config import without_runtime_settings
    from execrl.methods import METHODS
    from execrl.training_settings import method_overrides, registry_name, with_training_runtime

    model_config = config["models"][model]
    if model_config["source"] == "tiny" or model_config["params_b"] < _CPU_ONLY_BELOW_B:
        return None
    arch = architecture(model_config["source"], model_dir)
    nodes = target_nodes(config, model)
    others = tuple(g for g in gpu_types(config).values() if g.runs_pinned_torch)
    settings = without_runtime_settings(config)
    for section, values in method_overrides(config, method).items():
        settings[section] = {**settings[section], **values}
    # Gradient checkpointing changes no result, but it changes the activations the plan holds.
    settings = with_training_runtime(settings, config, method)
    trains_as = registry_name(config, method)  # a method variant trains as its registry method
    full = model_config["finetuning"] == "full"
    job = TrainingJob(
        finetune="full" if full else "lora", lora_rank=config["lora"]["r"], lora_dropout=config["lora"]["lora_dropout"]
    )
    common = {"processes": model_config["training_processes"], "params_b": model_config["params_b"], "other_gpus": others}
    colocated = None
    if METHODS[trains_as].online:
        from execrl.training.grpo_settings import GRPOSettings

        grpo = GRPOSettings(**settings["grpo"])
        length = _planned_length(grpo)
        colocated = grpo if grpo.use_vllm and grpo.vllm_mode == "colocate" else None
        server = grpo.use_vllm and grpo.vllm_mode == "server"
        opponent = trains_as == "code_game" and settings["code_game"]["opponent"] == "base"
        job = dataclasses.replace(
            job,
            sequence_length=length,
            scored_length=min(grpo.max_completion_length, length),
            row_chunks=GRPO_SCORE_CHUNKS,
            gradient_checkpointing=grpo.gradient_checkpointing,
            colocated_vllm_fraction=grpo.vllm_gpu_memory_utilization if colocated else 0.0,
            # A reference for the KL term (full weights; LoRA scores it with the adapter off) is
            # sharded like the policy; code_game's opponent is a plain model every process loads whole.
            frozen_copies=int(full and grpo.beta > 0),
            whole_copies=int(opponent),
            server_weight_sync=server,
        )

        def plan(node: Node) -> TrainingLayout:
            return plan_training_layout(
                arch,
                job,
                lambda processes: grpo.per_device_batch(processes) * processes,
                server_gpus=config["grpo"]["vllm_server_gpus"] if server else 0,
                server_max_model_len=grpo.vllm_max_model_length,
                server_gpu_memory_utilization=config["grpo"]["vllm_server_gpu_memory_utilization"],
                node=node,
                settings_accumulation=grpo.gradient_accumulation_steps,
                sandbox_workers=config["execution"]["workers"],  # each process rewards with its own
                **common,
            )
    else:
        dpo = settings["dpo"]
        # A DPO micro-batch of m pairs holds 2m sequences (chosen and rejected), planned as m of twice the length.
        job = dataclasses.replace(
            job,
            sequence_length=2 * dpo["max_length"],
            frozen_copies=int(full),
            gradient_checkpointing=dpo["gradient_checkpointing"],
        )

        def plan(node: Node) -> TrainingLayout:
            return plan_training_layout(
                arch,
                job,
                lambda processes: dpo["per_device_train_batch_size"] * processes,
                node=node,
                settings_accumulation=dpo["gradient_accumulation_steps"],
                **common,
            )

    def checked(layout: TrainingLayout) -> TrainingLayout:
        if colocated is None:
            return layout
        return check_colocated_vllm(arch, layout, colocated, f"train {model}/{method}")

    errors = []
    for node in nodes:
        try:
            return checked(plan(node))
        except DoesNotFit as error:
            errors.append(str(error))
    raise DoesNotFit(" | ".join(errors))
