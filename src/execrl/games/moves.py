"""How a move is written in a completion, and how it is read back.

The model answers in free text (it may reason first); its move is the content of the *last*
match of the answer pattern, by default the last `[...]` in brackets (TextArena's and
tinker-cookbook's convention: `[4]`, `[bet]`). The last one counts because a model that reasons
before answering mentions candidate moves on the way. The content is compared with the legal
moves ignoring case and surrounding or repeated whitespace, so `[ Bet ]` is `bet`; nothing else is
forgiven (`[04]` is not `4`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

DEFAULT_ANSWER_PATTERN = r"\[([^\[\]]*)\]"
DEFAULT_ANSWER_TEMPLATE = "[{move}]"


@dataclass(frozen=True)
class AnswerFormat:
    """The answer format: a regex whose one group captures the move, and how a move is written in it.

    `template` renders a move for the prompt (`[{move}]`); every move it renders must read back
    through `pattern`, so the prompt never asks for an answer the parser would reject. SPIRAL's
    `\\boxed{}` style, for example, is `AnswerFormat(r"\\\\boxed\\{([^{}]*)\\}", "\\\\boxed{{{move}}}")`.
    """

    pattern: str = DEFAULT_ANSWER_PATTERN
    template: str = DEFAULT_ANSWER_TEMPLATE

    def __post_init__(self) -> None:
        try:
            compiled = re.compile(self.pattern)
        except re.error as error:
            raise ValueError(f"answer pattern {self.pattern!r} is not a regular expression: {error}") from error
        if compiled.groups != 1:
            raise ValueError(f"answer pattern {self.pattern!r} must have exactly one group (the move), has {compiled.groups}")
        if "{move}" not in self.template:
            raise ValueError(f"answer template {self.template!r} must contain {{move}}")
        for move in ("4", "bet"):
            if self.extract(self.render(move)) != move:
                raise ValueError(
                    f"answer template {self.template!r} renders {move!r} as {self.render(move)!r}, "
                    f"which pattern {self.pattern!r} does not read back as {move!r}"
                )

    @cached_property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern)

    def render(self, move: str) -> str:
        return self.template.format(move=move)

    def extract(self, completion: str) -> str | None:
        """The content of the last answer in `completion`, stripped; None when there is none."""
        answers = self.regex.findall(completion)
        return answers[-1].strip() if answers else None

    def instruction(self, legal_moves: tuple[str, ...]) -> str:
        """The prompt's last lines: the legal moves as answers, and which answer counts."""
        return (
            f"Legal moves: {', '.join(self.render(move) for move in legal_moves)}\n"
            f"You may think first. End your reply with your move written as {self.render('MOVE')}; "
            f"only the last {self.render('...')} in your reply counts."
        )


def canonical(text: str) -> str:
    """A move's comparable form: case-folded, whitespace collapsed."""
    return " ".join(text.split()).casefold()


def match_legal_move(answer: str | None, legal_moves: tuple[str, ...]) -> str | None:
    """The legal move `answer` names (in the game's spelling), or None if it names none."""
    if answer is None:
        return None
    wanted = canonical(answer)
    return next((move for move in legal_moves if canonical(move) == wanted), None)


@dataclass(frozen=True)
class ParsedMove:
    """What a completion says: its answer (None: no answer at all) and the legal move it names (None: illegal)."""

    answer: str | None
    move: str | None

    @property
    def legal(self) -> bool:
        return self.move is not None


def parse_move(completion: str, legal_moves: tuple[str, ...], answer_format: AnswerFormat = AnswerFormat()) -> ParsedMove:
    answer = answer_format.extract(completion)
    return ParsedMove(answer, match_legal_move(answer, legal_moves))
