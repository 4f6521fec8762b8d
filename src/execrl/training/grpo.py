"""Online RL with execution rewards: TRL's GRPOTrainer, and SRRL through its `rollout_func` hook."""

from __future__ import annotations

from pathlib import Path

import torch
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from execrl.generation.weight_sync import trl_vllm_generation
# GRPO's settings are read when the DAG is planned, without TRL: they live in execrl.training.grpo_settings.
from execrl.training.grpo_settings import VLLM_MODES, GRPOSettings  # noqa: F401
from execrl.evaluation.interval_eval import IntervalEvaluation
from execrl.training.lora import LoRASettings
from execrl.generation.policy_sampling import TransformersPolicySampler, generate_with_merged_adapter
from execrl.training.online_task import OnlineTask
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.training.rewards import ExecutionRewards, RewardSettings
from execrl.training.srrl import SRRLRollout, SRRLSettings, grouping_trainer_class
from execrl.training.token_budget import GENERATED_TOKENS, TokenBudget
from execrl.training.trainer_config import grpo_config, peft_config
from execrl.training.common import (
    CheckpointedTotals,
    ExampleLog,
    GeneratedTokenCount,
    MetricsFileCallback,
    StopAtTokenBudget,
    finish_training,
    load_model,
    train_resuming,
    world_size,
)
from execrl.watch.monitor import BY_PROBLEM, RewardHackingWatch, WatchSettings, is_count, pooled_rates, split_per_problem


def uses_rotary_positions(config) -> bool:
    """Whether a model's attention sees positions only relative to each other (rotary embeddings)."""
    return getattr(config, "rope_parameters", None) is not None or getattr(config, "rope_theta", None) is not None


class EpochRepeatSampler(RepeatSampler):
    """TRL's RepeatSampler whose order in epoch e is its (e + 1)-th permutation from the seed, whatever
    epoch it starts in.

    TRL's sampler draws each epoch's permutation from one generator seeded once, so its order depends
    on how many epochs this process has walked: a run resumed past its first epoch would walk the
    first epoch's order again. The Trainer calls `set_epoch` before each epoch; this one seeds the
    generator afresh and draws the earlier epochs' permutations, so an uninterrupted run walks TRL's
    order unchanged and a resumed run walks the same.
    """

    def set_epoch(self, epoch: int) -> None:
        if not self.shuffle or self.seed is None:
            return
        self.generator.manual_seed(self.seed)
        for _ in range(epoch):
            torch.randperm(self.num_samples, generator=self.generator)


class CountingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that logs counts summed over processes: the completion tokens it has sampled
    for training (`num_generated_tokens`, cumulative) and the counts reward functions log (per step).

    - Every generation round adds its completions' lengths, gathered from all processes as TRL
      gathers them for `completions/mean_length` (model-generated tokens only), to
      `generated_tokens` (an `execrl.training.common.GeneratedTokenCount`, which a checkpoint keeps).
    - TRL averages what a reward function logs through `log_metric` over processes. Counts
      (`execrl.watch.monitor.is_count`) are summed over processes instead, and over the rounds
      between two logs, so a step's record holds the step's totals; the watch's rates are
      recomputed from the summed counts (`pooled_rates`). Per-problem counts are summed the same
      way and go to the metrics file's next record as one object (`log`).

    A run resumed from a checkpoint walks the prompts in the order of the run never interrupted
    (`EpochRepeatSampler`) and logs the same running totals (`CheckpointedTotals`).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generated_tokens = GeneratedTokenCount()
        self.add_callback(self.generated_tokens)
        self.add_callback(CheckpointedTotals(self))
        self._pending_counts: dict[str, float] = {}
        self._problem_counts: dict[str, dict[str, float]] = {}

    def _tokenize_prompts(self, prompts: list):
        """Text prompts tokenized as every other path of execrl tokenizes them (SRRL's rollouts,
        the interval evaluation, candidates, TRL's DPO): the chat template's text already holds the
        model's special tokens, so none are added. TRL's default adds them, and a tokenizer that
        prepends a BOS (Llama, Gemma, Mistral) would train GRPO on two where the evaluation sees one.
        Conversational and multimodal prompts go to TRL unchanged."""
        if prompts and isinstance(prompts[0], str):
            return self.processing_class(text=prompts, add_special_tokens=False)["input_ids"], None, {}
        return super()._tokenize_prompts(prompts)

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        self.epoch_sampler = EpochRepeatSampler(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )
        return self.epoch_sampler

    def _run_epoch(self, model, epoch, *args, **kwargs):
        # The Trainer's own `set_epoch` goes through accelerate, which misses a sampler three wrappers
        # down: a run of several processes resumed mid-epoch (skipped batches, over each process's shard).
        self.epoch_sampler.set_epoch(epoch)
        return super()._run_epoch(model, epoch, *args, **kwargs)

    def _log_metric(self, name: str, value: float):
        if is_count(name):
            self._pending_counts[name] = self._pending_counts.get(name, 0.0) + value
        else:
            super()._log_metric(name, value)

    def _generate(self, prompts: list):
        output = super()._generate(prompts)
        if self.model.training:
            completion_ids, tool_mask = output[1], output[2]
            lengths = [sum(mask) for mask in tool_mask] if tool_mask is not None else [len(ids) for ids in completion_ids]
            local = torch.tensor(sum(lengths), dtype=torch.long, device=self.accelerator.device)
            self.generated_tokens.count += int(self.accelerator.gather(local).sum().item())
            self._metrics["train"][GENERATED_TOKENS] = [self.generated_tokens.count]
        return output

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self._flush_counts()
        return output

    def log(self, logs: dict, *args, **kwargs) -> None:
        """TRL's log, with the step's per-problem counts (`execrl.watch.monitor.BY_PROBLEM`) handed
        to the metrics file's next record: one object there, not one metric per problem in W&B."""
        if self._problem_counts:
            for callback in self.callback_handler.callbacks:
                if isinstance(callback, MetricsFileCallback):
                    callback.add_to_next_record({BY_PROBLEM: self._problem_counts})
            self._problem_counts = {}
        super().log(logs, *args, **kwargs)

    def _flush_counts(self) -> None:
        """Sum the round's counts over processes into this step's metrics (every process calls it once a round)."""
        from accelerate.utils import gather_object

        names = sorted(set(gather_object(list(self._pending_counts))))
        if not names:
            return
        local = torch.tensor([self._pending_counts.get(name, 0.0) for name in names], dtype=torch.float64,
                             device=self.accelerator.device)
        totals = self.accelerator.gather(local).view(-1, len(names)).sum(dim=0).tolist()
        self._pending_counts.clear()
        metrics = self._metrics["train"]
        for name, total in zip(names, totals, strict=True):
            if (split := split_per_problem(name)) is not None:
                by_problem = self._problem_counts.setdefault(split[0], {})
                by_problem[split[1]] = by_problem.get(split[1], 0.0) + total
            else:
                metrics[name] = [sum(metrics.get(name, [])) + total]
        for name, rate in pooled_rates({name: values[0] for name, values in metrics.items() if is_count(name)}).items():
            metrics[name] = [rate]


class LengthChunkedGRPOTrainer(CountingGRPOTrainer):
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


class PolicySampler(TransformersPolicySampler):
    """One sample per prompt text from the policy being trained (SRRL's rollouts, interval evaluation),
    at GRPO's completion length: through the trainer's vLLM when it samples with vLLM, else as
    `TransformersPolicySampler` does.

    With vLLM, `logprobs` holds the sampled tokens' log-probabilities as vLLM computed them (TRL's
    own vLLM path keeps the same top-1 entries), which TRL's importance-sampling correction compares
    with the trainer's. Under vLLM's server mode sampling is a collective over the training
    processes: every process must call with as many prompts.
    """

    def __init__(self, trainer, settings: GRPOSettings):
        super().__init__(trainer, settings.max_completion_length, settings.sampling)

    def _generate(self, prompt_ids: list[list[int]], temperature: float) -> tuple[list[list[int]], list]:
        trainer = self.trainer
        if not trainer.use_vllm:
            return super()._generate(prompt_ids, temperature)
        # TRL pushes the weights to vLLM before its own sampling only; an evaluation after a
        # step must not sample from the previous step's weights. (A no-op inside rollouts.)
        if trainer.state.global_step != trainer._last_loaded_step:
            trainer.vllm_generation.sync_weights()
            trainer._last_loaded_step = trainer.state.global_step
        vllm, training_temperature = trainer.vllm_generation, trainer.vllm_generation.temperature
        vllm.temperature = temperature
        try:
            _, completion_ids, logprobs, _ = vllm.generate(prompts=prompt_ids, images=None, num_generations=1)
        finally:
            vllm.temperature = training_temperature
        if logprobs is None:
            return completion_ids, [None] * len(completion_ids)
        return completion_ids, [[token[0] for token in sequence] for sequence in logprobs]


