"""Per-GPU memory of one training process, term by term (plan_training), and the largest
micro-batch that fits the GPU (fit). A vLLM server's plan (execrl.planning.vllm_plan) is a Plan too.

Bytes per parameter follow DeepSpeed's own estimator (`estimate_zero3_model_states_mem_needs`,
checked against it in tests/test_memory_plan.py): under ZeRO-3 a GPU holds 2 bytes of 16-bit weights,
4 of fp32 master weights, 4 of fp32 gradient partition and 8 of Adam's two moments per parameter,
divided by the processes, plus 4 bytes per parameter of the largest layer gathered at a time.
The terms are placed where DeepSpeed 0.19.8 allocates them (deepspeed/runtime/zero/stage3.py,
`_setup_for_real_optimizer`): the 16-bit partition, the fp32 master partition, the fp32 gradient
partition (`grad_partitions_flat_buffer`) and the reduce bucket exist before the first step
(Plan.resident); Adam's moments appear at the first optimizer step; the gathered layers only
during the forward and backward. Optimizer offload moves the master weights, gradient partition
and moments to the host.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from execrl.planning.architecture import Architecture
from execrl.planning.cluster import A100_80GB, Gpu

GB = 1e9
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
# into it (per process), and NCCL's communicator buffers of a training process that talks to others
# (DDP, ZeRO-3, weights sent to a vLLM server).
CUDA_CONTEXT_GB = 0.5
NCCL_GB = 1.0


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
        remedies.append("models.NAME.finetuning: lora")
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
        remedies.append(f"a larger GPU (models.NAME.gpu_model: {', '.join(larger)})")
    return "; ".join(remedies) if remedies else "no single change (LoRA, optimizer offload, a larger GPU) suffices"
