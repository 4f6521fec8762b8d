"""The TRL configs a training job runs with, built once for training and for display.

`grpo_config` and `dpo_config` build TRL's `GRPOConfig` / `DPOConfig` from execrl's settings, and
`peft_config` the LoRA config (None: all weights train); `execrl.training.grpo.train_grpo` and
`execrl.training.dpo.train_dpo` train with exactly these, and `python -m execrl.training.train_job ...
--print-trainer-config` prints them (`describe`) without loading a model. Importing this module
imports no trainer: TRL's configs load when a function is called.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ACCELERATE_ENV = {
    "deepspeed": "ACCELERATE_USE_DEEPSPEED",
    "zero_stage": "ACCELERATE_DEEPSPEED_ZERO_STAGE",
    "mixed_precision": "ACCELERATE_MIXED_PRECISION",
    "offload_optimizer_device": "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE",
}


def grpo_config(
    settings,
    *,
    processes: int,
    reward_weights: list[float],
    checkpoint_dir: str | Path,
    wandb: dict | None = None,
    run_name: str | None = None,
    micro_batch: int | None = None,
    accumulation: int | None = None,
):
    """TRL's GRPOConfig for `settings` (`execrl.training.grpo.GRPOSettings`) on `processes` training
    processes, with the memory plan's `micro_batch` × `accumulation` when given."""
    from trl import GRPOConfig

    from execrl.training.common import resumable_run_kwargs

    config = GRPOConfig(
        **settings.trl_args(processes, micro_batch, accumulation),
        reward_weights=list(reward_weights),
        **settings.vllm_args(processes),
        **resumable_run_kwargs(Path(checkpoint_dir), settings.save_steps, settings.seed, wandb, run_name),
    )
    if config.world_size != processes:
        # GRPOConfig sizes the generation round by the processes of the process building it (1
        # outside a launcher, as when a job's config is printed on a login node): the round the
        # job samples on its `processes` processes.
        config.generation_batch_size = config.per_device_train_batch_size * processes * config.steps_per_generation
    return config


def dpo_config(
    settings,
    *,
    checkpoint_dir: str | Path,
    wandb: dict | None = None,
    run_name: str | None = None,
    micro_batch: int | None = None,
    accumulation: int | None = None,
):
    """TRL's DPOConfig for `settings` (`execrl.training.dpo.DPOSettings`)."""
    from trl import DPOConfig

    from execrl.training.common import resumable_run_kwargs

    return DPOConfig(
        beta=settings.beta,
        loss_type=list(settings.loss_type),
        loss_weights=list(settings.loss_weights) if settings.loss_weights else None,
        learning_rate=settings.learning_rate,
        num_train_epochs=settings.num_train_epochs,
        **trainer_batch(settings, micro_batch, accumulation),
        max_length=settings.max_length,
        gradient_checkpointing=settings.gradient_checkpointing,
        # Keeps the `pair` index column up to the collator, which logs it and drops it.
        remove_unused_columns=False,
        **resumable_run_kwargs(Path(checkpoint_dir), settings.save_steps, settings.seed, wandb, run_name),
    )


def trainer_batch(settings, micro_batch: int | None = None, accumulation: int | None = None) -> dict:
    """DPOConfig's per-device batch and accumulation of `settings` (`execrl.training.dpo.DPOSettings`);
    with the memory plan's `micro_batch` × `accumulation` (execrl.planning.memory_plan), each of the
    settings' micro-batches is cut into pieces of `micro_batch` pairs, and the optimizer step keeps its pairs."""
    batch, steps = settings.per_device_train_batch_size, settings.gradient_accumulation_steps
    if micro_batch is None:
        return {"per_device_train_batch_size": batch, "gradient_accumulation_steps": steps}
    pieces, rest = divmod(batch, micro_batch)
    if rest or accumulation != steps * pieces:
        raise ValueError(
            f"the memory plan's micro-batch {micro_batch} x accumulation {accumulation} does not cut "
            f"dpo.per_device_train_batch_size ({batch}) x dpo.gradient_accumulation_steps ({steps})"
        )
    return {"per_device_train_batch_size": micro_batch, "gradient_accumulation_steps": accumulation}


