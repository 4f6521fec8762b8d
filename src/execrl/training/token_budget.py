"""SRRL's training budget (`srrl.budget`) and the token counts it is measured in.

`completions` (the default) gives SRRL as many completions per step and steps as GRPO. SRRL's
refinement prompts are about three times as long as first attempts, so at equal completions SRRL
reads more prompt tokens than GRPO. The token budgets instead stop SRRL once it has used as many
tokens as GRPO's run of the same dataset, model and seed did in all: the workflow hands the
training job GRPO's metrics file, this module reads its total, and
`execrl.training.common.StopAtTokenBudget` stops SRRL there.

- `generated_tokens`: completion tokens only, the tokens the policy sampled (equal sampling
  compute). execrl logs their running count as `num_generated_tokens`
  (`execrl.training.common.GeneratedTokenCount`, summed over processes, counted as TRL counts a
  completion's length for `completions/mean_length`).
- `total_tokens`: prompt and completion tokens, TRL's own `num_tokens`
  (`state.num_input_tokens_seen`, summed over processes; a group of G completions counts its
  prompt G times, a refinement its refinement prompt): what the forward passes read.

The prompt tokens are the difference of the two. The report's token table
(`execrl.report.budget`) reads the same keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GENERATED_TOKENS = "num_generated_tokens"
"""execrl's logged cumulative count of the completion tokens sampled for training."""
TOTAL_TOKENS = "num_tokens"
"""TRL's logged cumulative count of the prompt and completion tokens of every completion sampled for training."""
TOKEN_BUDGETS = {"generated_tokens": GENERATED_TOKENS, "total_tokens": TOTAL_TOKENS}
"""Each token budget and the logged running count it reads."""
BUDGETS = ("completions", *TOKEN_BUDGETS)
"""What SRRL is held equal to GRPO on: completions per step and steps, or tokens in all."""
RETIRED = {
    "tokens": (
        "srrl.budget: tokens is no longer a budget: it counted prompt and completion tokens together, so it mostly "
        "equalised prompt tokens. Use generated_tokens (completion tokens only, equal sampling compute) or "
        "total_tokens (prompt and completion tokens, what `tokens` meant)"
    )
}
"""Former budget names, with what to use instead."""


def check_budget(budget: str, key: str = "srrl.budget") -> str:
    """`budget` if it is one of BUDGETS; otherwise a ValueError naming `key` and the budgets."""
    if budget in RETIRED:
        raise ValueError(RETIRED[budget].replace("srrl.budget", key, 1))
    if budget not in BUDGETS:
        raise ValueError(f"{key} must be one of {BUDGETS}, got {budget!r}")
    return budget


@dataclass(frozen=True)
class TokenBudget:
    """Stop training once `tokens` tokens of the kind `budget` names have been used."""

    budget: str
    """`generated_tokens` or `total_tokens`."""
    tokens: int

    def __post_init__(self) -> None:
        if self.budget not in TOKEN_BUDGETS:
            raise ValueError(f"a token budget is one of {tuple(TOKEN_BUDGETS)}, got {self.budget!r}")
        if self.tokens < 1:
            raise ValueError(f"a token budget must be at least 1 token, got {self.tokens}")

    @property
    def key(self) -> str:
        """The logged running count this budget reads."""
        return TOKEN_BUDGETS[self.budget]


def logged_total(records: Iterable[dict], key: str) -> float | None:
    """The largest value of a cumulative count `key` in a run's metrics records, or None when it
    logged none."""
    totals = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return float(max(totals)) if totals else None


def read_token_budget(metrics_path: str | Path, budget: str) -> TokenBudget:
    """GRPO's run's tokens of the kind `budget` names, from its metrics file: SRRL's budget."""
    from execrl.jsonl import read_jsonl

    check_budget(budget)
    if budget not in TOKEN_BUDGETS:
        raise ValueError(f"srrl.budget {budget!r} is not a token budget")
    key = TOKEN_BUDGETS[budget]
    total = logged_total(read_jsonl(metrics_path), key)
    if not total:
        raise ValueError(
            f"{metrics_path} logged no {key}: it is not the metrics file of a GRPO run (or one trained before "
            f"execrl logged it), so it cannot set srrl.budget: {budget}"
        )
    return TokenBudget(budget, int(total))
