"""Fixed opponents the policy is evaluated against: a uniform random player and perfect players.

An opponent is a mixed strategy: the probability of each legal move in a state it is to move in.
Sampling goes through the episode's own `random.Random`, so a game against a random or mixed
opponent is reproducible from the game's seed.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod

from execrl.games.base import Game


class Opponent(ABC):
    """A fixed player of one game."""

    def __init__(self, game: Game):
        self.game = game

    @abstractmethod
    def move_probabilities(self, state) -> dict[str, float]:
        """Each legal move's probability in `state` (this player is to move); they sum to 1."""

    def choose(self, state, rng: random.Random) -> str:
        probabilities = self.move_probabilities(state)
        moves = list(probabilities)
        return rng.choices(moves, weights=[probabilities[move] for move in moves])[0]


class RandomOpponent(Opponent):
    """Plays every legal move with equal probability."""

    def move_probabilities(self, state) -> dict[str, float]:
        moves = self.game.legal_moves(state)
        return {move: 1 / len(moves) for move in moves}


class MinimaxOpponent(Opponent):
    """A perfect player of a perfect-information game without chance after the start: it plays,
    uniformly at random, one of the moves of best game-theoretic value for it.

    Values are memoized per state (tic-tac-toe has 5,478 reachable states), so the search runs once
    per opponent and every later move is a lookup.
    """

    def __init__(self, game: Game):
        if not game.perfect_information:
            raise ValueError(f"minimax needs a perfect-information game; {game.name} hides information from its players")
        super().__init__(game)
        self._values: dict = {}

    def value(self, state) -> float:
        """Player 0's return under perfect play from `state` (player 1's is its negative: zero-sum)."""
        if state not in self._values:
            if self.game.is_terminal(state):
                self._values[state] = self.game.returns(state)[0]
            else:
                children = [self.value(self.game.apply_move(state, move)) for move in self.game.legal_moves(state)]
                self._values[state] = max(children) if self.game.current_player(state) == 0 else min(children)
        return self._values[state]

    def move_values(self, state) -> dict[str, float]:
        """Each legal move's value for the player to move."""
        sign = 1 if self.game.current_player(state) == 0 else -1
        return {move: sign * self.value(self.game.apply_move(state, move)) for move in self.game.legal_moves(state)}

    def move_probabilities(self, state) -> dict[str, float]:
        values = self.move_values(state)
        best = max(values.values())
        best_moves = [move for move, value in values.items() if value == best]
        return {move: (1 / len(best_moves) if move in best_moves else 0.0) for move in values}
