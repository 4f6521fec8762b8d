"""Offline preference optimisation on execution-ranked pairs (TRL's DPOTrainer, LoRA or full weights),
with the interval evaluation of the online methods on held-out problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from execrl.evaluation.interval_eval import IntervalEvaluation
from execrl.training.lora import LoRASettings
from execrl.generation.policy_sampling import TransformersPolicySampler, generate_with_merged_adapter
from execrl.generation.sampling import SamplingSettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.training.trainer_config import dpo_config, peft_config
from execrl.training.common import (
    CheckpointedTotals,
    ExampleLog,
    MetricsFileCallback,
    finish_training,
    load_model,
    train_resuming,
)


@dataclass(frozen=True)
class DPOSettings:
    """DPO hyper-parameters; loss types are TRL's and may be combined with weights."""

    beta: float = 0.1
    loss_type: list[str] = field(default_factory=lambda: ["sigmoid"])
    loss_weights: list[float] | None = None
    learning_rate: float = 5e-5
    num_train_epochs: float = 1.0
    per_device_train_batch_size: int = 8
    """Pairs per training process and micro-step (TRL's meaning: N processes train on N times as many)."""
    gradient_accumulation_steps: int = 1
    max_length: int = 2048
    save_steps: int = 50
    """Checkpoint every this many optimiser steps (a killed job resumes from the last one)."""
    gradient_checkpointing: bool = True
    """Trade compute for memory (TRL's default); small models train faster without it."""
    eval_every: int = 25
    """Interval evaluation every this many optimiser steps, besides before the first and after the
    last (0: none), as GRPO's and SRRL's (`execrl.evaluation.interval_eval`)."""
    eval_problems: int = 64
    """Held-out problems in the interval evaluation."""
    eval_samples: int = 1
    """Samples per problem in the interval evaluation (its pass@1 averages them)."""
    eval_temperature: float = 0.2
    """Sampling temperature of the interval evaluation (0: greedy)."""
    eval_max_new_tokens: int = 1024
    """Longest completion the interval evaluation samples. DPO samples nothing else while it
    trains, so it has no completion length of its own to reuse (GRPO evaluates at its training one)."""
    seed: int = 0
    eval_sampling: dict = field(default_factory=dict)
    """The `generation` section's cuts that are set (`execrl.training_settings.interval_cuts`):
    the interval evaluation samples with them, as GRPO's and SRRL's does."""

    def interval_sampling(self, model_path: str | None = None) -> SamplingSettings:
        """What the interval evaluation samples with: the generation section's cuts (those of the
        model's generation config at `model_path`, where `use_model_generation_config` asks for them,
        as GRPO's rollouts take them) at `eval_temperature`."""
        sampling = SamplingSettings(**self.eval_sampling)
        if model_path is not None:
            sampling = sampling.for_model(model_path)
        return sampling.at_temperature(self.eval_temperature)


def train_dpo(
    model_path: str,
    pairs: list[dict],
    settings: DPOSettings,
    lora: LoRASettings | None,
    checkpoint_dir: str | Path,
    adapter_dir: str | Path,
    metrics_path: str | Path,
    eval_problems: list[Problem],
    prompt_config: PromptConfig,
    executor,
    wandb: dict | None = None,
    run_name: str | None = None,
    micro_batch: int | None = None,
    accumulation: int | None = None,
) -> None:
    """Train on (prompt, chosen, rejected) pairs, resuming from the newest checkpoint.
    `micro_batch` × `accumulation`: the memory plan's cut of each step (`execrl.training.trainer_config.trainer_batch`).

    With `lora`, `adapter_dir` receives a LoRA adapter; with `lora=None` all weights train and
    it receives the full model. Under `accelerate launch` each rank trains on its shard of every
    batch and logs the indices of its pairs; rank 0 writes the folder, metrics and checkpoints.
    Every `settings.eval_every` steps (and before the first and after the last) the policy as
    trained so far samples `eval_problems`, prompted by `prompt_config` as the pairs' base
    candidates were, and `executor` runs the samples (it may be None when `eval_every` is 0).
    """
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOTrainer

    if not pairs:
        raise ValueError("no preference pairs to train on (see the RL dataset manifest for why)")
    if settings.eval_every and not eval_problems:
        raise ValueError(f"dpo.eval_every is {settings.eval_every} but there are no held-out problems to evaluate on")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    checkpoint_dir = Path(checkpoint_dir)
    args = dpo_config(
        settings,
        checkpoint_dir=checkpoint_dir,
        wandb=wandb,
        run_name=run_name,
        micro_batch=micro_batch,
        accumulation=accumulation,
    )
    model = load_model(model_path, args, full_weight=lora is None)
    dataset = Dataset.from_list(
        [{"pair": index, **{k: p[k] for k in ("prompt", "chosen", "rejected")}} for index, p in enumerate(pairs)]
    )
    metrics_in_progress = checkpoint_dir / "metrics.jsonl"
    interval = IntervalEvaluation.of_policy(
        eval_problems,
        prompt_config,
        tokenizer,
        executor,
        lambda trainer: TransformersPolicySampler(
            trainer, settings.eval_max_new_tokens, settings.interval_sampling(model_path)
        ),
        every=settings.eval_every,
        samples=settings.eval_samples,
        temperature=settings.eval_temperature,
    )
    trainer = DPOTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config(lora),
        callbacks=[MetricsFileCallback(metrics_in_progress), interval],
    )
    trainer.add_callback(CheckpointedTotals(trainer))
    trainer.data_collator = ExampleLog(trainer.data_collator, "pair", drop=True)
    interval.trainer = trainer
    # Merging in place would write into ZeRO-3's gathered copies of sharded weights.
    if lora and settings.eval_every and not trainer.is_deepspeed_enabled:
        generate_with_merged_adapter(trainer.model)
    train_resuming(trainer, checkpoint_dir)
    finish_training(trainer, tokenizer, adapter_dir, metrics_in_progress, metrics_path)
