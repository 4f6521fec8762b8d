"""Tic-tac-toe: player 0 plays X and moves first, player 1 plays O; moves are cell numbers 0-8.

    0 | 1 | 2
    3 | 4 | 5
    6 | 7 | 8
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from execrl.games.base import Game

CELLS = 9
MARKS = ("X", "O")
WIN_LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),  # rows
    (0, 3, 6), (1, 4, 7), (2, 5, 8),  # columns
    (0, 4, 8), (2, 4, 6),  # diagonals
)  # fmt: skip


@dataclass(frozen=True)
class TicTacToeState:
    board: tuple[int | None, ...] = (None,) * CELLS
    """Cell i holds the player whose mark is there, or None when it is empty."""

    def __post_init__(self) -> None:
        if len(self.board) != CELLS or any(cell not in (None, 0, 1) for cell in self.board):
            raise ValueError(f"a tic-tac-toe board is {CELLS} cells of None, 0 or 1, got {self.board!r}")


def winner(board: tuple[int | None, ...]) -> int | None:
    """The player with three in a row, or None."""
    for a, b, c in WIN_LINES:
        if board[a] is not None and board[a] == board[b] == board[c]:
            return board[a]
    return None


class TicTacToe(Game):
    name = "tictactoe"
    title = "Tic-tac-toe"
    perfect_information = True

    def initial_state(self, rng: random.Random | None = None) -> TicTacToeState:
        return TicTacToeState()

    def current_player(self, state: TicTacToeState) -> int:
        # X moves first, so the marks on the board say whose turn it is.
        return sum(cell is not None for cell in state.board) % 2

    def legal_moves(self, state: TicTacToeState) -> tuple[str, ...]:
        if self.is_terminal(state):
            return ()
        return tuple(str(i) for i, cell in enumerate(state.board) if cell is None)

    def _next_state(self, state: TicTacToeState, move: str) -> TicTacToeState:
        board = list(state.board)
        board[int(move)] = self.current_player(state)
        return TicTacToeState(tuple(board))

    def is_terminal(self, state: TicTacToeState) -> bool:
        return winner(state.board) is not None or all(cell is not None for cell in state.board)

    def _final_returns(self, state: TicTacToeState) -> tuple[float, float]:
        won = winner(state.board)
        if won is None:
            return (0.0, 0.0)
        return (1.0, -1.0) if won == 0 else (-1.0, 1.0)

    def rules(self) -> str:
        return (
            "Two players take turns marking an empty cell of a 3x3 grid; player 0 plays X and moves first, "
            "player 1 plays O. The first to get three marks in a row (a row, a column or a diagonal) wins; "
            "a full grid without three in a row is a draw. A move is the number of an empty cell (0-8)."
        )

    def rows(self, state: TicTacToeState) -> list[str]:
        return [
            " | ".join(MARKS[state.board[i]] if state.board[i] is not None else str(i) for i in range(row, row + 3))
            for row in (0, 3, 6)
        ]

    def compact_view(self, state: TicTacToeState, player: int) -> str:
        return f"You play {MARKS[player]}.\n" + "\n".join(self.rows(state))

    def describe(self, state: TicTacToeState, player: int) -> str:
        board = "\n---------\n".join(self.rows(state))
        return (
            f"You are player {player} and play {MARKS[player]}; your opponent plays {MARKS[1 - player]}.\n"
            f"The board (empty cells show their number):\n{board}"
        )
