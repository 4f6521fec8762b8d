"""Online RL with execution rewards: TRL's GRPOTrainer, and SRRL through its `rollout_func` hook."""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from execrl.lora import LoRASettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt, extract_code
from execrl.rewards import ExecutionRewards, RewardSettings
from execrl.srrl import SRRLRollout, SRRLSettings
from execrl.training import MetricsFileCallback, last_checkpoint, resumable_run_kwargs


@dataclass(frozen=True)
class GRPOSettings:
    """GRPO hyper-parameters (TRL's names); a step uses prompts_per_step × num_generations completions."""

    num_generations: int = 8
    prompts_per_step: int = 8
    max_steps: int = 200
    learning_rate: float = 1e-4
    beta: float = 0.0
    epsilon: float = 0.2
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 128
    gradient_accumulation_steps: int = 1
    num_iterations: int = 1
    save_steps: int = 50
    eval_every: int = 0
    """Interval evaluation every this many steps (0: none)."""
    eval_problems: int = 64
    """Held-out problems in the interval evaluation (one sample each: pass@1)."""
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    """`colocate` (vLLM inside the training process) or `server` (`trl vllm-serve` on other GPUs)."""
    gradient_checkpointing: bool = True
    """Trade compute for memory (TRL's default); small models train faster without it."""
    seed: int = 0


def generate_with_merged_adapter(model) -> None:
    """Make a PEFT model's `generate` run with its LoRA weights merged into the base layers.

    Unmerged, every adapted linear layer costs three matrix products per decoded token, which
    dominates sampling time for small models on CPU. Merging for the length of one `generate`
    call (PEFT's `merge_adapter`, as TRL does before syncing weights to vLLM) samples from the
    same policy at the cost of the base model; training still sees the unmerged adapter.
    """
    original = model.generate

    @functools.wraps(original)
    def generate(*args, **kwargs):
        model.merge_adapter()
        try:
            return original(*args, **kwargs)
        finally:
            model.unmerge_adapter()

    model.generate = generate


def uses_rotary_positions(config) -> bool:
    """Whether a model's attention sees positions only relative to each other (rotary embeddings)."""
    return getattr(config, "rope_parameters", None) is not None or getattr(config, "rope_theta", None) is not None


class LengthChunkedGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that scores a batch in chunks of rows with similar prompt lengths, each cut to its own width.

    TRL left-pads every prompt of a step to the longest one. SRRL's groups mix short first
    attempts with refinement prompts three times as long, so on one width about half the
    positions the loss computes would be padding. Cutting a chunk's shared left padding leaves
    each row's tokens, mask and relative positions (all that rotary attention sees) as they were,
    so the log-probabilities are the same. Models with absolute position embeddings (no rotary
    settings in their config) and multimodal inputs go to TRL unchanged.
    """

    score_chunks = 4

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs):
        score = super()._get_per_token_logps_and_entropies
        multimodal = any(v is not None for k, v in kwargs.items() if k not in ("compute_entropy", "compute_aux_loss"))
        if multimodal or not uses_rotary_positions(self.model.config):
            return score(model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs)
        prompt_lengths = attention_mask[:, : input_ids.size(1) - logits_to_keep].sum(dim=1)
        order = torch.argsort(prompt_lengths, stable=True)
        rows = -(-input_ids.size(0) // self.score_chunks)
        if batch_size:
            rows = min(rows, batch_size)
        logps, entropies, aux_losses = [], [], []
        for chunk in order.split(rows):
            start = input_ids.size(1) - logits_to_keep - int(prompt_lengths[chunk].max())
            chunk_logps, chunk_entropies, chunk_aux = score(
                model, input_ids[chunk, start:], attention_mask[chunk, start:], logits_to_keep, **kwargs
            )
            logps.append(chunk_logps)
            entropies.append(chunk_entropies)
            aux_losses.append(chunk_aux)
        restore = torch.argsort(order)
        return (
            torch.cat(logps)[restore],
            torch.cat(entropies)[restore] if entropies[0] is not None else None,
            torch.stack(aux_losses).mean() if aux_losses[0] is not None else None,
        )


class PolicySampler:
    """One sample per prompt text from the policy being trained (SRRL's rollouts)."""

    def __init__(self, trainer, settings: GRPOSettings):
        self.trainer = trainer
        self.settings = settings
        self.tokenizer = trainer.processing_class

    def __call__(self, prompt_texts: list[str]) -> list[tuple[list[int], list[int], str]]:
        prompt_ids = [self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in prompt_texts]
        completion_ids = []
        batch = 64
        for start in range(0, len(prompt_ids), batch):
            completion_ids.extend(self._generate(prompt_ids[start : start + batch]))
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return list(zip(prompt_ids, completion_ids, texts, strict=True))

    def _generate(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        if self.trainer.use_vllm:
            _, completion_ids, _, _ = self.trainer.vllm_generation.generate(
                prompts=prompt_ids, images=None, num_generations=1
            )
            return completion_ids
        from trl.models.utils import unwrap_model_for_generation

        from execrl.generation.transformers_backend import generate_token_ids

        with unwrap_model_for_generation(self.trainer.model_wrapped, self.trainer.accelerator) as model:
            return generate_token_ids(
                model,
                self.tokenizer,
                prompt_ids,
                self.settings.temperature,
                self.settings.top_p,
                self.settings.max_completion_length,
            )


class IntervalEvaluation(TrainerCallback):
    """pass@1 on a held-out slice every N steps, logged with the training metrics."""

    def __init__(self, problems: list[Problem], prompts: list[str], executor, settings: GRPOSettings, reasoning_format: bool):
        self.problems = problems
        self.prompts = prompts
        self.executor = executor
        self.settings = settings
        self.reasoning_format = reasoning_format
        self.trainer = None

    def on_step_end(self, args, state, control, **kwargs):
        every = self.settings.eval_every
        if not every or state.global_step % every or self.trainer is None:
            return
        samples = PolicySampler(self.trainer, self.settings)(self.prompts)
        results = self.executor.run_batch(
            [(p, extract_code(text, self.reasoning_format)) for p, (_, _, text) in zip(self.problems, samples, strict=True)]
        )
        self.trainer.log({"interval_eval/pass_at_1": sum(r.status == "pass" for r in results) / len(results)})


def train_grpo(
    model_path: str,
    problems: list[Problem],
    eval_problems: list[Problem],
    prompt_config: PromptConfig,
    settings: GRPOSettings,
    reward_settings: RewardSettings,
    lora: LoRASettings,
    executor,
    checkpoint_dir: str | Path,
    adapter_dir: str | Path,
    metrics_path: str | Path,
    srrl: SRRLSettings | None = None,
    wandb: dict | None = None,
    run_name: str | None = None,
) -> None:
    """Train a LoRA adapter with GRPO (or SRRL when `srrl` is given), resuming from the newest checkpoint."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path)
    prompts = [build_prompt(p, prompt_config, tokenizer) for p in problems]
    problems_by_prompt = dict(zip(prompts, problems, strict=True))
    dataset = Dataset.from_list([{"prompt": text, "problem_id": p.id} for text, p in zip(prompts, problems, strict=True)])

    rewards = ExecutionRewards({p.id: p for p in problems}, executor, reward_settings, prompt_config.reasoning_format)
    reward_funcs, reward_weights = rewards.reward_functions()
    checkpoint_dir = Path(checkpoint_dir)
    completions_per_step = settings.prompts_per_step * settings.num_generations
    args = GRPOConfig(
        num_generations=settings.num_generations,
        per_device_train_batch_size=completions_per_step,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        beta=settings.beta,
        epsilon=settings.epsilon,
        loss_type=settings.loss_type,
        scale_rewards=settings.scale_rewards,
        temperature=settings.temperature,
        top_p=settings.top_p,
        max_completion_length=settings.max_completion_length,
        num_iterations=settings.num_iterations,
        gradient_checkpointing=settings.gradient_checkpointing,
        reward_weights=reward_weights,
        use_vllm=settings.use_vllm,
        vllm_mode=settings.vllm_mode,
        **resumable_run_kwargs(checkpoint_dir, settings.save_steps, settings.seed, wandb, run_name),
    )
    metrics_in_progress = checkpoint_dir / "metrics.jsonl"
    interval = IntervalEvaluation(
        eval_problems,
        [build_prompt(p, prompt_config, tokenizer) for p in eval_problems],
        executor,
        settings,
        prompt_config.reasoning_format,
    )
    rollout = None
    if srrl is not None:
        rollout = SRRLRollout(
            problems_by_prompt, executor, srrl, prompt_config, lambda trainer: PolicySampler(trainer, settings)
        )
    trainer = LengthChunkedGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora.peft_config(),
        rollout_func=rollout,
        callbacks=[MetricsFileCallback(metrics_in_progress), interval],
    )
    interval.trainer = trainer
    if not settings.use_vllm:
        generate_with_merged_adapter(trainer.model)
    trainer.train(resume_from_checkpoint=last_checkpoint(checkpoint_dir))
    trainer.save_model(str(adapter_dir))
    tokenizer.save_pretrained(str(adapter_dir))
    shutil.copyfile(metrics_in_progress, metrics_path)
