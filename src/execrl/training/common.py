"""What every TRL-based training stage shares: device flags, logging targets, metrics files, resume,
and the process layout under `accelerate launch`."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState


def world_size() -> int:
    """Training processes of this job: `accelerate launch` (torchrun) sets WORLD_SIZE in each."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def process_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def device_kwargs() -> dict:
    """TrainingArguments that match the hardware: on a GPU the dtype `accelerate launch
    --mixed_precision` was given (the workflow's, from the memory plan's `gpu_model`: fp16 on T4
    and V100, bf16 on later GPUs), else bf16 where the GPU has it; plain fp32 on CPU."""
    import torch

    if torch.cuda.is_available():
        chosen = os.environ.get("ACCELERATE_MIXED_PRECISION")
        if chosen in ("bf16", "fp16", "no"):
            return {"bf16": chosen == "bf16", "fp16": chosen == "fp16", "use_cpu": False}
        return {"bf16": torch.cuda.is_bf16_supported(including_emulation=False), "use_cpu": False}
    return {"bf16": False, "fp16": False, "use_cpu": True}


def report_to(wandb: dict | None) -> list[str]:
    """Weights & Biases only when the config's mode asks for it (`online` or `offline`)."""
    if not wandb or wandb.get("mode", "disabled") == "disabled":
        return []
    os.environ["WANDB_MODE"] = wandb["mode"]
    os.environ.setdefault("WANDB_PROJECT", wandb.get("project", "execrl"))
    return ["wandb"]


def resumable_run_kwargs(checkpoint_dir, save_steps: int, seed: int, wandb: dict | None, run_name: str | None) -> dict:
    """TrainingArguments shared by the RL trainers: per-step logs, regular checkpoints, the hardware's flags."""
    return {
        "output_dir": str(checkpoint_dir),
        "seed": seed,
        "data_seed": seed,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": save_steps,
        "save_total_limit": 2,
        "report_to": report_to(wandb),
        "run_name": run_name,
        "dataloader_num_workers": 0,
        **device_kwargs(),
    }


