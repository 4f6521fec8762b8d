"""GRPO's settings (TRL's names) and how they become TRL's GRPOConfig arguments, without importing
TRL: the memory plan reads them while Snakemake builds the DAG. The trainer is execrl.training.grpo."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from execrl.generation.sampling import NEUTRAL_TRANSFORMERS_FIELDS, SAMPLING_KEYS, SamplingSettings
from execrl.generation.vllm_server import VLLM_GROUP_PORT_ENV, VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV

VLLM_MODES = ("colocate", "server")
IMPORTANCE_SAMPLING_MODES = ("sequence_mask", "sequence_truncate", "token_mask", "token_truncate")
"""TRL 1.16's vllm_importance_sampling_mode values."""


@dataclass(frozen=True)
class GRPOSettings:
    """GRPO hyper-parameters (TRL's names); a step uses prompts_per_step × num_generations completions."""

    num_generations: int = 8
    prompts_per_step: int = 16
    """Prompts per generation round over all training processes (a round is one optimiser step
    unless `steps_per_generation` spreads it over several); each of N processes samples
    prompts_per_step / N of them (whole groups), so the process count does not change a step."""
    max_steps: int = 200
    train_problems: int | None = None
    """Train on the first N problems of the train split (None: all of them)."""
    learning_rate: float = 1e-5
    beta: float = 0.0
    epsilon: float = 0.2
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    # The rollouts' sampling: the `generation` section's, never the grpo section's (`rollout_settings`),
    # so that training and evaluation draw from one distribution.
    temperature: float = 0.8
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    use_model_generation_config: bool = False
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
    use_bias_correction_kl: bool = True
    """TRL's default: the KL term times the policy/old-policy ratio; False: plain k3 (tiny-grpo's)."""
    disable_dropout: bool = False
    """True: the trained model's dropout probabilities are 0 (tiny-grpo's eval-mode old log-probs)."""
    vllm_importance_sampling_correction: bool = True
    """TRL's default: weight each completion by the trainer/vLLM log-prob ratio (only with vLLM)."""
    vllm_importance_sampling_mode: str = "sequence_mask"
    vllm_importance_sampling_clip_max: float | None = 3.0
    vllm_importance_sampling_clip_min: float | None = None
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
    the job, started by `python -m execrl.generation.vllm_server`)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of each training GPU's memory colocated vLLM may take (TRL's default). A server gets
    its own GPUs and its own fraction (`execrl.generation.vllm_server --gpu-memory-utilization`)."""
    vllm_max_model_length: int | None = None
    """vLLM's context window: longest prompt plus max_completion_length (None: the model's)."""
    vllm_tensor_parallel_size: int = 1
    """Colocate mode: GPUs each vLLM engine spans (must divide the training processes). Server
    mode: the server's GPUs are set by the job (`execrl.generation.vllm_server --gpus`), not by this."""
    gradient_checkpointing: bool = True
    """Trade compute for memory (TRL's default); small models train faster without it."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.vllm_importance_sampling_mode not in IMPORTANCE_SAMPLING_MODES:
            raise ValueError(
                f"grpo.vllm_importance_sampling_mode must be one of {IMPORTANCE_SAMPLING_MODES}, "
                f"got {self.vllm_importance_sampling_mode!r}"
            )
        if self.vllm_mode not in VLLM_MODES:
            raise ValueError(f"grpo.vllm_mode must be one of {VLLM_MODES}, got {self.vllm_mode!r}")
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError(f"grpo.vllm_gpu_memory_utilization must be in (0, 1], got {self.vllm_gpu_memory_utilization}")
        if self.sampling.greedy:
            raise ValueError("generation.temperature is 0 (greedy): GRPO's rollouts sample, so it must be above 0")

    @property
    def sampling(self) -> SamplingSettings:
        """The distribution the rollouts draw from (the `generation` section's)."""
        return SamplingSettings.of(self.__dict__)

    def for_model(self, model_path: str) -> GRPOSettings:
        """These settings with the sampling as it applies to the model at `model_path`
        (`SamplingSettings.for_model`: its generation config only when asked for)."""
        resolved = self.sampling.for_model(model_path)
        return replace(self, **{key: getattr(resolved, key) for key in SAMPLING_KEYS})

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
        `micro_batch` × `accumulation` (execrl.planning.memory_plan), each of these settings' micro-batches is
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
            "use_bias_correction_kl": self.use_bias_correction_kl,
            "disable_dropout": self.disable_dropout,
            "vllm_importance_sampling_correction": self.vllm_importance_sampling_correction,
            "vllm_importance_sampling_mode": self.vllm_importance_sampling_mode,
            "vllm_importance_sampling_clip_max": self.vllm_importance_sampling_clip_max,
            "vllm_importance_sampling_clip_min": self.vllm_importance_sampling_clip_min,
            "beta": self.beta,
            "epsilon": self.epsilon,
            "loss_type": self.loss_type,
            "scale_rewards": self.scale_rewards,
            **self.sampling.trl_args(),
            # TRL's transformers path leaves GenerationConfig's other cuts unset, to be filled from the
            # model's generation config; vLLM's SamplingParams take none of them.
            "generation_kwargs": None if self.use_vllm else dict(NEUTRAL_TRANSFORMERS_FIELDS),
            "max_completion_length": self.max_completion_length,
            "gradient_checkpointing": self.gradient_checkpointing,
        }

    def vllm_args(self, processes: int) -> dict:
        """GRPOConfig's vLLM arguments for `processes` training processes; in server mode, the
        server's address from `execrl.generation.vllm_server`."""
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
                    "run the training command under `python -m execrl.generation.vllm_server ... -- COMMAND`"
                )
            args.update(
                vllm_server_host=os.environ[VLLM_SERVER_HOST_ENV],
                vllm_server_port=int(os.environ[VLLM_SERVER_PORT_ENV]),
                vllm_group_port=int(os.environ[VLLM_GROUP_PORT_ENV]),
            )
        return args


def rollout_settings(grpo: dict, generation: dict) -> dict:
    """The grpo section a training job gets: `grpo` with the `generation` section's sampling keys,
    which GRPO's rollouts share with the evaluation. A sampling key in `grpo` itself (a method's
    override) would make the two differ, and is refused."""
    own = sorted(set(grpo) & set(SAMPLING_KEYS))
    if own:
        raise ValueError(
            f"grpo.{own[0]} is set, but GRPO's rollouts sample as the evaluation does: set generation.{own[0]} "
            f"instead (it applies to both)"
        )
    return {**grpo, **{key: generation[key] for key in SAMPLING_KEYS if key in generation}}
