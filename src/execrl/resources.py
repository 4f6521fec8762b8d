"""Cluster resources per workflow stage, derived from the model's size."""

from __future__ import annotations

import math

GPU_STAGES = ("generate", "train", "merge")
CPU_STAGES = ("data", "execute", "report")

# Rough bf16 memory per billion parameters, for weights alone and for LoRA training with activations.
_INFERENCE_GB_PER_B = 2.5
_TRAINING_GB_PER_B = 6.0
_GPU_MEMORY_GB = 80


def stage_resources(stage: str, params_b: float, attempt: int = 1) -> dict[str, int]:
    """Slurm resources for one job: GPUs, CPUs, memory (MB) and runtime (minutes).

    Runtime grows with the attempt so a job retried after a timeout or preemption gets longer.
    Models under 0.1B parameters run on CPU everywhere.
    """
    if stage not in GPU_STAGES + CPU_STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    growth = attempt
    if stage in CPU_STAGES:
        cpus = 8 if stage == "execute" else 2
        return {"gpu": 0, "cpus_per_task": cpus, "mem_mb": 4000 * (1 + (stage == "execute")), "runtime": 60 * growth}
    if params_b < 0.1:
        return {"gpu": 0, "cpus_per_task": 2, "mem_mb": 8000, "runtime": 60 * growth}
    per_b = _TRAINING_GB_PER_B if stage == "train" else _INFERENCE_GB_PER_B
    gpus = max(1, math.ceil(params_b * per_b / _GPU_MEMORY_GB))
    gpus = 1 << (gpus - 1).bit_length()  # powers of two suit tensor and data parallelism
    base_minutes = {"generate": 120, "train": 480, "merge": 60}[stage]
    return {
        "gpu": gpus,
        "cpus_per_task": 8 * gpus,
        "mem_mb": int(max(32_000, params_b * 8_000) * min(gpus, 4)),
        "runtime": int(base_minutes * max(1.0, params_b / 3) * growth),
    }