def load_model(model_path: str, args, full_weight: bool):
    """The causal LM to train, loaded after `args` (a TRL config) exists.

    After: under ZeRO-3 the config makes `from_pretrained` load each rank's shard only. LoRA and
    DeepSpeed keep the checkpoint's dtype (bf16 for current models: DeepSpeed holds fp32 master
    weights itself); all weights trained without DeepSpeed load in fp32, since Adam's small
    updates to bf16 weights would round away.
    """
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if full_weight and args.deepspeed_plugin is None else "auto"
    return AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest `checkpoint-N` folder that finished saving, for resuming after a kill."""
    output_dir = Path(output_dir)
    # A job killed while saving leaves a checkpoint without trainer_state.json (written last): skip it.
    complete = [
        (int(match.group(1)), path)
        for path in (output_dir.glob("checkpoint-*") if output_dir.is_dir() else [])
        if (match := re.fullmatch(r"checkpoint-(\d+)", path.name)) and (path / "trainer_state.json").is_file()
    ]
    checkpoint = str(max(complete)[1]) if complete else None
    print(f"resuming from {checkpoint}" if checkpoint else f"no checkpoint in {output_dir}: starting at step 0", file=sys.stderr)
    return checkpoint


def train_resuming(trainer, checkpoint_dir: str | Path) -> None:
    """`trainer.train()` from the newest complete checkpoint in `checkpoint_dir`, if any.

    transformers before 5.18 loads the optimizer state of a run of several CPU processes onto
    `cpu:N`, which `torch.load` cannot restore; those releases get it loaded onto `cpu`, as 5.18
    and later do themselves.
    """
    import torch
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version("5.18") and trainer.args.device.type == "cpu":
        load_state = trainer._load_optimizer_and_scheduler

        def load_on_cpu(checkpoint):
            load = torch.load

            def load_to_cpu(*args, **kwargs):
                location = kwargs.get("map_location")
                if isinstance(location, torch.device) and location.type == "cpu":
                    kwargs["map_location"] = "cpu"
                return load(*args, **kwargs)

            torch.load = load_to_cpu
            try:
                return load_state(checkpoint)
            finally:
                torch.load = load

        trainer._load_optimizer_and_scheduler = load_on_cpu
    trainer.train(resume_from_checkpoint=last_checkpoint(checkpoint_dir))


def settings_digest(settings: dict) -> str:
    """A short, stable name for a set of training settings (keys checkpoints to them)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def finish_training(trainer, tokenizer, output_dir, metrics_in_progress: Path, metrics_path) -> None:
    """Write the trained folder (adapter or full model, plus tokenizer) and the metrics file, once.

    `save_model` runs on every rank because under ZeRO-3 it gathers the sharded weights, a
    collective; it writes on rank 0 only. The tokenizer and the metrics copy are rank 0's alone.
    """
    trainer.save_model(str(output_dir))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(output_dir))
        Path(metrics_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(metrics_in_progress, metrics_path)
    trainer.accelerator.wait_for_everyone()


class ExampleLog:
    """Wraps a data collator so each rank logs the ids of the examples its data loader loads.

    Under `accelerate launch` every rank's data loader yields its own shard of each batch; the
    line `rank R/N loads ID ...` in the job's log shows which. (The loader reads one batch ahead,
    so the last line of a run may name examples no step used.) With `drop` the id column is
    removed before collating.
    """

    def __init__(self, collate, key: str, drop: bool):
        self.collate = collate
        self.key = key
        self.drop = drop

    def __call__(self, rows: list[dict]):
        ids = list(dict.fromkeys(str(row[self.key]) for row in rows))
        # One write per line, so lines of processes sharing the log do not interleave.
        sys.stderr.write(f"rank {process_rank()}/{world_size()} loads {' '.join(ids)}\n")
        sys.stderr.flush()
        if self.drop:
            rows = [{k: v for k, v in row.items() if k != self.key} for row in rows]
        return self.collate(rows)


class MetricsFileCallback(TrainerCallback):
    """Append every logged step's metrics to a JSONL file the report reads.

    On a resumed run, records past the checkpoint's step are dropped first, so the file
    describes one consistent training run.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._start = time.monotonic()
        self._next_record: dict = {}

    def add_to_next_record(self, fields: dict) -> None:
        """Fields of the next logged record that are not metrics (JSON objects, kept out of W&B)."""
        self._next_record.update(fields)

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.path.exists() or not state.is_world_process_zero:
            return
        kept = [
            line
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= state.global_step
        ]
        self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def on_log(self, args, state, control, logs=None, **kwargs):
        extra, self._next_record = self._next_record, {}
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, "epoch": state.epoch, "elapsed_s": time.monotonic() - self._start}
        record.update({k: v for k, v in logs.items() if isinstance(v, (int, float, str))})
        record.update(extra)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


class GeneratedTokenCount(TrainerCallback, ExportableState):
    """The running count of completion tokens sampled for training, summed over processes
    (`num_generated_tokens`; `execrl.training.grpo.CountingGRPOTrainer` adds each generation round's).

    It counts a completion's tokens as TRL counts them for `completions/mean_length` (the tokens
    the policy generated), so TRL's `num_tokens` less this count is the prompt tokens. The count is
    saved in each checkpoint's trainer state and read back on resume.
    """

    def __init__(self):
        self.count = 0

    def state(self) -> dict:
        return {"args": {}, "attributes": {"count": self.count}}

    def on_train_begin(self, args, state, control, **kwargs):
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if isinstance(saved, dict):
            self.count = int(saved.get("attributes", {}).get("count", 0))


class CheckpointedTotals(TrainerCallback, ExportableState):
    """Running totals a trainer keeps in attributes of its own instead of its `TrainerState`, saved in
    each checkpoint's trainer state and set back on resume, so that a resumed run logs what the run
    never interrupted logs:

    - `_total_loss_scalar` (transformers' Trainer): the sum of the logged steps' losses, whose mean
      over all steps is the final `train_loss`; a resumed run would otherwise divide only its own
      steps' losses by every step.
    - `_total_train_tokens` (TRL's DPOTrainer): the `num_tokens` it logs, which would otherwise
      start again from 0.

    Values go through the checkpoint's JSON, which holds a float to the last bit.
    """

    ATTRIBUTES = ("_total_loss_scalar", "_total_train_tokens")

    def __init__(self, trainer):
        self.trainer = trainer

    def state(self) -> dict:
        totals = {name: getattr(self.trainer, name) for name in self.ATTRIBUTES if hasattr(self.trainer, name)}
        return {"args": {}, "attributes": totals}

    def on_train_begin(self, args, state, control, **kwargs):
        # The Trainer zeroes its loss total just before this call: set it back to the checkpoint's.
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if isinstance(saved, dict):
            for name, value in saved.get("attributes", {}).items():
                setattr(self.trainer, name, value)


def at_round_boundary(args, step: int) -> bool:
    """Whether optimizer step `step` ends where a generation round ends (no round half trained)."""
    micro_batches = step * args.gradient_accumulation_steps
    return micro_batches % (args.steps_per_generation * getattr(args, "num_iterations", 1)) == 0


class StopAtTokenBudget(TrainerCallback):
    """Stops training at the first generation-round boundary at or after which the budget's tokens
    have been used.

    A round's completions are all sampled (and counted) before its first optimizer step, so the
    count reaches the budget in the middle of the round that crosses it; training goes on to the
    end of that round (`steps_per_generation` × `num_iterations` / `gradient_accumulation_steps`
    optimizer steps) and stops there. The run overshoots its budget by less than one round's tokens
    and never trains on part of a round. `generated_tokens` reads `counter` (a
    `GeneratedTokenCount`), `total_tokens` TRL's `state.num_input_tokens_seen`; both are summed
    over processes, so every process stops at the same step, and both come back from a checkpoint.
    Should `max_steps` come first, training ends there short of the budget, and the job's log says so.
    """

    def __init__(self, budget, counter: GeneratedTokenCount | None = None):
        from execrl.training.token_budget import TokenBudget

        if not isinstance(budget, TokenBudget):
            raise TypeError(f"StopAtTokenBudget takes an execrl.training.token_budget.TokenBudget, got {budget!r}")
        if budget.budget == "generated_tokens" and counter is None:
            raise ValueError("a generated_tokens budget needs the trainer's GeneratedTokenCount")
        self.budget = budget
        self.counter = counter

    def used(self, state) -> int:
        return self.counter.count if self.budget.budget == "generated_tokens" else state.num_input_tokens_seen

    def on_step_end(self, args, state, control, **kwargs):
        used = self.used(state)
        if used >= self.budget.tokens and at_round_boundary(args, state.global_step):
            control.should_training_stop = True
            if state.is_world_process_zero:
                print(
                    f"{self.budget.budget} budget reached at step {state.global_step} (a generation round's end): "
                    f"{used:,} of {self.budget.tokens:,} tokens; training stops",
                    file=sys.stderr,
                    flush=True,
                )

    def on_train_end(self, args, state, control, **kwargs):
        used = self.used(state)
        if used < self.budget.tokens and state.is_world_process_zero:
            print(
                f"{self.budget.budget} budget not reached: max_steps ({state.max_steps}) came first, at {used:,} "
                f"of {self.budget.tokens:,} tokens",
                file=sys.stderr,
                flush=True,
            )
