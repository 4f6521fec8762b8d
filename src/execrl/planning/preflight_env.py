"""The preflight's environment checks: what a training job on this machine needs before any model loads.

Each check has a name, a status and one line of detail:

- `ok`: present and good enough; `fail`: a training job here would fail (the preflight exits
  non-zero); `warn`: works, with a caveat (a JIT-compiled op would not build);
- `n/a`: does not apply (CPU mode: no driver, GPU or NCCL to check).

Checked: the NVIDIA driver against the CUDA major version the installed torch was built for, the
GPU's type, compute capability and memory against the plan's `gpu_model` (`execrl.planning.cluster.Gpu`),
the C/C++ compilers and Python headers Triton and DeepSpeed compile kernels with at run time, and
NCCL as torch sees it.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

from execrl.planning.cluster import CUDA_MIN_COMPUTE_CAPABILITY, Gpu

OK, FAIL, WARN, NOT_APPLICABLE = "ok", "fail", "warn", "n/a"
# The oldest driver branch of each CUDA major version (NVIDIA's CUDA toolkit release notes,
# "minimum required driver version" for Linux): CUDA 12.x needs R525, CUDA 13.x R580.
MIN_DRIVER_OF_CUDA = {11: 450, 12: 525, 13: 580}
# The share of a GPU's nominal memory its driver reports as total: an "80 GB" A100/H100 reports
# about 85e9 bytes (79.2 GiB), more than the nominal 80e9; below this share a card is a smaller one.
MEMORY_TOLERANCE = 0.95


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def driver_check(torch_cuda: str | None, driver: str | None) -> Check:
    """The driver against the CUDA version torch was built for (`torch.version.cuda`)."""
    name = "driver_vs_torch_cuda"
    if torch_cuda is None:
        return Check(name, FAIL, "torch is a CPU build (torch.version.cuda is None): it cannot train on the GPU")
    if driver is None:
        return Check(name, FAIL, f"torch is built for CUDA {torch_cuda} but no NVIDIA driver answered (nvidia-smi)")
    major = int(torch_cuda.split(".")[0])
    needed = MIN_DRIVER_OF_CUDA.get(major)
    branch = int(driver.split(".")[0])
    if needed is None:
        return Check(name, WARN, f"driver {driver}; torch built for CUDA {torch_cuda}, whose minimum driver is not known here")
    if branch < needed:
        return Check(name, FAIL, f"driver {driver} is older than R{needed}, the oldest that runs CUDA {major}.x (torch built for CUDA {torch_cuda})")
    return Check(name, OK, f"driver {driver} runs CUDA {torch_cuda} (needs R{needed} or newer)")


def gpu_check(name: str, total_bytes: int, capability: tuple[int, int], planned: Gpu) -> Check:
    """The visible GPU against the one the plan sizes jobs for (`gpu_model`)."""
    check = "gpu_vs_plan"
    cc = capability[0] + capability[1] / 10
    total_gb = total_bytes / 1e9
    seen = f"{name}, {total_gb:.1f} GB, compute capability {cc:g}"
    if cc < CUDA_MIN_COMPUTE_CAPABILITY:
        return Check(check, FAIL, f"{seen}: the pinned CUDA 13 torch needs compute capability {CUDA_MIN_COMPUTE_CAPABILITY:g} or newer")
    if total_gb < MEMORY_TOLERANCE * planned.memory_gb:
        return Check(check, FAIL, f"{seen}: smaller than the plan's {planned.name} ({planned.memory_gb:g} GB)")
    if cc < planned.compute_capability:
        return Check(check, FAIL, f"{seen}: older than the plan's {planned.name} (compute capability {planned.compute_capability:g}; the plan's dtype is {planned.dtype})")
    return Check(check, OK, f"{seen}; the plan's {planned.name}: {planned.memory_gb:g} GB, compute capability {planned.compute_capability:g}")


def compiler_checks(gpu: bool) -> list[Check]:
    """C and C++ compilers and Python.h: Triton compiles its launcher with a C compiler and the
    Python headers; DeepSpeed's ops compile just in time with a C++ compiler (and nvcc on a GPU)."""
    checks = []
    for tool, candidates, needed_by in (
        ("c_compiler", ("cc", "gcc", "clang"), "Triton's kernel launcher"),
        ("cxx_compiler", ("c++", "g++", "clang++"), "DeepSpeed's just-in-time ops"),
    ):
        found = next((shutil.which(c) for c in candidates if shutil.which(c)), None)
        status = OK if found else (FAIL if gpu and tool == "c_compiler" else WARN)
        checks.append(Check(tool, status, f"{found} ({needed_by})" if found else f"none of {', '.join(candidates)} on PATH ({needed_by})"))
    include = Path(sysconfig.get_paths()["include"])
    header = include / "Python.h"
    checks.append(Check("python_headers", OK if header.exists() else (FAIL if gpu else WARN),
                        f"{header} {'found' if header.exists() else 'missing'} (Triton and DeepSpeed build against it)"))
    if gpu:
        nvcc = shutil.which("nvcc")
        checks.append(Check("nvcc", OK if nvcc else WARN,
                            nvcc or "not on PATH: DeepSpeed ops that need compiling (fused Adam, CPU Adam for offload) cannot build; "
                            "the preflight's jobs use torch's optimizer"))
    else:
        checks.append(Check("nvcc", NOT_APPLICABLE, "CPU mode"))
    return checks


def nvidia_smi() -> dict | None:
    """Driver version, GPU name and total memory from nvidia-smi (None: no driver answered)."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    try:
        out = subprocess.run(
            [binary, "--query-gpu=driver_version,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out:
        return None
    driver, name, memory_mib = (field.strip() for field in out[0].split(",")[:3])
    return {"driver": driver, "name": name, "memory_mib": memory_mib}


def environment_checks(gpu: bool, planned: Gpu | None) -> list[Check]:
    """Every check, for GPU mode (`gpu`) or CPU mode (GPU checks reported as not applicable)."""
    import torch

    checks = [Check("torch", OK, f"torch {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})")]
    if not gpu:
        for name in ("driver_vs_torch_cuda", "gpu_vs_plan", "nccl"):
            checks.append(Check(name, NOT_APPLICABLE, "CPU mode"))
        return checks + compiler_checks(False)
    smi = nvidia_smi()
    checks.append(driver_check(torch.version.cuda, smi["driver"] if smi else None))
    if not torch.cuda.is_available():
        checks.append(Check("gpu_vs_plan", FAIL, "torch.cuda.is_available() is False"))
    else:
        props = torch.cuda.get_device_properties(0)
        if planned is None:
            checks.append(Check("gpu_vs_plan", WARN, f"{props.name}, {props.total_memory / 1e9:.1f} GB: no GPU job planned to compare with"))
        else:
            checks.append(gpu_check(props.name, props.total_memory, (props.major, props.minor), planned))
    try:
        version = torch.cuda.nccl.version()
        available = torch.distributed.is_nccl_available()
        text = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        checks.append(Check("nccl", OK if available else FAIL, f"NCCL {text}, torch.distributed NCCL backend {'available' if available else 'missing'}"))
    except (RuntimeError, AttributeError) as error:
        checks.append(Check("nccl", FAIL, f"NCCL not visible to torch: {error}"))
    return checks + compiler_checks(True)
