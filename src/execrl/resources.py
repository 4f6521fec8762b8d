"""Cluster resources per workflow stage, derived from the model's size.

The keys are the resource names snakemake-executor-plugin-slurm turns into sbatch options:
``gpu`` → ``--gpus=N`` (nothing when 0), ``cpus_per_task`` → ``--cpus-per-task``,
``mem_mb`` → ``--mem``, ``runtime`` (minutes) → ``-t``. Partition, account and GPU model
(``slurm_partition``, ``slurm_account``, ``gpu_model``) belong to the cluster and come from the
profile or the model's config, not from here. Any value can be replaced per rule with
``set-resources`` in the profile.
"""

from __future__ import annotations

import math

GPU_STAGES = ("generate", "train", "merge")
CPU_STAGES = ("data", "execute", "report")

# Below this size a model runs on CPU in every stage (the embedded tiny model, test models).
CPU_ONLY_BELOW_B = 0.1

# GPU memory per billion parameters: bf16 weights plus KV cache for generation and merging,
# bf16 weights plus LoRA gradients, optimizer state and activations for training.
GPU_GB_PER_B = {"generate": 2.5, "train": 6.0, "merge": 2.5}
# Training all weights with Adam in mixed precision: bf16 weights and gradients (2 + 2 bytes), fp32
# master weights and two moments (12 bytes) per parameter, plus activations: 18 GB per billion.
# ZeRO-3 shards all of it, so the job's GPUs need this much together.
FULL_WEIGHT_TRAIN_GB_PER_B = 18.0
GPU_MEMORY_GB = 80
# One node: `accelerate launch` and vLLM's tensor parallelism stay inside one job on one node.
MAX_GPUS = 8
CPUS_PER_GPU = 8

# Host memory of a GPU job: a share per GPU (data loading, CUDA context, NCCL buffers) plus room
# to load the model's weights on the host once (bf16 plus the copy made while loading).
_HOST_GB_PER_GPU = 16
_HOST_GB_PER_B = 4
_MIN_GPU_JOB_GB = 32
# Merging on the CPU: bf16 weights (2 bytes per parameter) loaded, merged and saved, twice over.
_MERGE_HOST_GB_PER_B = 8

# Minutes of the first attempt for a model of up to 3B parameters; larger models scale linearly.
_BASE_MINUTES = {"generate": 120, "train": 480, "merge": 60}
_REFERENCE_B = 3.0
# No attempt asks for more than two days, a common partition limit; training resumes from its
# checkpoints on the next attempt instead.
MAX_RUNTIME_MINUTES = 2 * 24 * 60

_CPU_STAGE = {
    # stage: (cpus_per_task, mem_mb, minutes)
    "data": (2, 4000, 60),
    "execute": (8, 16000, 60),  # annotate_candidates asks for execution.workers CPUs instead
    "report": (2, 4000, 60),
}
_CPU_MODEL = (2, 8000, 60)  # a GPU stage of a model small enough for CPU


def gpu_gb(stage: str, params_b: float, full_weight: bool = False) -> float:
    """GPU memory (GB) one job of a GPU stage needs in all; `full_weight` counts only for training."""
    per_b = FULL_WEIGHT_TRAIN_GB_PER_B if full_weight and stage == "train" else GPU_GB_PER_B[stage]
    return params_b * per_b


def gpus_for(stage: str, params_b: float, full_weight: bool = False) -> int:
    """GPUs one job of a GPU stage needs: enough 80 GB devices for the model, as a power of two.
    Merging an adapter runs on the CPU (`execrl.lora.merge_adapter`): no GPU."""
    if stage not in GPU_STAGES:
        raise ValueError(f"{stage!r} is not a GPU stage ({', '.join(GPU_STAGES)})")
    if params_b < CPU_ONLY_BELOW_B or stage == "merge":
        return 0
    gpus = max(1, math.ceil(gpu_gb(stage, params_b, full_weight) / GPU_MEMORY_GB))
    gpus = 1 << (gpus - 1).bit_length()  # powers of two suit tensor and data parallelism
    return min(gpus, MAX_GPUS)


def _runtime(minutes: float, attempt: int) -> int:
    return int(min(minutes * attempt, MAX_RUNTIME_MINUTES))


