"""Measure what one TRL training step allocates, term by term, to check execrl.planning.memory_plan against.

One micro-batch through the real trainer's loss and backward (`GRPOTrainer.compute_loss` of
execrl's LengthChunkedGRPOTrainer, `DPOTrainer.compute_loss`), both with TRL 1.16's fused,
chunked LM head, on a Qwen2 model of a given shape with random weights. The optimizer step is not
run: its state is the plan's `optimizer` term, counted from the parameters.

On the CPU, the peak comes from torch's profiler with `profile_memory=True`: every allocation and
free torch's CPU allocator makes is attributed to the operator that made it, so the running sum of
those events over time is the bytes of tensors alive (Python's tracemalloc does not see torch's
allocator, and the process's RSS also moves with the allocator's caching and the interpreter).
The step is cut into the plan's activation terms by the autograd nodes the profiler records:
  layer_inputs: what is alive when the backward starts (the checkpointed layer inputs, the
    head's saved hidden states and per-token statistics), above the level before the forward;
  lm_head: the peak inside the fused head's backward (ChunkedLogProbFunctionBackward) above the
    level at its start;
  recompute: the peak of the rest of the backward (a layer recomputed and back-propagated, one at
    a time) above the level where the last head backward ended, up to the embedding's backward;
  embedding_gradient: the peak inside the embedding's backward (EmbeddingBackward0, when its
    weight trains) above the level at its start.
On CUDA, torch.cuda.max_memory_allocated gives the whole step's peak only (step_peak).

This module imports torch and TRL: it is for the bench scripts, the tests and a preflight, never
for the DAG path (execrl.planning.memory_plan imports neither).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from execrl.planning.architecture import Architecture

HEAD_BACKWARD = "ChunkedLogProbFunctionBackward"
EMBEDDING_BACKWARD = "EmbeddingBackward"


@dataclasses.dataclass(frozen=True)
class StepShape:
    """One micro-batch of one trainer: its sequences and how the model trains."""

    trainer: str = "grpo"  # "grpo" or "dpo"
    micro_batch: int = 2  # GRPO: completions; DPO: pairs (2 sequences each)
    prompt_length: int = 64
    completion_length: int = 192
    lora: bool = True
    lora_rank: int = 8
    lora_dropout: float = 0.05
    gradient_checkpointing: bool = True
    # On the CPU: "float32", or "bfloat16" to count the casts and fp32 copies a 16-bit step makes
    # (on CUDA the step is always bf16 under autocast).
    cpu_dtype: str = "float32"


def planned_activation_bytes(arch: Architecture, shape: StepShape, on_cpu: bool = True) -> dict[str, int]:
    """The memory plan's activation terms for `shape` as execrl plans its jobs: GRPO scores the
    completion in GRPO_SCORE_CHUNKS chunks of rows, keeps LoRA's dropout (TRL's GRPO default
    disable_dropout false); DPO holds a micro-batch of m pairs as m sequences of twice the length
    and turns dropout off (TRL's DPO default). On the CPU, the shape's cpu_dtype and TRL's torch
    fallback of the head's kernel (every position scored); on CUDA, bf16 and the Triton kernel."""
    from execrl.planning.training_plan import GRPO_SCORE_CHUNKS

    length = shape.prompt_length + shape.completion_length
    grpo = shape.trainer == "grpo"
    return arch.activation_bytes(
        shape.micro_batch,
        length if grpo else 2 * length,
        dtype_bytes=(4 if shape.cpu_dtype == "float32" else 2) if on_cpu else 2,
        scored_length=shape.completion_length if grpo else None,
        row_chunks=GRPO_SCORE_CHUNKS if grpo else 1,
        gradient_checkpointing=shape.gradient_checkpointing,
        lora_dropout=grpo and shape.lora and shape.lora_dropout > 0,
        trains_head=not shape.lora,
        fused_kernel=not on_cpu,
    )


def qwen2_model(arch: Architecture, dtype=None, seed: int = 0):
    """A Qwen2 causal LM of `arch`'s shape with random weights (no download)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    shape = {f.name: getattr(arch, f.name) for f in dataclasses.fields(arch) if f.name != "parameter_count"}
    config = Qwen2Config(**shape, max_position_embeddings=32768, attn_implementation="sdpa")
    model = Qwen2ForCausalLM(config)
    return model.to(dtype) if dtype is not None else model


def _tokenizer(directory: Path):
    from execrl.models.tiny_model import train_tokenizer

    return train_tokenizer(["def add(a, b):\n    return a + b\n"] * 20, 300, directory)


def build_trainer(arch: Architecture, shape: StepShape, workdir: str | Path, use_cpu: bool = True):
    """The trainer execrl runs for `shape.trainer`, on a fresh model of `arch`'s shape."""
    from datasets import Dataset
    from peft import LoraConfig

    workdir = Path(workdir)
    import torch

    tokenizer = _tokenizer(workdir / "tokenizer")
    model = qwen2_model(arch, getattr(torch, shape.cpu_dtype) if use_cpu else torch.bfloat16)
    peft_config = (
        LoraConfig(r=shape.lora_rank, lora_alpha=2 * shape.lora_rank, lora_dropout=shape.lora_dropout,
                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                   task_type="CAUSAL_LM")
        if shape.lora else None
    )
    common = dict(
        output_dir=str(workdir / "out"),
        use_cpu=use_cpu,
        bf16=not use_cpu,
        per_device_train_batch_size=shape.micro_batch,
        gradient_checkpointing=shape.gradient_checkpointing,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
    )
    if shape.trainer == "grpo":
        from trl import GRPOConfig

        from execrl.training.grpo import LengthChunkedGRPOTrainer

        args = GRPOConfig(**common, num_generations=shape.micro_batch, max_completion_length=shape.completion_length,
                          beta=0.0)
        return LengthChunkedGRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **_: [0.0] * len(completions),
            args=args,
            train_dataset=Dataset.from_list([{"prompt": "def add(a, b):"}] * shape.micro_batch),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
    if shape.trainer == "dpo":
        from trl import DPOConfig, DPOTrainer

        args = DPOConfig(**common, max_length=shape.prompt_length + shape.completion_length)
        pair = {"prompt": "def add(a, b):", "chosen": " return a + b", "rejected": " return a - b"}
        # Full weights need the frozen reference TRL would otherwise load from the hub by name.
        reference = None if shape.lora else qwen2_model(arch, model.dtype)
        return DPOTrainer(model=model, ref_model=reference, args=args,
                          train_dataset=Dataset.from_list([pair] * shape.micro_batch),
                          processing_class=tokenizer, peft_config=peft_config)
    raise ValueError(f"trainer must be 'grpo' or 'dpo', not {shape.trainer!r}")


def enable_checkpointing(trainer) -> None:
    """Gradient checkpointing as transformers' Trainer turns it on when training starts."""
    if trainer.args.gradient_checkpointing:
        kwargs = dict(trainer.args.gradient_checkpointing_kwargs or {})
        every_n_layers = kwargs.pop("every_n_layers", 1)
        offload = kwargs.pop("offload", False)
        trainer.model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs=kwargs or None, every_n_layers=every_n_layers, offload=offload
        )


