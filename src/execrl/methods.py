"""The registry of methods and workflow rules: the one table the workflow and the report read.

Adding a method means adding a `Method` here, its training module (called by
`execrl.training.train_job`), and nothing in the rules: every trained method runs through the same
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
    panels: tuple[tuple[str, str], ...] = ()
    """(logged metric, panel title) of the method's own training figure (none: no such figure)."""
    figure_caption: str = ""
    """The caption of that figure in the report."""
    variant_of: str | None = None
    """For a config's method variant (`method_variants`): the registry method it trains as."""


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("base", "the model as given (for `tiny`, after its warm start)", trained=False),
        Method(
            "dpo",
            "TRL DPOTrainer on preference pairs of the base model's own candidates, ranked by execution",
            data="pairs",
            # prompt and execution: its interval evaluation prompts and runs held-out problems.
            settings=("dpo", "prompt", "execution"),
        ),
        Method(
            "grpo",
            "TRL GRPOTrainer on online samples rewarded by the sandbox",
            settings=("grpo", "rewards", "prompt", "execution", "watch"),
            online=True,
        ),
        Method(
            "srrl",
            "GRPO whose groups mix first attempts with refinements prompted by execution feedback",
            settings=("grpo", "rewards", "prompt", "execution", "srrl", "watch"),
            online=True,
        ),
        Method(
            "exec",
            "TRL GRPOTrainer rewarded for running as a program (seed 002's execution reward; no tests)",
            settings=("grpo", "exec", "prompt", "execution"),
            online=True,
            panels=(
                ("program/run_rate", "programs that ran"),
                ("program/printed_rate", "programs that ran and printed"),
                ("program/syntax_error_rate", "syntax errors"),
                ("program/output_chars", "characters printed (programs that ran)"),
            ),
            figure_caption=(
                "exec: what the sampled programs did when run without tests, per training step — the share that "
                "ran to their end, that also printed, that did not compile, and how much they printed."
            ),
        ),
        Method(
            "code_game",
            "TRL GRPOTrainer on the code-output game: rewarded when an opponent mispredicts the program's output",
            settings=("grpo", "exec", "code_game", "prompt", "execution"),
            online=True,
            panels=(
                ("code_game/opponent_accuracy", "opponent's accuracy (programs that ran)"),
                ("program/run_rate", "programs that ran"),
                ("program/output_chars", "characters printed (programs that ran)"),
                ("code_game/long_output_rate", "output longer than the opponent may write"),
                ("code_game/reward", "game reward"),
            ),
            figure_caption=(
                "code_game: per training step, how often the opponent predicted the output of the policy's programs "
                "that ran, the share of programs that ran (deterministically), how much they printed, the share whose output "
                "was longer than the opponent may write (a loss), and the mean reward (+1 a wrong prediction, -1 a "
                "right one or too long an output, the execution reward for programs that did not run)."
            ),
        ),
        Method(
            "spiral",
            "SPIRAL self-play on a text game (tic-tac-toe, Kuhn poker), role-conditioned advantages, TRL's GRPO loss",
            settings=("grpo", "spiral", "prompt", "execution"),
            online=True,
            panels=(
                ("spiral/eval/random/win_rate", "win rate against a random player"),
                ("spiral/eval/perfect/win_rate", "win rate against a perfect player"),
                ("spiral/eval/perfect/draw_rate", "draw rate against a perfect player"),
                ("spiral/self_play/illegal_move_rate", "illegal moves in self-play"),
                ("spiral/self_play/role0_return", "self-play return of the first player"),
                ("spiral/baseline/role0", "role baseline of the first player"),
            ),
            figure_caption=(
                "spiral: the policy against fixed opponents (a uniformly random player and a perfect one, in both "
                "roles, the same deals at every evaluation), its illegal-move rate in self-play, the first player's "
                "self-play return and that role's running baseline (role-conditioned advantage estimation subtracts "
                "it from every return of the role)."
            ),
        ),
    )
}


def trained_methods(names, rows: dict[str, Method] | None = None) -> list[str]:
    """The trained methods among `names`, in the order given (`rows`: the registry with a config's
    variants, `execrl.training_settings.method_rows`)."""
    rows = METHODS if rows is None else rows
    return [name for name in names if rows[name].trained]


def with_variants(variants: dict) -> dict[str, Method]:
    """The registry's methods plus a config's `method_variants`, each a row of its base method
    under the variant's name."""
    rows = dict(METHODS)
    for name, variant in variants.items():
        base = METHODS[variant["method"]]
        rows[name] = Method(**{**base.__dict__, "name": name, "variant_of": base.name})
    return rows


def register_variants(variants: dict) -> None:
    """Add a config's `method_variants` to METHODS, in a process that reads one config only (the
    report's scripts), so that a variant is looked up as the method it trains as."""
    METHODS.update(with_variants(variants))


@dataclass(frozen=True)
class Rule:
    """What the report needs to know of a workflow rule."""

    stage: str
    """Resource stage (`execrl.planning.resources`): data, generate, train, merge, execute or report."""
    phase: str
    """Where its cost is counted: data, warm start, training, evaluation or report."""
    wildcards: tuple[str, ...] = ()
    """The wildcards of its benchmark path, in order: benchmarks/{rule}/{w1}/{w2}/….tsv."""
    method: str | None = None
    """The method whose cost it is, when the rule has no method wildcard."""


_RUN = ("dataset", "model", "method", "seed")
RULES: dict[str, Rule] = {
    "prepare_dataset": Rule("data", "data", ("dataset", "split")),
    "prepare_alternatives": Rule("data", "data", ("dataset", "split")),
    "stage_model": Rule("data", "data", ("model",)),
    "train_tokenizer": Rule("data", "warm start", ("dataset", "model")),
    "init_tiny_model": Rule("data", "warm start", ("dataset", "model")),
    "sft_tiny_model": Rule("train", "warm start", ("dataset", "model")),
    "generate_candidates": Rule("generate", "evaluation", (*_RUN, "split")),
    "annotate_candidates": Rule("execute", "evaluation", (*_RUN, "split")),
    "evaluate_pass_at_k": Rule("data", "evaluation", (*_RUN, "split")),
    "make_plus_tests": Rule("execute", "data", ("dataset", "plus", "split")),
    "annotate_plus_tests": Rule("execute", "evaluation", (*_RUN, "split")),
    "evaluate_pass_at_k_plus": Rule("data", "evaluation", (*_RUN, "split")),
    "build_rl_dataset": Rule("data", "training", ("dataset", "model", "pairs", "seed"), method="dpo"),
    "train": Rule("train", "training", _RUN),
    "merge_adapter": Rule("merge", "training", _RUN),
    "sample_refinements": Rule("generate", "report", _RUN),
    "analyze_diversity": Rule("report", "report", (*_RUN, "split")),
    "plot_method_metrics": Rule("report", "report", ("method",)),
}
"""Rules whose benchmark paths carry wildcards; every other rule is a report rule without any."""


def rule_info(name: str) -> Rule:
    return RULES.get(name, Rule("report", "report"))