def peft_config(lora):
    """PEFT's LoraConfig for `lora` (`execrl.training.lora.LoRASettings`); None trains all weights."""
    return lora.peft_config() if lora is not None else None


def reward_weights(method: str, settings: dict) -> list[float]:
    """The reward weights GRPOConfig gets: one per active component of `rewards` for the methods
    rewarded by the problems' tests (grpo, srrl), one function of weight 1 for a task's own reward
    (exec, code_game, spiral: their `reward_functions`)."""
    if method in ("exec", "code_game", "spiral"):
        return [1.0]
    return list(settings["rewards"].weights().values())


def launch_layout(config, processes: int, accelerate_config: str | Path | None = None) -> dict[str, Any]:
    """Processes, micro-batch × accumulation, ZeRO stage, dtype and vLLM mode of a job with TRL
    config `config`: ZeRO and dtype from `accelerate launch`'s environment, or else from
    `accelerate_config` (the file the train rule passes as `--config_file`)."""
    launcher = {key: os.environ[name] for key, name in ACCELERATE_ENV.items() if name in os.environ}
    if launcher:
        source = "accelerate launch environment"
        deepspeed = launcher.get("deepspeed", "false").lower() == "true"
        zero_stage = int(launcher["zero_stage"]) if deepspeed and "zero_stage" in launcher else None
        mixed_precision = launcher.get("mixed_precision")
        offload = launcher.get("offload_optimizer_device") if deepspeed else None
    elif accelerate_config is not None:
        import yaml

        source = str(accelerate_config)
        accelerate = yaml.safe_load(Path(accelerate_config).read_text()) or {}
        deepspeed = accelerate.get("distributed_type") == "DEEPSPEED"
        zero_stage = (accelerate.get("deepspeed_config") or {}).get("zero_stage") if deepspeed else None
        mixed_precision = accelerate.get("mixed_precision")
        offload = (accelerate.get("deepspeed_config") or {}).get("offload_optimizer_device") if deepspeed else None
    else:
        source, zero_stage, mixed_precision, offload = "none (no launcher, no --accelerate-config)", None, None, None
    micro, accumulation = config.per_device_train_batch_size, config.gradient_accumulation_steps
    layout: dict[str, Any] = {
        "processes": processes,
        "micro_batch": micro,
        "accumulation": accumulation,
        "per_update": micro * accumulation * processes,
        "zero_stage": zero_stage,
        "offload_optimizer_device": offload,
        "mixed_precision": mixed_precision,
        "launcher_source": source,
        "device_flags": {"bf16": config.bf16, "fp16": config.fp16, "use_cpu": config.use_cpu},
        "device_flags_note": "bf16/fp16/use_cpu as on the machine that printed this (a GPU job takes the dtype of its launcher)",
    }
    if hasattr(config, "num_generations"):  # GRPO
        layout.update(
            num_generations=config.num_generations,
            generation_batch_size=config.generation_batch_size,
            steps_per_generation=config.steps_per_generation,
            updates_per_generation=config.steps_per_generation // accumulation,
            vllm_mode=config.vllm_mode if config.use_vllm else None,
        )
    return layout


def jsonable(value):
    """`value` as JSON holds it: sets sorted, enums and other objects as their text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(jsonable(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return getattr(value, "value", None) if isinstance(getattr(value, "value", None), str) else str(value)


def describe(method: str, config, peft, layout: dict) -> dict[str, Any]:
    """What `--print-trainer-config` prints: every field of the TRL config (defaults included),
    the PEFT config (None: full weights) and the launch layout."""
    from dataclasses import fields

    trainer = {f.name: jsonable(getattr(config, f.name)) for f in fields(config)}
    return {
        "method": method,
        "trainer_config_class": type(config).__name__,
        "trainer_config": trainer,
        "peft": None if peft is None else {"class": type(peft).__name__, **jsonable(peft.to_dict())},
        "finetuning": "full" if peft is None else "lora",
        "launch": layout,
    }


def dumps(description: dict) -> str:
    return json.dumps(description, indent=2, sort_keys=True, allow_nan=True)