def step_inputs(trainer, arch: Architecture, shape: StepShape, seed: int = 0) -> dict:
    """One micro-batch as the trainer's compute_loss takes it, random tokens at the shape's lengths."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    device = trainer.accelerator.device
    rows = shape.micro_batch if shape.trainer == "grpo" else 2 * shape.micro_batch

    def tokens(length):
        return torch.randint(2, arch.vocab_size, (rows, length), generator=generator).to(device)

    prompt, completion = tokens(shape.prompt_length), tokens(shape.completion_length)
    ones = torch.ones_like
    if shape.trainer == "grpo":
        advantages = torch.randn(rows, generator=generator).to(device)
        return {"prompt_ids": prompt, "prompt_mask": ones(prompt), "completion_ids": completion,
                "completion_mask": ones(completion), "advantages": advantages,
                "num_items_in_batch": torch.tensor(float(completion.numel()), device=device)}
    input_ids = torch.cat([prompt, completion], dim=1)
    completion_mask = torch.cat([torch.zeros_like(prompt), ones(completion)], dim=1)
    return {"input_ids": input_ids, "attention_mask": ones(input_ids), "completion_mask": completion_mask}


def _timeline(prof) -> tuple[list[tuple[int, int]], list[tuple[str, int, int]]]:
    """Each allocation (+bytes) and free (-bytes) torch's allocator reported, in time order, and the
    autograd nodes the backward evaluated as (name, start, end), all in nanoseconds.

    The raw records, not `prof.events()`: those fold each free into the operator that encloses it,
    dated at that operator's start, which puts a temporary's free before its allocation."""
    records = prof.profiler.kineto_results.events()
    allocations = sorted((r.start_ns(), r.nbytes()) for r in records if r.name() == "[memory]" and r.nbytes())
    nodes = [
        (r.name(), r.start_ns(), r.start_ns() + r.duration_ns())
        for r in records
        if r.name().startswith("autograd::engine::evaluate_function")
    ]
    return allocations, nodes


def _level_and_peak(allocations, start, end) -> tuple[int, int]:
    """The level just before `start` and the peak level within [start, end]."""
    level = 0
    before = None
    peak = None
    for time, delta in allocations:
        if time >= start and before is None:
            before = level
            peak = level
        level += delta
        if before is not None and time <= end:
            peak = max(peak, level)
        if time > end:
            break
    if before is None:
        before = peak = level
    return before, peak


def prepared_step(arch: Architecture, shape: StepShape, workdir: str | Path, use_cpu: bool):
    """The trainer, its model and one micro-batch's inputs, after one loss and backward: gradients
    exist (the optimizer's first step creates them; backward then accumulates) and lazily created
    state (autocast caches, PEFT wrappers) is made, so the measured step counts neither."""
    import torch

    trainer = build_trainer(arch, shape, workdir, use_cpu=use_cpu)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() for each step
    enable_checkpointing(trainer)
    model = trainer.model
    model.train()
    inputs = step_inputs(trainer, arch, shape)
    for parameter in model.parameters():
        if parameter.requires_grad:
            parameter.grad = torch.zeros_like(parameter)
    trainer.compute_loss(model, inputs).backward()
    return trainer, model, inputs


def measure_cpu_step(arch: Architecture, shape: StepShape, workdir: str | Path) -> dict[str, int]:
    """Bytes per activation term of one micro-batch's loss and backward on the CPU (see the module)."""
    from torch.profiler import ProfilerActivity, profile

    trainer, model, inputs = prepared_step(arch, shape, workdir, use_cpu=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        trainer.compute_loss(model, inputs).backward()
    allocations, nodes = _timeline(prof)
    if not nodes:
        raise RuntimeError("the profiler recorded no autograd node: cannot split the step into terms")
    backward_start = min(start for _, start, _ in nodes)
    level = 0
    step_peak = 0
    for _, delta in allocations:
        level += delta
        step_peak = max(step_peak, level)
    layer_inputs, _ = _level_and_peak(allocations, backward_start, backward_start)
    heads = [(start, end) for name, start, end in nodes if HEAD_BACKWARD in name]
    if not heads:
        raise RuntimeError(f"no {HEAD_BACKWARD} in the backward: TRL's fused LM head did not run")
    lm_head = 0
    for start, end in heads:
        before, peak = _level_and_peak(allocations, start, end)
        lm_head = max(lm_head, peak - before)
    head_end = max(end for _, end in heads)
    # The embedding's weight gradient (all weights training) comes last: measured on its own.
    embeddings = [(start, end) for name, start, end in nodes if EMBEDDING_BACKWARD in name and start > head_end]
    embedding_gradient = 0
    for start, end in embeddings:
        before, peak = _level_and_peak(allocations, start, end)
        embedding_gradient = max(embedding_gradient, peak - before)
    layers_end = min((start for start, _ in embeddings), default=float("inf"))
    after_head, peak_after = _level_and_peak(allocations, head_end, layers_end)
    return {
        "layer_inputs": layer_inputs,
        "lm_head": lm_head,
        "recompute": peak_after - after_head,
        "embedding_gradient": embedding_gradient,
        "step_peak": step_peak,
    }


def measure_cuda_step(arch: Architecture, shape: StepShape, workdir: str | Path) -> dict[str, int]:
    """Peak bytes above the weights, gradients and inputs of one micro-batch's loss and backward on
    the current CUDA device (torch.cuda.max_memory_allocated), bf16, through the same trainer."""
    import torch

    trainer, model, inputs = prepared_step(arch, shape, workdir, use_cpu=False)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    trainer.compute_loss(model, inputs).backward()
    torch.cuda.synchronize()
    return {"step_peak": torch.cuda.max_memory_allocated() - before}
