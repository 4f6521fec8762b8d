"""What every TRL-based training stage shares: device flags, logging targets, metrics files, resume."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from transformers import TrainerCallback


def device_kwargs() -> dict:
    """TrainingArguments that match the hardware: bf16 on capable GPUs, plain fp32 on CPU."""
    import torch

    if torch.cuda.is_available():
        return {"bf16": torch.cuda.is_bf16_supported(), "use_cpu": False}
    return {"bf16": False, "fp16": False, "use_cpu": True}


def report_to(wandb_mode: str) -> list[str]:
    """Weights & Biases only when asked for; `WANDB_MODE` carries online/offline to the library."""
    if wandb_mode == "disabled":
        return []
    os.environ["WANDB_MODE"] = wandb_mode
    return ["wandb"]


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest `checkpoint-N` folder that finished saving, for resuming after a kill."""
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return None
    return get_last_checkpoint(str(output_dir))


class MetricsFileCallback(TrainerCallback):
    """Append every logged step's metrics to a JSONL file the report reads."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._start = time.monotonic()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, "epoch": state.epoch, "elapsed_s": time.monotonic() - self._start}
        record.update({k: v for k, v in logs.items() if isinstance(v, (int, float, str))})
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
