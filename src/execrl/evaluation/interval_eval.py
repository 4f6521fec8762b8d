"""Interval evaluation: pass@1 of the policy being trained on held-out problems, before the first
step, every N steps and after the last, logged with the training metrics.

It samples at its own temperature, `samples` times per problem, so the curve measures the
policy rather than the training sampler; the interval is the normal approximation over problems
(each problem's pass rate is one observation), which is what varies between evaluations of the
same policy on another draw of problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from transformers import TrainerCallback

from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt, extract_code

Z_95 = 1.959964


def pass_at_1_interval(passes: list[int], samples: int) -> tuple[float, float, float]:
    """Mean per-problem pass rate and its 95% interval (normal approximation over problems)."""
    if not passes:
        raise ValueError("no problems were evaluated")
    rates = [c / samples for c in passes]
    mean = sum(rates) / len(rates)
    if len(rates) == 1:
        return mean, mean, mean
    variance = sum((r - mean) ** 2 for r in rates) / (len(rates) - 1)
    half = Z_95 * math.sqrt(variance / len(rates))
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def benchmark_name(problems: list[Problem]) -> str:
    """The data set the problems come from, by their ids' shared prefix (`mbpp/11` -> `mbpp`), else `heldout`."""
    prefixes = {p.id.split("/", 1)[0] for p in problems if "/" in p.id}
    if len(prefixes) == 1 and all("/" in p.id for p in problems):
        return prefixes.pop()
    return "heldout"


class PeriodicEvaluation(TrainerCallback):
    """Calls `evaluate(step)` before the first step, every `every` steps and after the last, once
    `trainer` is set (the trainer takes its callbacks before it exists); `evaluate` logs through
    the trainer and sets `_last_step`."""

    every: int = 0
    trainer = None
    _last_step: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.every and self.trainer is not None)

    def on_train_begin(self, args, state, control, **kwargs):
        if self.active and state.global_step == 0:
            self.evaluate(0)

    def on_step_end(self, args, state, control, **kwargs):
        if self.active and state.global_step % self.every == 0:
            # Trainer.log clears `should_log`: keep the step's own record (loss, learning rate).
            should_log = control.should_log
            self.evaluate(state.global_step)
            control.should_log = should_log

    def on_train_end(self, args, state, control, **kwargs):
        if self.active and self._last_step != state.global_step:
            self.evaluate(state.global_step)

    def evaluate(self, step: int) -> dict[str, float]:
        raise NotImplementedError


class IntervalEvaluation(PeriodicEvaluation):
    """Logs `interval_eval/pass_at_1` (with `_low`/`_high`) and `interval_eval/problems_passed`, and
    the same as seed 002 names them, `{benchmark}_eval/pass_rate` and `{benchmark}_eval/problems_passed`.

    `sample(prompts, temperature)` returns one completion text per prompt from the current
    policy. With several training processes each samples and runs every N-th problem (shards
    padded to one length, since vLLM's server mode samples collectively) and the counts are
    summed across processes.
    """

    def __init__(
        self,
        problems: list[Problem],
        prompts: list[str],
        executor,
        sample: Callable[[list[str], float], list[str]],
        every: int,
        samples: int,
        temperature: float,
        reasoning_format: bool = False,
    ):
        if samples < 1:
            raise ValueError(f"interval evaluation needs at least one sample per problem, got {samples}")
        self.problems = problems
        self.prompts = prompts
        self.executor = executor
        self.sample = sample
        self.every = every
        self.samples = samples
        self.temperature = temperature
        self.reasoning_format = reasoning_format
        self.trainer = None
        self._last_step: int | None = None

    @classmethod
    def of_policy(
        cls,
        problems: list[Problem],
        prompt_config: PromptConfig,
        tokenizer,
        executor,
        make_sampler: Callable,
        every: int,
        samples: int,
        temperature: float,
    ) -> IntervalEvaluation:
        """The evaluation of the policy a trainer trains, prompted as the method's own samples are.

        `make_sampler(trainer)` returns a sampler of that policy with a `texts(prompts,
        temperature)` method (`execrl.generation.policy_sampling`); it is made for each evaluation, once
        `trainer` is set, which must happen before training starts (the trainer takes its
        callbacks before it exists).
        """
        evaluation = cls(
            problems,
            [build_prompt(p, prompt_config, tokenizer) for p in problems],
            executor,
            sample=lambda prompts, temperature: make_sampler(evaluation.trainer).texts(prompts, temperature),
            every=every,
            samples=samples,
            temperature=temperature,
            reasoning_format=prompt_config.reasoning_format,
        )
        return evaluation

    @property
    def active(self) -> bool:
        return bool(super().active and self.problems)

    def evaluate(self, step: int) -> dict[str, float]:
        import torch

        accelerator = self.trainer.accelerator
        rank, processes = accelerator.process_index, accelerator.num_processes
        mine = list(range(rank, len(self.problems), processes))
        shard = -(-len(self.problems) // processes)
        padded = mine + [mine[0] if mine else 0] * (shard - len(mine))
        texts = self.sample([self.prompts[i] for i in padded for _ in range(self.samples)], self.temperature)
        items = [
            (self.problems[i], extract_code(text, self.reasoning_format))
            for position, i in enumerate(mine)
            for text in texts[position * self.samples : (position + 1) * self.samples]
        ]
        results = self.executor.run_batch(items)
        counts = torch.zeros(len(self.problems), device=accelerator.device)
        for position, i in enumerate(mine):
            verdicts = results[position * self.samples : (position + 1) * self.samples]
            counts[i] = sum(r.status == "pass" for r in verdicts)
        counts = accelerator.reduce(counts, "sum")
        passes = [int(c) for c in counts.tolist()]
        mean, low, high = pass_at_1_interval(passes, self.samples)
        solved = float(sum(c > 0 for c in passes))
        benchmark = benchmark_name(self.problems)
        metrics = {
            "interval_eval/pass_at_1": mean,
            "interval_eval/pass_at_1_low": low,
            "interval_eval/pass_at_1_high": high,
            "interval_eval/problems_passed": solved,
            # seed 002's names (`mbpp_eval/pass_rate`), for runs compared with its logs
            f"{benchmark}_eval/pass_rate": mean,
            f"{benchmark}_eval/problems_passed": solved,
        }
        self._last_step = step
        self.trainer.log(metrics)
        return metrics
