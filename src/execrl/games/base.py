"""What a two-player, zero-sum, turn-based text game provides to self-play and to its opponents.

A game is a set of pure functions of an immutable, hashable state (so a search can memoize on
states and an episode can keep every state it passed through). Moves are strings, written as the
model writes them. Chance (a card deal) happens only in `initial_state`, from the `random.Random`
passed in, so a game is reproducible from its seed.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Hashable

from execrl.games.moves import AnswerFormat

PLAYERS = (0, 1)


class IllegalMoveError(ValueError):
    """A move that the rules do not allow in the state it was played in."""


class Game(ABC):
    """A two-player zero-sum game in which the players alternate or otherwise take turns."""

    name: str
    """The game's key in `execrl.games.GAMES`."""
    title: str
    """How the prompt names the game."""
    perfect_information: bool
    """Whether each player sees the whole state (a minimax search is then a perfect player)."""

    @abstractmethod
    def initial_state(self, rng: random.Random) -> Hashable:
        """The state before the first move; any chance (a deal) is drawn from `rng`."""

    @abstractmethod
    def current_player(self, state) -> int:
        """The player (0 or 1) to move in a state that is not terminal."""

    @abstractmethod
    def legal_moves(self, state) -> tuple[str, ...]:
        """The moves of the player to move, in a fixed order; empty in a terminal state."""

    @abstractmethod
    def _next_state(self, state, move: str):
        """The state after a legal move (called by `apply_move` once the move is checked)."""

    @abstractmethod
    def is_terminal(self, state) -> bool: ...

    @abstractmethod
    def _final_returns(self, state) -> tuple[float, float]:
        """The players' returns in a terminal state (called by `returns` once terminality is checked)."""

    @abstractmethod
    def rules(self) -> str:
        """The rules as the prompt states them."""

    @abstractmethod
    def describe(self, state, player: int) -> str:
        """What `player` sees of `state` (never the opponent's hidden information), and who they are."""

    def apply_move(self, state, move: str):
        """The state after the player to move plays `move`; IllegalMoveError if the rules forbid it."""
        legal = self.legal_moves(state)
        if move not in legal:
            allowed = ", ".join(legal) or "none, the game is over"
            raise IllegalMoveError(f"{move!r} is not a legal move in this {self.title} state (legal: {allowed})")
        return self._next_state(state, move)

    def returns(self, state) -> tuple[float, float]:
        """Each player's return at the end: +1 win, 0 draw, -1 loss (zero-sum: they add up to 0)."""
        if not self.is_terminal(state):
            raise ValueError(f"{self.title} state {state!r} is not terminal: it has no returns yet")
        return self._final_returns(state)

    def compact_view(self, state, player: int) -> str:
        """What `player` sees of `state` in a compact observation (default: `describe`)."""
        return self.describe(state, player)

    def observation(self, state, player: int, answer_format: AnswerFormat = AnswerFormat(), compact: bool = False) -> str:
        """The prompt of `player`, who is to move: rules, what they see, the legal moves, the answer format.

        `compact` leaves the rules and instructions out: the game, the view, the legal moves as
        answers (a small model's context, and a small model trained on the format, need no more)."""
        if self.is_terminal(state):
            raise ValueError(f"{self.title} state {state!r} is terminal: nobody is to move")
        if player != self.current_player(state):
            raise ValueError(
                f"player {player} is not to move in {self.title} state {state!r} (player {self.current_player(state)} is)"
            )
        if compact:
            legal = " ".join(answer_format.render(move) for move in self.legal_moves(state))
            # Ends with a newline: a trailing space would merge with the answer's "[" into one
            # token when a warm start trains on prompt + answer, and the model would then answer "6]".
            return f"{self.title}, player {player}.\n{self.compact_view(state, player)}\nLegal: {legal}\nMove:\n"
        return (
            f"You are playing {self.title}.\n{self.rules()}\n\n{self.describe(state, player)}\n"
            f"It is your turn.\n{answer_format.instruction(self.legal_moves(state))}\n"
        )