def stage_resources(stage: str, params_b: float, attempt: int = 1, full_weight: bool = False) -> dict[str, int]:
    """Slurm resources for one job: GPUs, CPUs, memory (MB) and runtime (minutes).

    GPU stages (generation, training, merging) get GPUs, CPUs and host memory from the model's
    size; training all weights (`full_weight`) needs about three times LoRA's GPU memory. CPU
    stages (data, execution, report) never get a GPU. Runtime grows with the attempt,
    so a job retried after a timeout or preemption asks for longer, up to MAX_RUNTIME_MINUTES.
    Models under 0.1B parameters run on CPU everywhere.
    """
    if stage not in GPU_STAGES + CPU_STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(GPU_STAGES + CPU_STAGES)}")
    if params_b < 0:
        raise ValueError(f"params_b must be non-negative, got {params_b}")
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    if stage in CPU_STAGES or params_b < CPU_ONLY_BELOW_B:
        cpus, mem_mb, minutes = _CPU_STAGE[stage] if stage in CPU_STAGES else _CPU_MODEL
        return {"gpu": 0, "tasks_per_gpu": 0, "cpus_per_task": cpus, "mem_mb": mem_mb, "runtime": _runtime(minutes, attempt)}
    if stage == "merge":
        # On the CPU: the base weights in their own dtype, merged in place, and the copy written out.
        host_gb = max(_MIN_GPU_JOB_GB, _MERGE_HOST_GB_PER_B * params_b)
        minutes = _BASE_MINUTES[stage] * max(1.0, params_b / _REFERENCE_B)
        return {"gpu": 0, "tasks_per_gpu": 0, "cpus_per_task": CPUS_PER_GPU, "mem_mb": int(math.ceil(host_gb * 1000)),
                "runtime": _runtime(minutes, attempt)}
    gpus = gpus_for(stage, params_b, full_weight)
    host_gb = max(_MIN_GPU_JOB_GB, _HOST_GB_PER_GPU * gpus + _HOST_GB_PER_B * params_b)
    minutes = _BASE_MINUTES[stage] * max(1.0, params_b / _REFERENCE_B)
    return {
        "gpu": gpus,
        # snakemake-executor-plugin-slurm 2.6 asks for one task per GPU unless told 0; a job is one task.
        "tasks_per_gpu": 0,
        "cpus_per_task": CPUS_PER_GPU * gpus,
        "mem_mb": int(math.ceil(host_gb * 1000)),
        "runtime": _runtime(minutes, attempt),
    }


def training_job_resources(
    layout, params_b: float, attempt: int = 1, sandbox_workers: int = 0, server_gpus: int = 0
) -> dict[str, int]:
    """Slurm resources of a training job from its memory plan (`execrl.memory_plan.TrainingLayout`;
    None for a model that trains on CPU): the training processes' and the vLLM server's GPUs, one
    node, CPUs for every GPU plus `sandbox_workers` per training process, and host memory for every
    GPU, the model's weights and the optimizer state the plan offloads to the host. Without a plan
    (a model on CPU, or one whose shape is unknown until staged), sized by `params_b`, with
    `server_gpus` of a vLLM server beside one process per remaining GPU.
    """
    base = stage_resources("train", params_b, attempt)
    if layout is None:
        gpus = max(base["gpu"], server_gpus + 1) if server_gpus else base["gpu"]
        processes = max(1, gpus - server_gpus)
        cpus = (CPUS_PER_GPU * gpus if gpus else base["cpus_per_task"]) + sandbox_workers * processes
        mem_mb = base["mem_mb"]
        if gpus:
            mem_mb = int(math.ceil(max(_MIN_GPU_JOB_GB, _HOST_GB_PER_GPU * gpus + _HOST_GB_PER_B * params_b) * 1000))
        return {**base, "gpu": gpus, "nodes": 1, "processes": processes, "cpus_per_task": cpus, "mem_mb": mem_mb}
    host_gb = max(_MIN_GPU_JOB_GB, _HOST_GB_PER_GPU * layout.gpus + _HOST_GB_PER_B * params_b) + layout.plan.host_gb
    return {
        **base,
        "gpu": layout.gpus,
        "nodes": 1,
        "processes": layout.processes,
        "cpus_per_task": CPUS_PER_GPU * layout.gpus + sandbox_workers * layout.processes,
        "mem_mb": int(math.ceil(host_gb * 1000)),
    }
