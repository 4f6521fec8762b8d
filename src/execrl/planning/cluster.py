"""The cluster's GPU nodes as the memory plan sees them.

Two settings describe them (`cluster:` in the config): `cluster.partitions`, the Slurm executor's
partition file (profiles/slurm/partitions.yaml: each partition's `max_gpu`, `max_mem_mb`,
`max_cpus_per_task`/`max_threads` and `available_gpu_models`), and `cluster.gpu_types`, what each
Slurm GPU type name stands for (memory in GB and CUDA compute capability). A model's
`gpu_model` is the Slurm type string its GPU jobs request (`--gpus=TYPE:N`); null requests any
GPU, and then the plan assumes the smallest GPU the partition file lists for the GPU partitions
(a GPU partition that lists none stops the planning: the GPU a job gets is unknown).

The pinned torch (2.13.0 from PyPI) is a CUDA 13 build: it needs an NVIDIA driver of the R580
series or newer and a GPU of compute capability 7.5 or newer (CUDA 13 dropped Maxwell, Pascal
and Volta: sm_50 to sm_72, so no V100). Such GPUs are refused here, when the DAG is planned.
Nothing here imports torch: it runs while Snakemake builds the DAG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

# CUDA 13's oldest supported architecture: Turing (sm_75). Volta (sm_70, V100) and older are gone.
CUDA_MIN_COMPUTE_CAPABILITY = 7.5
TORCH_CUDA = "torch 2.13.0 from PyPI, a CUDA 13 build (NVIDIA driver R580 or newer)"
# bfloat16 needs Ampere (sm_80) or newer; older GPUs train in fp16.
BF16_COMPUTE_CAPABILITY = 8.0


class ClusterError(ValueError):
    """The cluster description cannot place a model's GPU jobs; the message names the key."""


@dataclass(frozen=True)
class Gpu:
    """One GPU type: its Slurm name, nominal memory (GB, as sold: an "80 GB" card), CUDA compute
    capability, and the memory the driver reports (`memory_mib`: `nvidia-smi --query-gpu=memory.total`,
    in MiB; None: unknown, and the plan takes the nominal GB as 1e9 bytes each, less than any card has)."""

    name: str
    memory_gb: float
    compute_capability: float
    memory_mib: float | None = None

    @property
    def capacity_gb(self) -> float:
        """The bytes the plan fills, in GB (1e9): the reported total, else the nominal size."""
        return self.memory_mib * MIB / 1e9 if self.memory_mib else self.memory_gb

    @property
    def dtype(self) -> str:
        """The 16-bit compute dtype the GPU supports (pre-Ampere GPUs have fp16 only)."""
        return "bf16" if self.compute_capability >= BF16_COMPUTE_CAPABILITY else "fp16"

    @property
    def runs_pinned_torch(self) -> bool:
        return self.compute_capability >= CUDA_MIN_COMPUTE_CAPABILITY


MIB = 1024**2
# For the library's callers that name no cluster (unit tests, bench scripts); the workflow always
# passes the GPU `target_gpu` resolves from the config. 81920 MiB: the A100 80GB's total as
# nvidia-smi reports it (the default cluster.gpu_types table in workflow/schemas/config.schema.json).
A100_80GB = Gpu("a100_80gb", 80.0, 8.0, 81920)


@dataclass(frozen=True)
class Node:
    """What one job gets at most on a partition: GPUs (count and type), host memory, CPUs."""

    gpus: int = 8
    gpu: Gpu = A100_80GB
    memory_gb: float = math.inf
    cpus: float = math.inf
    partition: str = ""

    def describe(self) -> str:
        memory = "unlimited" if math.isinf(self.memory_gb) else f"{self.memory_gb:.0f} GB"
        cpus = "unlimited" if math.isinf(self.cpus) else f"{self.cpus:.0f}"
        where = f"partition {self.partition}: " if self.partition else ""
        return f"{where}{self.gpus} x {self.gpu.name} ({self.gpu.memory_gb:.0f} GB), host memory {memory}, CPUs {cpus}"


def gpu_types(config: dict) -> dict[str, Gpu]:
    """`cluster.gpu_types` as Gpu records, by Slurm type name."""
    return {
        name: Gpu(name, float(spec["memory_gb"]), float(spec["compute_capability"]), spec.get("memory_mib"))
        for name, spec in config["cluster"]["gpu_types"].items()
    }


