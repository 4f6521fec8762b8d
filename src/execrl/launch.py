"""How a training job starts its processes: plain Python on CPU or one GPU, `accelerate launch`
with DDP or DeepSpeed ZeRO-3 on several GPUs of one Slurm job.

The accelerate config files live in ``workflow/accelerate/``: ``ddp.yaml`` when the model fits
on one GPU (every GPU holds a replica and trains on a share of each batch), ``zero3.yaml`` when it
does not (weights, gradients and optimizer state are sharded across the GPUs). A training rule
asks for the job's GPU count and the model's size and puts the prefix before its script::

    launch = training_launch(resources.gpu, params_b, config_dir=workflow.basedir + "/accelerate")
    shell: f"{launch.shell_prefix} workflow/scripts/train.py ..."
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from execrl.resources import GPU_MEMORY_GB, GPU_GB_PER_B

# workflow/accelerate in a checkout (the package is installed editable from src/).
DEFAULT_CONFIG_DIR = Path(__file__).resolve().parents[2] / "workflow" / "accelerate"

CONFIG_FILES = {"ddp": "ddp.yaml", "zero3": "zero3.yaml"}


@dataclass(frozen=True)
class Launch:
    """The launcher of one training job."""

    strategy: str
    """``single`` (one process), ``ddp`` or ``zero3``."""
    num_processes: int
    config_file: Path | None
    prefix: tuple[str, ...]
    """The command up to the training script (or ``-m module``)."""

    @property
    def shell_prefix(self) -> str:
        return shlex.join(self.prefix)


def fits_one_gpu(params_b: float, gpu_memory_gb: float = GPU_MEMORY_GB) -> bool:
    """Whether LoRA training of a model this size fits in one GPU's memory."""
    return math.ceil(params_b * GPU_GB_PER_B["train"]) <= gpu_memory_gb


def training_launch(
    num_gpus: int,
    params_b: float,
    config_dir: str | Path | None = None,
    python: str = "python",
    accelerate: str = "accelerate",
) -> Launch:
    """The accelerate config and command prefix for a training job with ``num_gpus`` GPUs.

    0 or 1 GPU: one plain process. Several GPUs: DDP when the model fits one GPU, DeepSpeed
    ZeRO-3 when it does not. ``--main_process_port 0`` lets two jobs share a node.
    """
    if num_gpus < 0:
        raise ValueError(f"num_gpus must be non-negative, got {num_gpus}")
    if params_b < 0:
        raise ValueError(f"params_b must be non-negative, got {params_b}")
    if num_gpus <= 1:
        return Launch("single", 1, None, (python,))
    strategy = "ddp" if fits_one_gpu(params_b) else "zero3"
    config_file = Path(config_dir or DEFAULT_CONFIG_DIR) / CONFIG_FILES[strategy]
    if not config_file.is_file():
        raise FileNotFoundError(f"accelerate config {config_file} not found")
    prefix = (
        accelerate,
        "launch",
        "--config_file",
        str(config_file),
        "--num_processes",
        str(num_gpus),
        "--num_machines",
        "1",
        "--main_process_port",
        "0",
    )
    return Launch(strategy, num_gpus, config_file, prefix)