def train_grpo(
    model_path: str,
    problems: list[Problem],
    eval_problems: list[Problem],
    prompt_config: PromptConfig,
    settings: GRPOSettings,
    reward_settings: RewardSettings,
    lora: LoRASettings | None,
    executor,
    checkpoint_dir: str | Path,
    adapter_dir: str | Path,
    metrics_path: str | Path,
    srrl: SRRLSettings | None = None,
    watch: WatchSettings | None = None,
    wandb: dict | None = None,
    run_name: str | None = None,
    task: OnlineTask | None = None,
    token_budget: TokenBudget | None = None,
    micro_batch: int | None = None,
    accumulation: int | None = None,
) -> None:
    """Train with GRPO (or SRRL when `srrl` is given), resuming from the newest checkpoint; with
    `token_budget`, stop at the first generation round's end at which that many tokens of its kind
    have been used (SRRL's `srrl.budget: generated_tokens` or `total_tokens`).
    `micro_batch` × `accumulation`: the memory plan's cut of each step (`GRPOSettings.micro_batches`).

    The reward is the problems' tests (`reward_settings`) unless `task` gives another
    (an `execrl.training.online_task.OnlineTask`: its prompts, reward, rollout, callbacks and trainer), as
    `exec`, `code_game` and `spiral` do. With `watch` (and the problems' tests as the reward), every
    step also logs the reward-hacking watch's rates (`execrl.watch.monitor`).

    With `lora`, `adapter_dir` receives a LoRA adapter; with `lora=None` all weights train and it
    receives the full model. Under `accelerate launch` each process samples its own prompts of every
    step (and logs their problem ids), rewards them with `executor` (each process has its own) and
    rank 0 writes the folder, metrics and checkpoints.
    """
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if task is None:
        monitor = None
        if watch is not None and watch.enabled:
            monitor = RewardHackingWatch(executor, watch, plus_in_reward=reward_settings.plus_tests == "reward")
        task = ExecutionRewards(
            {p.id: p for p in problems}, executor, reward_settings, prompt_config.reasoning_format, watch=monitor
        )
    prompts = [task.prompt(p, prompt_config, tokenizer) for p in problems]
    problems_by_prompt = dict(zip(prompts, problems, strict=True))
    dataset = Dataset.from_list([{"prompt": text, "problem_id": p.id} for text, p in zip(prompts, problems, strict=True)])
    reward_funcs, reward_weights = task.reward_functions()
    checkpoint_dir = Path(checkpoint_dir)
    args = grpo_config(
        settings,
        processes=world_size(),
        reward_weights=reward_weights,
        checkpoint_dir=checkpoint_dir,
        wandb=wandb,
        run_name=run_name,
        micro_batch=micro_batch,
        accumulation=accumulation,
    )
    model = load_model(model_path, args, full_weight=lora is None)
    metrics_in_progress = checkpoint_dir / "metrics.jsonl"
    interval = IntervalEvaluation.of_policy(
        eval_problems,
        prompt_config,
        tokenizer,
        executor,
        lambda trainer: PolicySampler(trainer, settings),
        every=settings.eval_every,
        samples=settings.eval_samples,
        temperature=settings.eval_temperature,
    )
    make_sampler = lambda trainer: PolicySampler(trainer, settings)  # noqa: E731
    rollout = task.rollout_func(make_sampler)
    if srrl is not None:
        rollout = SRRLRollout(
            problems_by_prompt, executor, srrl, prompt_config, make_sampler, rewarded=reward_settings.rewarded
        )
    trainer_class = task.trainer_class(LengthChunkedGRPOTrainer)
    if srrl is not None:
        trainer_class = grouping_trainer_class(trainer_class, srrl)
    # The trainer's weight sync merges a LoRA adapter out of place (execrl.generation.weight_sync), and
    # on vLLM's CPU build reaches vLLM as execrl.generation.vllm_cpu's does.
    with trl_vllm_generation(settings.use_vllm):
        trainer = trainer_class(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config(lora),
            rollout_func=rollout,
            callbacks=[
                MetricsFileCallback(metrics_in_progress),
                interval,
                *task.callbacks(make_sampler),
            ],
        )
    if settings.use_vllm:
        # Names the step in the error a weight sync that did not reach vLLM raises (execrl.generation.weight_sync).
        trainer.vllm_generation.current_step = lambda: trainer.state.global_step
    if token_budget is not None:
        trainer.add_callback(StopAtTokenBudget(token_budget, trainer.generated_tokens))
    trainer.data_collator = ExampleLog(trainer.data_collator, "problem_id", drop=False)
    interval.trainer = trainer
    task.bind(trainer)
    # Merging in place would write into ZeRO-3's gathered copies of sharded weights.
    if lora and not settings.use_vllm and not trainer.is_deepspeed_enabled:
        generate_with_merged_adapter(trainer.model)
    train_resuming(trainer, checkpoint_dir)
    finish_training(trainer, tokenizer, adapter_dir, metrics_in_progress, metrics_path)