def read_partitions(path: str | Path) -> dict[str, dict]:
    """The `partitions:` mapping of a snakemake-executor-plugin-slurm partition file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ClusterError(
            f"cluster.partitions: {str(path)!r} does not exist (the Slurm executor's partition file, "
            "relative to the working directory; profiles/slurm/partitions.yaml ships one)"
        )
    partitions = (yaml.safe_load(path.read_text()) or {}).get("partitions")
    if not isinstance(partitions, dict) or not partitions:
        raise ClusterError(f"cluster.partitions: {path} has no `partitions:` mapping")
    return partitions


def _limit(limits: dict, *keys: str) -> float:
    values = [float(limits[key]) for key in keys if limits.get(key) is not None]
    return min(values) if values else math.inf


def gpu_partitions(path: str | Path, gpu_model: str | None) -> dict[str, dict]:
    """The partitions of the file a job requesting `gpu_model` (None: any type) can run on, as the
    plugin chooses them: a GPU partition (`max_gpu` > 0) that lists no `available_gpu_models` or
    lists this one."""
    return {
        name: limits or {}
        for name, limits in read_partitions(path).items()
        if int((limits or {}).get("max_gpu", 0)) > 0
        and (gpu_model is None or not (limits or {}).get("available_gpu_models")
             or gpu_model in limits["available_gpu_models"])
    }


def target_gpu(config: dict, model: str) -> Gpu:
    """The GPU `model`'s GPU jobs are planned for: its `gpu_model`'s type, or with none the
    smallest the partition file lists for its GPU partitions. Refuses an unknown type, a partition
    whose GPU is unknown, and a GPU the pinned CUDA 13 torch cannot run, naming the key."""
    key = f"models.{model}.gpu_model"
    requested = config["models"][model].get("gpu_model")
    known = gpu_types(config)
    path = config["cluster"]["partitions"]
    partitions = gpu_partitions(path, requested)
    if not partitions:
        offered = sorted({m for p in read_partitions(path).values() for m in (p or {}).get("available_gpu_models") or []})
        raise ClusterError(
            f"{key}: no GPU partition of {path} (cluster.partitions) offers "
            f"{'GPUs' if requested is None else repr(requested)}"
            f"{f' (its partitions list: {offered})' if offered else ''}: add `max_gpu` and `available_gpu_models` "
            "to the partition that has them, or request a type it lists"
        )
    if requested is not None:
        names, where = [requested], key
    else:
        unlisted = [name for name, limits in partitions.items() if not limits.get("available_gpu_models")]
        if unlisted:
            raise ClusterError(
                f"{key} is null (any GPU type) and GPU partition(s) {', '.join(unlisted)} of {path} "
                "(cluster.partitions) list no available_gpu_models, so the plan cannot know which GPU a job "
                f"gets: set {key} to the cluster's type name (one of cluster.gpu_types: {', '.join(known)}), "
                "or list each GPU partition's types under available_gpu_models"
            )
        names = sorted({m for limits in partitions.values() for m in limits["available_gpu_models"]})
        where = f"available_gpu_models of {', '.join(partitions)} in {path}"
    missing = [name for name in names if name not in known]
    if missing:
        raise ClusterError(
            f"{where}: GPU type(s) {', '.join(map(repr, missing))} not described under cluster.gpu_types "
            f"(known: {', '.join(known)}); add e.g. `cluster: {{gpu_types: {{{missing[0]}: "
            "{memory_gb: 80, compute_capability: 8.0}}}}` with the GPU's own figures"
        )
    unsupported = [known[name] for name in names if not known[name].runs_pinned_torch]
    if unsupported:
        gpu = unsupported[0]
        raise ClusterError(
            f"{where}: {gpu.name} (compute capability {gpu.compute_capability:g}, cluster.gpu_types.{gpu.name}) "
            f"cannot run {TORCH_CUDA}, which needs compute capability {CUDA_MIN_COMPUTE_CAPABILITY:g} or newer "
            f"(T4, A10, L4, L40S, A100, H100, H200...): "
            + (f"set {key} to a newer GPU type" if requested is not None else
               f"set {key} to a newer GPU type, or remove {gpu.name} from those partitions' available_gpu_models")
        )
    # The smallest by what the driver reports (an H100's 80 GB are fewer bytes than an A100's), then
    # the oldest: the plan holds on whichever of them a job gets.
    return min((known[name] for name in names), key=lambda g: (g.capacity_gb, g.compute_capability))


def target_nodes(config: dict, model: str) -> list[Node]:
    """The nodes `model`'s GPU jobs may get, one per eligible GPU partition in the file's order,
    each with the GPU `target_gpu` plans for and the partition's limits (unset: unlimited)."""
    gpu = target_gpu(config, model)
    partitions = gpu_partitions(config["cluster"]["partitions"], config["models"][model].get("gpu_model"))
    return [
        Node(
            gpus=int(limits["max_gpu"]),
            gpu=gpu,
            memory_gb=_limit(limits, "max_mem_mb") / 1000,
            cpus=_limit(limits, "max_cpus_per_task", "max_threads"),
            partition=name,
        )
        for name, limits in partitions.items()
    ]
