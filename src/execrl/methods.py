"""The registry of methods and workflow rules: the one table the workflow and the report read.

Adding a method means adding a `Method` here, its training module (called by
`execrl.train_job`), and nothing in the rules: every trained method runs through the same
`train` rule, which asks this table for the method's training data and settings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    """One row of the comparison: how a policy is obtained from the base model."""

    name: str
    description: str
    trained: bool = True
    """False only for `base`, the model as given."""
    data: str = "problems"
    """What the training job reads: `problems` (online, sandbox-rewarded) or `pairs` (preference pairs)."""
    settings: tuple[str, ...] = ()
    """Config sections that reach the training job and key its checkpoints."""
    online: bool = False
    """Samples and executes code while training (needs sandbox CPUs beside the trainer)."""


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("base", "the model as given (for `tiny`, after its warm start)", trained=False),
        Method(
            "dpo",
            "TRL DPOTrainer on preference pairs of the base model's own candidates, ranked by execution",
            data="pairs",
            settings=("dpo",),
        ),
        Method(
            "grpo",
            "TRL GRPOTrainer on online samples rewarded by the sandbox",
            settings=("grpo", "rewards", "prompt", "execution"),
            online=True,
        ),
        Method(
            "srrl",
            "GRPO whose groups mix first attempts with refinements prompted by execution feedback",
            settings=("grpo", "rewards", "prompt", "execution", "srrl"),
            online=True,
        ),
    )
}


def trained_methods(names) -> list[str]:
    """The trained methods among `names`, in the order given."""
    return [name for name in names if METHODS[name].trained]


@dataclass(frozen=True)
class Rule:
    """What the report needs to know of a workflow rule."""

    stage: str
    """Resource stage (`execrl.resources`): data, generate, train, merge, execute or report."""
    phase: str
    """Where its cost is counted: data, warm start, training, evaluation or report."""
    wildcards: tuple[str, ...] = ()
    """The wildcards of its benchmark path, in order: benchmarks/{rule}/{w1}/{w2}/….tsv."""
    method: str | None = None
    """The method whose cost it is, when the rule has no method wildcard."""


_RUN = ("dataset", "model", "method", "seed")
RULES: dict[str, Rule] = {
    "prepare_dataset": Rule("data", "data", ("dataset", "split")),
    "stage_model": Rule("data", "data", ("model",)),
    "train_tokenizer": Rule("data", "warm start", ("dataset", "model")),
    "init_tiny_model": Rule("data", "warm start", ("dataset", "model")),
    "sft_tiny_model": Rule("train", "warm start", ("dataset", "model")),
    "generate_candidates": Rule("generate", "evaluation", (*_RUN, "split")),
    "annotate_candidates": Rule("execute", "evaluation", (*_RUN, "split")),
    "evaluate_pass_at_k": Rule("data", "evaluation", (*_RUN, "split")),
    "build_rl_dataset": Rule("data", "training", ("dataset", "model", "seed"), method="dpo"),
    "train": Rule("train", "training", _RUN),
    "merge_adapter": Rule("merge", "training", _RUN),
    "sample_refinements": Rule("generate", "report", _RUN),
    "analyze_diversity": Rule("report", "report", (*_RUN, "split")),
}
"""Rules whose benchmark paths carry wildcards; every other rule is a report rule without any."""


def rule_info(name: str) -> Rule:
    return RULES.get(name, Rule("report", "report"))
