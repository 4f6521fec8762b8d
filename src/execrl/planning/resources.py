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
# Without a node (execrl.planning.cluster.Node) to size for: 80 GB GPUs, 8 to a node.
GPU_MEMORY_GB = 80
# One node: `accelerate launch` and vLLM's tensor parallelism stay inside one job on one node.
MAX_GPUS = 8
CPUS_PER_GPU = 8
# The least a GPU job runs on: per GPU its process and a data-loading or vLLM API thread, and one
# sandbox worker per training process of an online method. Below CPUS_PER_GPU plus the workers
# only when the node has fewer CPUs.
MIN_CPUS_PER_GPU = 2

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


def gpu_job_host_gb(gpus: int, params_b: float) -> float:
    """Host memory (GB) of a GPU job besides offloaded optimizer state: a share per GPU (data
    loading, CUDA context, NCCL buffers) plus room to load the model's weights on the host once."""
    return max(_MIN_GPU_JOB_GB, _HOST_GB_PER_GPU * gpus + _HOST_GB_PER_B * params_b)


def least_gpu_job_cpus(gpus: int, processes: int, sandbox_workers: int) -> int:
    """The fewest CPUs a GPU job runs on: MIN_CPUS_PER_GPU per GPU, one sandbox worker per process."""
    return MIN_CPUS_PER_GPU * gpus + (processes if sandbox_workers else 0)


