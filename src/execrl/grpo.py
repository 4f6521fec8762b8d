"""Online RL with execution rewards: TRL's GRPOTrainer, and SRRL through its `rollout_func` hook."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from trl import GRPOTrainer

from execrl.generation.weight_sync import trl_vllm_generation
from execrl.interval_eval import IntervalEvaluation
from execrl.lora import LoRASettings
from execrl.policy_sampling import TransformersPolicySampler, generate_with_merged_adapter
from execrl.online_task import OnlineTask
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.rewards import ExecutionRewards, RewardSettings
from execrl.srrl import SRRLRollout, SRRLSettings, grouping_trainer_class
from execrl.training import (
    ExampleLog,
    MetricsFileCallback,
    StopAtTokenBudget,
    finish_training,
    load_model,
    resumable_run_kwargs,
    train_resuming,
    world_size,
)
from execrl.vllm_server import VLLM_GROUP_PORT_ENV, VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV
from execrl.watch.monitor import RewardHackingWatch, WatchSettings

VLLM_MODES = ("colocate", "server")


@dataclass(frozen=True)
class GRPOSettings:
    """GRPO hyper-parameters (TRL's names); a step uses prompts_per_step × num_generations completions."""

    num_generations: int = 8
    prompts_per_step: int = 16
    """Prompts per optimiser step over all training processes; each of N processes samples
    prompts_per_step / N of them (whole groups), so the process count does not change a step."""
    max_steps: int = 200
    train_problems: int | None = None
    """Train on the first N problems of the train split (None: all of them)."""
    learning_rate: float = 1e-5
    beta: float = 0.0
    epsilon: float = 0.2
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    temperature: float = 0.8
    top_p: float = 1.0
    max_completion_length: int = 1024
    gradient_accumulation_steps: int = 1
    num_iterations: int = 1
    """Passes over each generation round's completions (TRL's μ; tiny-grpo's `epochs_per_step`)."""
    steps_per_generation: int | None = None
    """Micro-batches each generation round is cut into (TRL's name): the round's prompts_per_step ×
    num_generations completions are shuffled and split into this many, so a round makes
    steps_per_generation / gradient_accumulation_steps optimiser updates (tiny-grpo's mini-batches of
    its replay buffer). None: TRL's default, one round per optimiser step."""
    max_grad_norm: float = 1.0
    """Clip the gradient's global norm at this before each update."""
    save_steps: int = 25
    eval_every: int = 25
    """Interval evaluation every this many steps (0: none)."""
    eval_problems: int = 64
    """Held-out problems in the interval evaluation."""
    eval_samples: int = 1
    """Samples per problem in the interval evaluation (its pass@1 averages them)."""
    eval_temperature: float = 0.2
    """Sampling temperature of the interval evaluation (0: greedy)."""
    use_vllm: bool = True
    vllm_mode: str = "colocate"
    """`colocate` (vLLM inside the training process) or `server` (`trl vllm-serve` on other GPUs of
    the job, started by `python -m execrl.vllm_server`)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of each training GPU's memory colocated vLLM may take (TRL's default). A server gets
    its own GPUs and its own fraction (`execrl.vllm_server --gpu-memory-utilization`)."""
    vllm_max_model_length: int | None = None
    """vLLM's context window: longest prompt plus max_completion_length (None: the model's)."""
    vllm_tensor_parallel_size: int = 1
    """Colocate mode: GPUs each vLLM engine spans (must divide the training processes). Server
    mode: the server's GPUs are set by the job (`execrl.vllm_server --gpus`), not by this."""
    gradient_checkpointing: bool = True
    """Trade compute for memory (TRL's default); small models train faster without it."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.vllm_mode not in VLLM_MODES:
            raise ValueError(f"grpo.vllm_mode must be one of {VLLM_MODES}, got {self.vllm_mode!r}")
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError(f"grpo.vllm_gpu_memory_utilization must be in (0, 1], got {self.vllm_gpu_memory_utilization}")

    def per_process_completions(self, processes: int) -> int:
        """Completions each of `processes` training processes samples per step (whole groups only)."""
        if self.prompts_per_step % processes:
            lower = self.prompts_per_step // processes * processes
            nearest = " or ".join(str(n) for n in (lower, lower + processes) if n)
            raise ValueError(
                f"grpo.prompts_per_step ({self.prompts_per_step}) must be a multiple of the training processes "
                f"({processes}): each process samples whole groups. Set it to {nearest}, or give the job "
                f"GPUs whose training processes divide {self.prompts_per_step}"
            )
        return self.prompts_per_step // processes * self.num_generations

    def per_device_batch(self, processes: int) -> int:
        """TRL's per_device_train_batch_size: a process's completions of a round, over steps_per_generation."""
        completions = self.per_process_completions(processes)
        if self.steps_per_generation is None:
            return completions
        if completions % self.steps_per_generation:
            raise ValueError(
                f"grpo.steps_per_generation ({self.steps_per_generation}) must divide each process's completions "
                f"of a round ({completions} = prompts_per_step {self.prompts_per_step} / {processes} process(es) "
                f"× num_generations {self.num_generations})"
            )
        return completions // self.steps_per_generation

    def micro_batches(self, processes: int, micro_batch: int | None = None, accumulation: int | None = None) -> dict:
        """TRL's per-device batch, accumulation and steps per generation; with the memory plan's
        `micro_batch` × `accumulation` (execrl.memory_plan), each of these settings' micro-batches is
        cut into pieces of `micro_batch`, and the generation round and the optimizer step keep their
        completions."""
        batch = self.per_device_batch(processes)
        rounds = self.steps_per_generation
        if micro_batch is None:
            return {"per_device_train_batch_size": batch, "gradient_accumulation_steps": self.gradient_accumulation_steps,
                    "steps_per_generation": rounds}
        pieces, rest = divmod(batch, micro_batch)
        if rest or accumulation != self.gradient_accumulation_steps * pieces:
            raise ValueError(
                f"the memory plan's micro-batch {micro_batch} x accumulation {accumulation} does not cut this "
                f"job's per-device batch ({batch} on {processes} process(es)) x grpo.gradient_accumulation_steps "
                f"({self.gradient_accumulation_steps}): was the train rule's `processes` changed without the plan?"
            )
        # TRL's default steps_per_generation is gradient_accumulation_steps.
        return {"per_device_train_batch_size": micro_batch, "gradient_accumulation_steps": accumulation,
                "steps_per_generation": (rounds or self.gradient_accumulation_steps) * pieces}

    def trl_args(self, processes: int, micro_batch: int | None = None, accumulation: int | None = None) -> dict:
        """GRPOConfig's arguments from these settings (besides vLLM's, checkpoints' and the reward weights)."""
        return {
            "num_generations": self.num_generations,
            **self.micro_batches(processes, micro_batch, accumulation),
            "num_iterations": self.num_iterations,
            "max_steps": self.max_steps,
            "learning_rate": self.learning_rate,
            "lr_scheduler_type": "constant",
            "max_grad_norm": self.max_grad_norm,
            "beta": self.beta,
            "epsilon": self.epsilon,
            "loss_type": self.loss_type,
            "scale_rewards": self.scale_rewards,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_completion_length": self.max_completion_length,
            "gradient_checkpointing": self.gradient_checkpointing,
        }

    def vllm_args(self, processes: int) -> dict:
        """GRPOConfig's vLLM arguments for `processes` training processes; in server mode, the
        server's address from `execrl.vllm_server`."""
        if not self.use_vllm:
            return {"use_vllm": False}
        if self.vllm_mode == "colocate" and processes % self.vllm_tensor_parallel_size:
            raise ValueError(
                f"grpo.vllm_tensor_parallel_size ({self.vllm_tensor_parallel_size}) must divide the training "
                f"processes ({processes}): each colocated engine spans that many of them"
            )
        args = {
            "use_vllm": True,
            "vllm_mode": self.vllm_mode,
            "vllm_gpu_memory_utilization": self.vllm_gpu_memory_utilization,
            "vllm_max_model_length": self.vllm_max_model_length,
            "vllm_tensor_parallel_size": self.vllm_tensor_parallel_size,
        }
        if self.vllm_mode == "server":
            missing = [name for name in (VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV, VLLM_GROUP_PORT_ENV) if name not in os.environ]
            if missing:
                raise ValueError(
                    f"grpo.vllm_mode is 'server' but {', '.join(missing)} is not set: "
                    "run the training command under `python -m execrl.vllm_server ... -- COMMAND`"
                )
            args.update(
                vllm_server_host=os.environ[VLLM_SERVER_HOST_ENV],
                vllm_server_port=int(os.environ[VLLM_SERVER_PORT_ENV]),
                vllm_group_port=int(os.environ[VLLM_GROUP_PORT_ENV]),
            )
        return args


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
        super().__init__(trainer, settings.max_completion_length, settings.temperature, settings.top_p)

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
    token_budget: int | None = None,
    micro_batch: int | None = None,
    accumulation: int | None = None,
) -> None:
    """Train with GRPO (or SRRL when `srrl` is given), resuming from the newest checkpoint; with
    `token_budget`, stop once that many tokens have been sampled (SRRL's `srrl.budget: tokens`).
    `micro_batch` × `accumulation`: the memory plan's cut of each step (`GRPOSettings.micro_batches`).

    The reward is the problems' tests (`reward_settings`) unless `task` gives another
    (an `execrl.online_task.OnlineTask`: its prompts, reward, rollout, callbacks and trainer), as
    `exec`, `code_game` and `spiral` do. With `watch` (and the problems' tests as the reward), every
    step also logs the reward-hacking watch's rates (`execrl.watch.monitor`).

    With `lora`, `adapter_dir` receives a LoRA adapter; with `lora=None` all weights train and it
    receives the full model. Under `accelerate launch` each process samples its own prompts of every
    step (and logs their problem ids), rewards them with `executor` (each process has its own) and
    rank 0 writes the folder, metrics and checkpoints.
    """
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig

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
    args = GRPOConfig(
        **settings.trl_args(world_size(), micro_batch, accumulation),
        reward_weights=reward_weights,
        **settings.vllm_args(world_size()),
        **resumable_run_kwargs(checkpoint_dir, settings.save_steps, settings.seed, wandb, run_name),
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
    # on vLLM's CPU build reaches vLLM as execrl.vllm_cpu's does.
    with trl_vllm_generation(settings.use_vllm):
        trainer = trainer_class(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=lora.peft_config() if lora else None,
            rollout_func=rollout,
            callbacks=[
                MetricsFileCallback(metrics_in_progress),
                interval,
                *([StopAtTokenBudget(token_budget)] if token_budget is not None else []),
                *task.callbacks(make_sampler),
            ],
        )
    trainer.data_collator = ExampleLog(trainer.data_collator, "problem_id", drop=False)
    interval.trainer = trainer
    task.bind(trainer)
    # Merging in place would write into ZeRO-3's gathered copies of sharded weights.
    if lora and not settings.use_vllm and not trainer.is_deepspeed_enabled:
        generate_with_merged_adapter(trainer.model)
    train_resuming(trainer, checkpoint_dir)
    finish_training(trainer, tokenizer, adapter_dir, metrics_in_progress, metrics_path)
