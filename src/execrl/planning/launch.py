"""How a training job starts its processes: always `accelerate launch`, with a config chosen by the model.

The `train` rule runs, for 1 or many processes, on CPU or GPU alike::

    accelerate launch --config_file <accelerate_config(...)> --num_processes <training_processes(...)> \\
        --num_machines 1 --main_process_port 0 -m execrl.training.train_job METHOD ...

The config files live in ``workflow/accelerate/``:

- ``cpu.yaml``: processes on CPU with the gloo backend (models small enough for CPU);
- ``zero3-cpu.yaml``: DeepSpeed ZeRO-3 on CPU processes (gloo, no mixed precision), for a CPU job
  whose model a GPU job would shard;
- ``ddp.yaml``: every GPU holds the whole model and trains on a share of each batch, when
  training the model fits one GPU;
- ``zero3.yaml``: DeepSpeed ZeRO-3 shards weights, gradients and optimizer state across the
  GPUs, when it does not (large models, and full-weight training of all but small ones).

The choice depends on the device class, the model's size and full-weight training only, never on
the process count, so changing a job's GPUs leaves the rule's params (and its results) alone.
``--main_process_port 0`` lets two jobs share a node.
"""

from __future__ import annotations

import math
from pathlib import Path

from execrl.planning.resources import GPU_MEMORY_GB, gpu_gb

# workflow/accelerate in a checkout (the package is installed editable from src/).
DEFAULT_CONFIG_DIR = Path(__file__).resolve().parents[3] / "workflow" / "accelerate"

DEVICES = ("cpu", "gpu")


def fits_one_gpu(params_b: float, full_weight: bool = False, gpu_memory_gb: float = GPU_MEMORY_GB) -> bool:
    """Whether training a model this size (LoRA, or all weights) fits in one GPU's memory."""
    return math.ceil(gpu_gb("train", params_b, full_weight)) <= gpu_memory_gb


def accelerate_config(device: str, params_b: float, full_weight: bool = False, config_dir: str | Path | None = None) -> Path:
    """The accelerate config file of a training job: ``cpu.yaml``, ``zero3-cpu.yaml``, ``ddp.yaml`` or ``zero3.yaml``."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if params_b < 0:
        raise ValueError(f"params_b must be non-negative, got {params_b}")
    sharded = not fits_one_gpu(params_b, full_weight)
    if device == "cpu":
        name = "zero3-cpu.yaml" if sharded else "cpu.yaml"
    else:
        name = "zero3.yaml" if sharded else "ddp.yaml"
    path = Path(config_dir or DEFAULT_CONFIG_DIR) / name
    if not path.is_file():
        raise FileNotFoundError(f"accelerate config {path} not found")
    return path


def accelerate_config_of_stage(device: str, zero_stage: int, config_dir: str | Path | None = None) -> Path:
    """The accelerate config of the memory plan's ZeRO stage (`execrl.planning.memory_plan`): 0 is DDP
    (``ddp.yaml``, ``cpu.yaml`` on CPU), 3 is ZeRO-3 (``zero3.yaml``, ``zero3-cpu.yaml``). The dtype
    and the optimizer's offload come as `accelerate launch` options (`--mixed_precision`,
    `--offload_optimizer_device`), so one file serves every GPU model."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if zero_stage not in (0, 3):
        raise ValueError(f"zero_stage must be 0 (DDP) or 3 (ZeRO-3), got {zero_stage}")
    names = {("cpu", 0): "cpu.yaml", ("cpu", 3): "zero3-cpu.yaml", ("gpu", 0): "ddp.yaml", ("gpu", 3): "zero3.yaml"}
    path = Path(config_dir or DEFAULT_CONFIG_DIR) / names[device, zero_stage]
    if not path.is_file():
        raise FileNotFoundError(f"accelerate config {path} not found")
    return path


def training_processes(gpus: int, vllm_server_gpus: int = 0, cpu_processes: int = 1) -> int:
    """Training processes of a job: one per GPU not serving vLLM; `cpu_processes` on CPU."""
    if gpus < 0 or vllm_server_gpus < 0:
        raise ValueError(f"GPU counts must be non-negative, got gpus={gpus}, vllm_server_gpus={vllm_server_gpus}")
    if cpu_processes < 1:
        raise ValueError(f"cpu_processes must be at least 1, got {cpu_processes}")
    if gpus == 0:
        if vllm_server_gpus:
            raise ValueError("a vLLM server needs GPUs, and the job has none")
        return cpu_processes
    if vllm_server_gpus >= gpus:
        raise ValueError(f"the vLLM server's {vllm_server_gpus} GPU(s) leave none of the job's {gpus} for training")
    return gpus - vllm_server_gpus