def gpu_job_cpus(gpus: int, processes: int, sandbox_workers: int, node_cpus: float = math.inf) -> tuple[int, int] | None:
    """CPUs a GPU job asks for and the sandbox workers each of its training processes gets:
    CPUS_PER_GPU per GPU plus `sandbox_workers` per process, or, on a node with fewer CPUs, all
    the node's, with the workers cut to what is left beyond MIN_CPUS_PER_GPU per GPU. None when
    the node has fewer than MIN_CPUS_PER_GPU per GPU plus one worker per process (with workers)."""
    wanted = CPUS_PER_GPU * gpus + sandbox_workers * processes
    if node_cpus < least_gpu_job_cpus(gpus, processes, sandbox_workers):
        return None
    cpus = int(min(wanted, node_cpus))
    workers = min(sandbox_workers, (cpus - MIN_CPUS_PER_GPU * gpus) // processes) if sandbox_workers else 0
    return cpus, workers


def gpu_gb(stage: str, params_b: float, full_weight: bool = False) -> float:
    """GPU memory (GB) one job of a GPU stage needs in all; `full_weight` counts only for training."""
    per_b = FULL_WEIGHT_TRAIN_GB_PER_B if full_weight and stage == "train" else GPU_GB_PER_B[stage]
    return params_b * per_b


def gpus_for(
    stage: str, params_b: float, full_weight: bool = False, gpu_memory_gb: float = GPU_MEMORY_GB, max_gpus: int = MAX_GPUS
) -> int:
    """GPUs one job of a GPU stage needs: enough devices of `gpu_memory_gb` for the model, as a
    power of two, at most `max_gpus` (one node). Merging an adapter runs on the CPU
    (`execrl.training.lora.merge_adapter`): no GPU."""
    if stage not in GPU_STAGES:
        raise ValueError(f"{stage!r} is not a GPU stage ({', '.join(GPU_STAGES)})")
    if params_b < CPU_ONLY_BELOW_B or stage == "merge":
        return 0
    gpus = max(1, math.ceil(gpu_gb(stage, params_b, full_weight) / gpu_memory_gb))
    gpus = 1 << (gpus - 1).bit_length()  # powers of two suit tensor and data parallelism
    return min(gpus, max_gpus)


def _runtime(minutes: float, attempt: int) -> int:
    return int(min(minutes * attempt, MAX_RUNTIME_MINUTES))


def stage_resources(
    stage: str, params_b: float, attempt: int = 1, full_weight: bool = False, node=None
) -> dict[str, int]:
    """Slurm resources for one job: GPUs, CPUs, memory (MB) and runtime (minutes).

    `node` (execrl.planning.cluster.Node, the partition a GPU job targets) sizes GPU jobs for its GPU's
    memory, at most its GPUs and CPUs; None: 80 GB GPUs, 8 to a node, CPUs unbounded.

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
    if node is None:
        gpus = gpus_for(stage, params_b, full_weight)
        cpus = CPUS_PER_GPU * gpus
    else:
        gpus = gpus_for(stage, params_b, full_weight, node.gpu.memory_gb, node.gpus)
        cpus = int(min(CPUS_PER_GPU * gpus, node.cpus))
    host_gb = gpu_job_host_gb(gpus, params_b)
    minutes = _BASE_MINUTES[stage] * max(1.0, params_b / _REFERENCE_B)
    return {
        "gpu": gpus,
        # snakemake-executor-plugin-slurm 2.6 asks for one task per GPU unless told 0; a job is one task.
        "tasks_per_gpu": 0,
        "cpus_per_task": cpus,
        "mem_mb": int(math.ceil(host_gb * 1000)),
        "runtime": _runtime(minutes, attempt),
    }


# A runtime from a measured step: the estimate times this margin (a step's time varies with the
# completions' lengths and the sandbox's load), plus minutes for loading, interval evaluations and
# saving, which the measured step does not include.
MEASURED_RUNTIME_MARGIN = 1.5
MEASURED_RUNTIME_EXTRA_MINUTES = 30


def generation_rounds(max_steps: int, gradient_accumulation_steps: int = 1, steps_per_generation: int | None = None,
                      num_iterations: int = 1) -> int:
    """Generation rounds of a GRPO run of `max_steps` optimizer updates: each round's completions
    feed steps_per_generation / gradient_accumulation_steps updates per pass, num_iterations passes
    (TRL's default steps_per_generation is gradient_accumulation_steps: one round per update)."""
    micro_steps = steps_per_generation or gradient_accumulation_steps
    updates_per_round = max(1, micro_steps // gradient_accumulation_steps) * num_iterations
    return math.ceil(max_steps / updates_per_round)


def training_wall_seconds(steps: int, update_seconds: float, rounds: int = 0, generation_seconds: float = 0.0) -> float:
    """A training job's wall time from one measured step (the preflight's): `steps` updates of
    `update_seconds` and `rounds` generation rounds of `generation_seconds`."""
    if steps < 0 or rounds < 0 or update_seconds < 0 or generation_seconds < 0:
        raise ValueError("steps, rounds and seconds must be non-negative")
    return steps * update_seconds + rounds * generation_seconds


def measured_runtime_minutes(wall_seconds: float, attempt: int = 1) -> int:
    """The Slurm `runtime` of a training job whose wall time is estimated from a measured step:
    MEASURED_RUNTIME_MARGIN times the estimate plus MEASURED_RUNTIME_EXTRA_MINUTES, growing with
    the attempt as every runtime does."""
    minutes = math.ceil(wall_seconds * MEASURED_RUNTIME_MARGIN / 60) + MEASURED_RUNTIME_EXTRA_MINUTES
    return _runtime(minutes, attempt)


def measured_step(report: dict, job: str) -> dict | None:
    """The step the preflight `report` (execrl.planning.preflight's JSON) measured for `job`
    ("MODEL/METHOD", or a method variant it ran as), as {generation_seconds, update_seconds}; None
    when it did not measure that job."""
    for record in report.get("jobs", []):
        model = record.get("model") or record["job"].split("/")[0]
        names = {record["job"]} | {f"{model}/{variant}" for variant in record.get("same_shape_as", [])}
        measured = record.get("measured")
        if job in names and measured and record.get("status") == "fits":
            return {"generation_seconds": measured.get("generation_seconds", 0.0),
                    "update_seconds": measured.get("update_seconds", measured["step_seconds"])}
    return None


def training_job_resources(
    layout, params_b: float, attempt: int = 1, sandbox_workers: int = 0, server_gpus: int = 0,
    wall_seconds: float | None = None,
) -> dict[str, int]:
    """Slurm resources of a training job from its memory plan (`execrl.planning.memory_plan.TrainingLayout`;
    None for a model that trains on CPU): the training processes' and the vLLM server's GPUs, one
    node, the plan's CPUs (every GPU's plus `sandbox_workers` per training process, at most the
    node's) and host memory (every GPU's share, the model's weights and the optimizer state the
    plan offloads to the host). Without a plan (a model
    on CPU, or one whose shape is unknown until staged), sized by `params_b`, with `server_gpus`
    of a vLLM server beside one process per remaining GPU. `wall_seconds`: the job's wall time
    estimated from a measured step (training_wall_seconds), which sets its runtime
    (measured_runtime_minutes) instead of the size-based guess.
    """
    base = stage_resources("train", params_b, attempt)
    if wall_seconds is not None:
        base["runtime"] = measured_runtime_minutes(wall_seconds, attempt)
    if layout is None:
        gpus = max(base["gpu"], server_gpus + 1) if server_gpus else base["gpu"]
        processes = max(1, gpus - server_gpus)
        cpus = (CPUS_PER_GPU * gpus if gpus else base["cpus_per_task"]) + sandbox_workers * processes
        mem_mb = base["mem_mb"]
        if gpus:
            mem_mb = int(math.ceil(gpu_job_host_gb(gpus, params_b) * 1000))
        return {**base, "gpu": gpus, "nodes": 1, "processes": processes, "cpus_per_task": cpus, "mem_mb": mem_mb}
    return {
        **base,
        "gpu": layout.gpus,
        "nodes": 1,
        "processes": layout.processes,
        "cpus_per_task": layout.cpus,
        "mem_mb": int(math.ceil(layout.host_gb * 1000)),
    }
