"""SRRL's training budget (`srrl.budget`) and the sampled-token totals it is measured in.

`completions` (the default) gives SRRL as many completions per step and steps as GRPO. SRRL's
refinement prompts are about three times as long as first attempts, so at equal completions SRRL
samples more tokens than GRPO. `tokens` instead stops SRRL once it has sampled as many tokens as
GRPO's run of the same dataset, model and seed did in all: the workflow hands the training job
GRPO's metrics file, this module reads its total, and `execrl.training.StopAtTokenBudget` stops
SRRL there.

Tokens are TRL's `num_tokens`: the cumulative prompt and completion tokens of every completion
GRPOTrainer has sampled for training (`state.num_input_tokens_seen`, summed over processes; a
group of G completions counts its prompt G times, a refinement its refinement prompt). The
report's token table (`execrl.report.budget`) reads the same key.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

BUDGETS = ("completions", "tokens")
"""What SRRL is held equal to GRPO on: completions per step and steps, or tokens sampled in all."""
SAMPLED_TOKENS = "num_tokens"
"""TRL's logged cumulative count of the prompt and completion tokens sampled for training."""


def tokens_sampled(records: Iterable[dict]) -> float | None:
    """The tokens a run's metrics records say it sampled in all (the largest cumulative count), or
    None when it logged none."""
    totals = [r[SAMPLED_TOKENS] for r in records if isinstance(r.get(SAMPLED_TOKENS), (int, float))]
    return float(max(totals)) if totals else None


def read_token_budget(metrics_path: str | Path) -> int:
    """The tokens GRPO's run sampled in all, from its metrics file: SRRL's budget under `tokens`."""
    from execrl.jsonl import read_jsonl

    total = tokens_sampled(read_jsonl(metrics_path))
    if not total:
        raise ValueError(
            f"{metrics_path} logged no {SAMPLED_TOKENS} (TRL's count of sampled tokens): it is not the metrics file "
            "of a GRPO run, so it cannot set srrl.budget: tokens"
        )
    return int(total)
