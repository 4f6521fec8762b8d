"""The code-output game's settings (`code_game` in the config): the opponent, the two prompts, how a
prediction is judged and what the policy wins or loses. The game itself is `execrl.training.code_game`.

Apart from the game, as GRPO's settings are apart from its trainer (`execrl.training.grpo_settings`): this
module imports nothing of execrl, so checking a config (`execrl.config.check_retired`, when the DAG is
planned) reads the retired opponent's message here without importing the game or the sandbox behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

OPPONENTS = ("base",)
COMPARISONS = ("normalized", "exact")
DEFAULT_PROGRAM_TEMPLATE = (
    "Write a short Python program on the task below that prints a result. Another player will read "
    "your code and try to predict exactly what it prints: make that hard, but the program must run "
    "without input and print the same output every time.\nTask: {prompt}\n"
)
DEFAULT_OPPONENT_TEMPLATE = "What does this Python program print? Answer with its exact output only.\n{code}\nOutput:\n"
POLICY_OPPONENT_RETIRED = (
    "code_game.opponent: policy is no longer an opponent: the policy's predictions were never trained, and as a "
    "wrong prediction is the policy's win, it gained by predicting worse; use base (a frozen copy of the base model)"
)


@dataclass(frozen=True)
class CodeGameSettings:
    """The opponent, its prompt and sampling, and how its predictions are judged."""

    opponent: str = "base"
    """`base`: a frozen copy of the model before training (the only opponent; see `execrl.training.code_game`)."""
    program_template: str = DEFAULT_PROGRAM_TEMPLATE
    """The policy's prompt, with {prompt} (a train problem's statement)."""
    opponent_template: str = DEFAULT_OPPONENT_TEMPLATE
    """The opponent's prompt, with {code} (the program whose output it predicts)."""
    opponent_temperature: float = 0.0
    """Sampling temperature of predictions (0: greedy)."""
    max_prediction_tokens: int = 64
    """The most tokens the opponent writes."""
    comparison: str = "normalized"
    """`normalized`: equal after collapsing runs of white space and stripping the ends; `exact`."""
    require_deterministic: bool = True
    """Run every program twice; differing outputs score as a run-time error."""
    win: float = 1.0
    """Reward when the program ran and the prediction is wrong."""
    loss: float = -1.0
    """Reward when the program ran and the prediction is right."""
    silent_loses: bool = True
    """A program that ran and printed nothing loses: empty output is the one any opponent can
    predict, though a weak opponent may never answer it (false: judge its prediction as usual)."""
    long_output_loses: bool = True
    """A program that ran and printed more than `max_prediction_tokens` tokens (its output as
    `comparison` reads it, in the policy's tokenizer) loses: the opponent cannot write a prediction
    that long, so such output could never be predicted (false: judge its prediction as usual)."""

    def __post_init__(self) -> None:
        if self.opponent == "policy":
            raise ValueError(POLICY_OPPONENT_RETIRED)
        if self.opponent not in OPPONENTS:
            raise ValueError(f"code_game.opponent must be one of {OPPONENTS}, got {self.opponent!r}")
        if self.comparison not in COMPARISONS:
            raise ValueError(f"code_game.comparison must be one of {COMPARISONS}, got {self.comparison!r}")
        for name, fields in (("program_template", ("prompt",)), ("opponent_template", ("code",))):
            template = getattr(self, name)
            try:
                template.format(**{field: "" for field in fields})
            except (KeyError, IndexError, ValueError) as error:
                raise ValueError(
                    f"code_game.{name} may use only {', '.join('{' + f + '}' for f in fields)}: {error!r}"
                ) from error
        if self.max_prediction_tokens < 1:
            raise ValueError(f"code_game.max_prediction_tokens must be at least 1, got {self.max_prediction_tokens}")
