"""Which CPU kernels compute the numbers, and what the machine that ran them was.

torch's CPU kernels dispatch on the processor's instruction set: ATen picks AVX-512 or AVX2
code for its vectorised ops, oneDNN and MKL pick their own. The same seed then gives other
weights on another computer, and a warm start from scratch amplifies the difference into
another model (40 AdamW steps of a 2-layer Qwen2 end with other weights under ATen's AVX-512
and AVX2 kernels). `compute.cpu_kernels: avx2` (the default) pins every library to AVX2, which
every x86-64 machine of the last decade has, so the same config gives the same numbers on any
of them. `native` leaves the choice to each library (faster where the CPU has more); since it
can change results it is part of the settings a model's path digest covers
(`execrl.run_paths.model_levels`), and the report says which was used.

The pin is a set of environment variables each library reads once, when it first dispatches:
the workflow sets them at parse time (`workflow/rules/common.smk`), before any job starts, so
every job — script, shell command, `accelerate launch` child, vLLM server — inherits them,
under `make report` and a hand-run `snakemake` alike, and on a cluster node (the job's
Snakemake parses the workflow again there).
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from pathlib import Path

CPU_KERNELS = ("avx2", "native")
"""The choices of `compute.cpu_kernels`."""

PINNED_ENVIRONMENT = {
    "avx2": {
        # ATen's vectorised kernels (torch.backends.cpu.get_cpu_capability()).
        "ATEN_CPU_CAPABILITY": "avx2",
        # oneDNN (mkldnn) primitives.
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        # MKL's BLAS: its widest code path, and its conditional numerical reproducibility mode,
        # which also holds Intel and AMD processors to the same AVX2 code.
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "MKL_CBWR": "AVX2",
    },
    "native": {},
}
"""Environment variables each choice sets. `native` sets none and leaves any set outside alone."""

PIN_VARIABLES = tuple(sorted({key for env in PINNED_ENVIRONMENT.values() for key in env}))

GPU_ENVIRONMENT = {
    # cuBLAS picks its reduction order per stream workspace; a fixed workspace makes a GEMM give the
    # same bits from run to run on one GPU type (NVIDIA's cuBLAS docs, "Results reproducibility").
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
}
"""Set for every choice of `cpu_kernels`: the cheap switch that makes GPU runs repeatable on the
same GPU type, driver and settings (docs/cluster.md, "What a GPU run promises"). No effect on CPU."""


def kernel_environment(cpu_kernels: str) -> dict[str, str]:
    """The variables that pin the CPU kernels for `compute.cpu_kernels`."""
    if cpu_kernels not in PINNED_ENVIRONMENT:
        raise ValueError(f"compute.cpu_kernels: {cpu_kernels!r} is not one of {', '.join(CPU_KERNELS)}")
    return dict(PINNED_ENVIRONMENT[cpu_kernels])


def pin_cpu_kernels(cpu_kernels: str, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the pin's variables, and GPU_ENVIRONMENT's, in `environ` (this process's environment by
    default), so that the processes it starts inherit them. Must run before torch first
    dispatches a kernel in a process that computes results; returns what it set."""
    pins = {**kernel_environment(cpu_kernels), **GPU_ENVIRONMENT}
    (os.environ if environ is None else environ).update(pins)
    return pins


def cpu_model() -> str:
    """The processor's model name (`/proc/cpuinfo`, else the platform's word for it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def widest_instruction_set() -> str:
    """The widest vector instruction set the processor offers, as ATen names them."""
    try:
        flags = next(
            set(line.split(":", 1)[1].split())
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        return "unknown"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"


def compute_provenance(cpu_kernels: str | None = None) -> dict:
    """What computed the numbers: the CPU, the instruction set torch's kernels use in this process
    (set by the same environment every job inherits), the pin, thread counts; GPU, driver and
    CUDA where one is visible."""
    import torch

    record = {
        "cpu_kernels": cpu_kernels,
        "cpu_model": cpu_model(),
        "cpu_widest_instruction_set": widest_instruction_set(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "pins": {key: os.environ[key] for key in (*PIN_VARIABLES, *GPU_ENVIRONMENT) if key in os.environ},
        "torch_threads": torch.get_num_threads(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
    }
    if torch.cuda.is_available():
        record["gpu"] = torch.cuda.get_device_name(0)
        record["cuda"] = torch.version.cuda
        record["gpu_driver"] = _nvidia_driver()
    return record


def _nvidia_driver() -> str | None:
    try:
        return Path("/proc/driver/nvidia/version").read_text().split("Kernel Module")[1].split()[0]
    except (OSError, IndexError):
        return None


def describe(record: dict) -> str:
    """One line for the report: e.g. `AMD EPYC · kernels AVX2 (pinned: avx2; CPU offers AVX512)`."""
    if not record:
        return "not recorded"
    pin = record.get("cpu_kernels") or "unknown"
    text = (
        f"{record.get('cpu_model', '?')} · torch kernels {record.get('torch_cpu_capability', '?')}"
        f" (compute.cpu_kernels: {pin}; the CPU offers {record.get('cpu_widest_instruction_set', '?')})"
        f" · {record.get('torch_threads', '?')} torch thread(s) in the report job"
    )
    if record.get("gpu"):
        text += f" · GPU {record['gpu']}, driver {record.get('gpu_driver')}, CUDA {record.get('cuda')}"
    return text
