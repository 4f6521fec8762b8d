"""Two-player zero-sum text games for self-play (SPIRAL), and the fixed opponents that evaluate a policy.

    GAMES["tictactoe"], GAMES["kuhn_poker"]         the games (stateless; states are values)
    make_opponent("random" | "perfect", game)       an evaluation opponent
    parse_move(completion, legal_moves, format)     a completion's move (`execrl.games.moves`)

The engines only: the rules, the fixed opponents and how matches are played (`play`). The methods
that train on games are trainers (`execrl.training.spiral` and `execrl.training.spiral_trainer` for SPIRAL,
`execrl.training.code_game` for the code-output game), built on these.
"""

from __future__ import annotations

from execrl.games.base import PLAYERS, Game, IllegalMoveError
from execrl.games.kuhn_poker import KuhnNashOpponent, KuhnPoker
from execrl.games.moves import AnswerFormat, ParsedMove, parse_move
from execrl.games.opponents import MinimaxOpponent, Opponent, RandomOpponent
from execrl.games.tictactoe import TicTacToe

GAMES: dict[str, Game] = {game.name: game for game in (TicTacToe(), KuhnPoker())}

OPPONENT_KINDS = ("random", "perfect")
PERFECT_OPPONENTS = {"tictactoe": MinimaxOpponent, "kuhn_poker": KuhnNashOpponent}
"""Each game's perfect player: minimax where the players see everything, an equilibrium otherwise."""


def get_game(name: str) -> Game:
    if name not in GAMES:
        raise ValueError(f"unknown game {name!r} (known: {', '.join(GAMES)})")
    return GAMES[name]


def make_opponent(kind: str, game: Game) -> Opponent:
    """The `random` or `perfect` opponent of `game`."""
    if kind == "random":
        return RandomOpponent(game)
    if kind == "perfect":
        return PERFECT_OPPONENTS[game.name](game)
    raise ValueError(f"unknown opponent {kind!r} (known: {', '.join(OPPONENT_KINDS)})")


__all__ = [
    "GAMES",
    "OPPONENT_KINDS",
    "PERFECT_OPPONENTS",
    "PLAYERS",
    "AnswerFormat",
    "Game",
    "IllegalMoveError",
    "KuhnNashOpponent",
    "KuhnPoker",
    "MinimaxOpponent",
    "Opponent",
    "ParsedMove",
    "RandomOpponent",
    "TicTacToe",
    "get_game",
    "make_opponent",
    "parse_move",
]
