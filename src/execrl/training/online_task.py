"""What an online method trains on, as `execrl.training.grpo.train_grpo` asks for it.

GRPO, SRRL, `exec`, `code_game` and `spiral` share TRL's GRPOTrainer, its settings, LoRA or full
weights, checkpoints and the interval evaluation; they differ in the prompts a step samples
from, the reward, and for self-play in how a step's samples are drawn. A method's task says
those, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt


class OnlineTask:
    """The default task: a train problem's prompt, sampled as GRPO samples it."""

    def prompt(self, problem: Problem, prompt_config: PromptConfig, tokenizer) -> str:
        """The training prompt of one train problem."""
        return build_prompt(problem, prompt_config, tokenizer)

    def reward_functions(self) -> tuple[list[Callable], list[float]]:
        """TRL reward functions and their weights."""
        raise NotImplementedError

    def bind(self, trainer) -> None:
        """Called once the trainer exists (a task that samples the policy keeps it)."""

    def rollout_func(self, make_sampler: Callable) -> Callable | None:
        """TRL's `rollout_func`, when the task draws a step's samples itself (None: GRPO's sampling).
        `make_sampler(trainer)` is a `execrl.training.grpo.PolicySampler` of the policy being trained."""
        return None

    def callbacks(self, make_sampler: Callable) -> list:
        """Trainer callbacks of the task (its own evaluations)."""
        return []

    def trainer_class(self, base: type) -> type:
        """The trainer, given execrl's GRPOTrainer (a task that changes how advantages are made subclasses it)."""
        return base

    def close(self) -> None:
        """Release what the task started for itself (the code game's second sandbox pool)."""
