"""SRRL: GRPO whose groups mix first attempts (c1) with refinements (c2) of the failed ones.

Per prompt, a group of G completions is split into G1 first attempts and G2 = round(share × G)
refinements. Every c1 is executed; each failed c1 yields a refinement prompt (the problem, the
failed code, the error, the failed tests the config allows, and a trace: `execrl.refinement`); the G2 slots are dealt
round-robin over the failed c1s. When no c1 failed, the unused c2 budget goes back to c1, so a
group always holds G completions and GRPO and SRRL draw as many completions. Advantages normalise
each group's c1s among themselves and its c2s among themselves (`groups: separate`), or all G
together as TRL does (`pooled`). Refinement prompts
are longer than first attempts, so `srrl.budget: generated_tokens` (or `total_tokens`) compares
them at equal tokens instead (`execrl.training.token_budget`).

Under vLLM the rollout hands TRL the sampling log-probabilities of every completion (c2 ones
under their refinement prompt, the context they were sampled in and are scored in), so TRL's
vLLM importance-sampling correction applies to SRRL as it does to GRPO.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from execrl.problems import Problem
from execrl.prompting import PromptConfig, extract_code
from execrl.refinement import DEFAULT_REFINEMENT_TEMPLATE, FEEDBACK_TESTS, refinement_prompt
from execrl.training.token_budget import check_budget

GROUPINGS = ("pooled", "separate")


@dataclass(frozen=True)
class SRRLSettings:
    """What SRRL adds to GRPO."""

    refine_share: float = 0.5
    """Share of each group spent on refinements (c2)."""
    feedback_tests: str = "shown"
    """Which tests a refinement prompt may quote: `shown` (those the prompt already shows), `all`, or `none`."""
    refinement_template: str = DEFAULT_REFINEMENT_TEMPLATE
    """Format string with {prompt}, {code}, {status}, {error}, {failed_tests}, {trace}."""
    max_trace_chars: int = 600
    groups: str = "separate"
    """Whose rewards make a completion's baseline: `separate` (c1s against the group's c1s, c2s
    against its c2s) or `pooled` (all G together, as TRL normalises a group)."""
    budget: str = "completions"
    """What SRRL is held equal to GRPO on (`execrl.training.token_budget`): `completions` (as many per step,
    for grpo.max_steps), `generated_tokens` (train until it has sampled as many completion tokens as
    GRPO's run did) or `total_tokens` (prompt and completion tokens)."""

    def __post_init__(self) -> None:
        if not 0 <= self.refine_share < 1:
            raise ValueError(f"srrl.refine_share must be in [0, 1), got {self.refine_share}")
        if self.feedback_tests not in FEEDBACK_TESTS:
            raise ValueError(f"srrl.feedback_tests must be one of {FEEDBACK_TESTS}, got {self.feedback_tests!r}")
        if self.groups not in GROUPINGS:
            raise ValueError(f"srrl.groups must be one of {GROUPINGS}, got {self.groups!r}")
        check_budget(self.budget)


def budget(group_size: int, refine_share: float) -> tuple[int, int]:
    """(first attempts, refinements) per group; at least one first attempt."""
    refinements = min(round(group_size * refine_share), group_size - 1)
    return group_size - refinements, refinements


def assign_refinements(passed: list[bool], refinements: int) -> tuple[list[int], int]:
    """Which failed c1 each refinement slot refines (round-robin), and how many slots return to c1."""
    failed = [i for i, ok in enumerate(passed) if not ok]
    if not failed:
        return [], refinements
    return [failed[slot % len(failed)] for slot in range(refinements)], 0


class SRRLRollout:
    """TRL `rollout_func`: builds each group from c1 samples and refinements of the failed ones."""

    def __init__(
        self,
        problems_by_prompt: dict[str, Problem],
        executor,
        settings: SRRLSettings,
        prompt_config: PromptConfig,
        make_sampler,
        rewarded=None,
    ):
        self.problems_by_prompt = problems_by_prompt
        self.rewarded = rewarded or (lambda problem: problem)
        """problem -> the problem the reward runs (`RewardSettings.rewarded`: its first `max_tests`
        tests, then under `plus_tests: reward` its held-out tests); prompts and refinement prompts
        quote the problem as given, and a refinement prompt no outcome of a held-out test."""
        self.executor = executor
        self.settings = settings
        self.prompt_config = prompt_config
        self.make_sampler = make_sampler
        """trainer -> sampler: a callable mapping prompt texts to one (prompt_ids, completion_ids, text,
        logprobs) each, `logprobs` being the sampled tokens' log-probabilities or None; with a
        `tokenizer` attribute."""

    def __call__(self, prompts: list[str], trainer) -> dict:
        group_size = trainer.num_generations
        if len(prompts) % group_size or any(
            prompts[i] != prompts[i - i % group_size] for i in range(len(prompts))
        ):
            raise ValueError(f"rollout expects each prompt repeated {group_size} times in a row")
        return self.rollout(prompts[::group_size], group_size, self.make_sampler(trainer))

    def rollout(self, unique_prompts: list[str], group_size: int, sampler) -> dict:
        n_first, n_refine = budget(group_size, self.settings.refine_share)
        problems = [self.problems_by_prompt[p] for p in unique_prompts]
        first = sampler([p for p in unique_prompts for _ in range(n_first)])
        first_results = self._execute([(problems[i // n_first], sample[2]) for i, sample in enumerate(first)])

        second_prompts, second_kinds, owners = [], [], []
        for g, prompt in enumerate(unique_prompts):
            group_results = first_results[g * n_first : (g + 1) * n_first]
            slots, returned = assign_refinements([r["status"] == "pass" for r in group_results], n_refine)
            for index in slots:
                text = first[g * n_first + index][2]
                code = extract_code(text, self.prompt_config.reasoning_format)
                second_prompts.append(
                    refinement_prompt(
                        problems[g],
                        code,
                        group_results[index],
                        self.settings,
                        self.prompt_config,
                        sampler.tokenizer,
                        judged=self.rewarded(problems[g]),
                    )
                )
                second_kinds.append("c2")
                owners.append(g)
            for _ in range(returned):
                second_prompts.append(prompt)
                second_kinds.append("c1")
                owners.append(g)
        second = sampler(second_prompts) if second_prompts else []
        second_results = self._execute([(problems[g], sample[2]) for g, sample in zip(owners, second, strict=True)])

        output = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "execution": [], "sample_kind": [],
                  "first_round": []}
        for g in range(len(unique_prompts)):
            members = [(first[g * n_first + i], first_results[g * n_first + i], "c1") for i in range(n_first)]
            members += [
                (sample, result, kind)
                for sample, result, kind, owner in zip(second, second_results, second_kinds, owners, strict=True)
                if owner == g
            ]
            if len(members) != group_size:
                raise AssertionError(f"group {g} has {len(members)} completions, expected {group_size}")
            # the n_first attempts drawn before any refinement: the c1s a problem gets whatever its
            # outcome (the c1s drawn in place of refinements come only where all of these passed)
            output["first_round"] += [True] * n_first + [False] * (len(members) - n_first)
            for (prompt_ids, completion_ids, _, logprobs), result, kind in members:
                output["prompt_ids"].append(prompt_ids)
                output["completion_ids"].append(completion_ids)
                output["logprobs"].append(logprobs)
                output["execution"].append(result)
                output["sample_kind"].append(kind)
        # TRL takes None for "no sampling log-probabilities" (its transformers path); never a partial list.
        if any(logprobs is None for logprobs in output["logprobs"]):
            output["logprobs"] = None
        return output

    def _execute(self, items: list[tuple[Problem, str]]) -> list[dict]:
        pairs = [
            (self.rewarded(problem), extract_code(text, self.prompt_config.reasoning_format)) for problem, text in items
        ]
        return [result.to_dict() for result in self.executor.run_batch(pairs)] if pairs else []


def subgroup_advantages(rewards: torch.Tensor, kinds: list[str], group_size: int, scale_rewards: str) -> torch.Tensor:
    """Advantages with c1 and c2 normalised in their own subgroups of each group (`groups: separate`).

    Within each group of `group_size`, a c1's advantage is its reward less the mean of the group's
    c1s, divided (`scale_rewards: group`) by their standard deviation, as TRL's GRPO does over a
    whole group; the c2s likewise among themselves. A subgroup of one, or of equal rewards, gives
    no signal. `batch` divides by the batch's standard deviation and `none` does not divide, as in
    TRL. NaN rewards (unscorable completions) stay out of the means and get advantage 0.
    """
    if rewards.numel() % group_size or len(kinds) != rewards.numel():
        raise ValueError(f"{rewards.numel()} rewards and {len(kinds)} kinds do not make groups of {group_size}")
    if scale_rewards not in ("group", "batch", "none"):
        raise ValueError(f"scale_rewards must be group, batch or none, got {scale_rewards!r}")
    advantages = torch.zeros_like(rewards)
    for start in range(0, rewards.numel(), group_size):
        for kind in set(kinds[start : start + group_size]):
            members = torch.tensor([start + i for i, k in enumerate(kinds[start : start + group_size]) if k == kind])
            values = rewards[members]
            scored = ~torch.isnan(values)
            if scored.sum() == 0:
                continue
            centred = values - values[scored].mean()
            if scale_rewards == "group":
                std = values[scored].std() if scored.sum() > 1 else torch.zeros((), dtype=rewards.dtype)
                centred = centred / (std + 1e-4)
            advantages[members] = centred
    if scale_rewards == "batch":
        scored = rewards[~torch.isnan(rewards)]
        std = scored.std() if scored.numel() > 1 else torch.zeros((), dtype=rewards.dtype)
        advantages = advantages / (std + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def grouping_trainer_class(base: type, settings: SRRLSettings) -> type:
    """`base` itself for `groups: pooled` (TRL normalises each group of G); for `separate`, a
    subclass whose advantages come from `subgroup_advantages`.

    TRL computes advantages inside `_generate_and_score_completions`; the subclass records the
    step's rewards and sample kinds (gathered across processes) in `_calculate_rewards`, and
    replaces the advantages TRL returns (this process's slice) and logs.
    """
    if settings.groups == "pooled":
        return base

    class SubgroupAdvantagesTrainer(base):
        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            from accelerate.utils import gather_object

            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self._step_kinds = gather_object([example.get("sample_kind", "c1") for example in inputs])
            self._step_rewards_per_func = rewards_per_func
            return rewards_per_func

        def _generate_and_score_completions(self, inputs):
            self._step_kinds = None
            output = super()._generate_and_score_completions(inputs)
            if self._step_kinds is None or not self.model.training:
                return output
            if self.multi_objective_aggregation != "sum_then_normalize":
                raise ValueError("srrl.groups: separate needs TRL's multi_objective_aggregation sum_then_normalize")
            per_func = self._step_rewards_per_func
            rewards = (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
            rewards[torch.isnan(per_func).all(dim=1)] = torch.nan
            advantages = subgroup_advantages(rewards.cpu(), self._step_kinds, self.num_generations, self.scale_rewards)
            local = len(output["advantages"])
            start = self.accelerator.process_index * local
            output["advantages"] = advantages[start : start + local].to(output["advantages"].device)
            logged = self._logs["advantages"]
            for _ in range(min(len(advantages), len(logged))):
                logged.pop()
            logged.extend(advantages.tolist())
            return output

    return SubgroupAdvantagesTrainer
