"""Kuhn poker, one hand: the deck is J < Q < K, each player antes 1 chip and is dealt one card.

Player 0 acts first: `check` or `bet` (1 chip). After a check, player 1 may `check` (showdown) or
`bet`; facing a bet, a player may `call` (showdown) or `fold` (the bettor takes the pot). At the
showdown the higher card takes the pot. The chips won are +-1 (check-check, or a fold) or +-2 (a
called bet); a game's return is the sign of its chips (+1 win, -1 loss; a hand is never drawn), as
for every game here. SPIRAL's KuhnPoker-v1 plays 5 hands and scores the chip total; this is one.

`KuhnNashOpponent` plays Kuhn's (1950) equilibrium, which maximizes expected *chips*, the game's
usual objective: it guarantees player 0 at least -1/18 chip per hand and player 1 at least +1/18,
whatever the other does. Maximizing the win rate (the return) is a different objective, so the
equilibrium is the perfect opponent in chips, not necessarily in wins.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from execrl.games.base import Game
from execrl.games.opponents import Opponent

CARDS = ("J", "Q", "K")
ANTE = 1
BET = 1
TERMINAL_HISTORIES = (
    ("check", "check"),
    ("bet", "call"),
    ("bet", "fold"),
    ("check", "bet", "call"),
    ("check", "bet", "fold"),
)
PAST_TENSE = {"check": "checked", "bet": "bet", "call": "called", "fold": "folded"}


@dataclass(frozen=True)
class KuhnState:
    cards: tuple[int, int]
    """Each player's card: 0 = J, 1 = Q, 2 = K."""
    history: tuple[str, ...] = ()
    """The moves so far; player 0 made the even-numbered ones."""

    def __post_init__(self) -> None:
        if len(self.cards) != 2 or self.cards[0] == self.cards[1] or not set(self.cards) <= {0, 1, 2}:
            raise ValueError(f"Kuhn poker deals two different cards of 0 (J), 1 (Q), 2 (K), got {self.cards!r}")


def stakes(history: tuple[str, ...]) -> tuple[int, int]:
    """Chips each player has put in the pot after `history`."""
    stake = [ANTE, ANTE]
    for turn, move in enumerate(history):
        if move in ("bet", "call"):
            stake[turn % 2] += BET
    return stake[0], stake[1]


class KuhnPoker(Game):
    name = "kuhn_poker"
    title = "Kuhn poker"
    perfect_information = False

    def initial_state(self, rng: random.Random) -> KuhnState:
        first, second = rng.sample(range(len(CARDS)), 2)
        return KuhnState(cards=(first, second))

    def current_player(self, state: KuhnState) -> int:
        return len(state.history) % 2

    def legal_moves(self, state: KuhnState) -> tuple[str, ...]:
        if self.is_terminal(state):
            return ()
        return ("call", "fold") if "bet" in state.history else ("check", "bet")

    def _next_state(self, state: KuhnState, move: str) -> KuhnState:
        return KuhnState(state.cards, state.history + (move,))

    def is_terminal(self, state: KuhnState) -> bool:
        return state.history in TERMINAL_HISTORIES

    def chips(self, state: KuhnState) -> tuple[int, int]:
        """The chips each player wins (+) or loses (-) in a finished hand."""
        if not self.is_terminal(state):
            raise ValueError(f"Kuhn poker hand {state!r} is not over: no chips are won yet")
        stake = stakes(state.history)
        if state.history[-1] == "fold":
            folder = (len(state.history) - 1) % 2
            taker = 1 - folder
        else:
            taker = 0 if state.cards[0] > state.cards[1] else 1
        won = stake[1 - taker]
        return (won, -won) if taker == 0 else (-won, won)

    def _final_returns(self, state: KuhnState) -> tuple[float, float]:
        first, second = self.chips(state)
        return (1.0, -1.0) if first > second else (-1.0, 1.0)

    def rules(self) -> str:
        return (
            "The deck has three cards: J, Q and K (J lowest, K highest). Each player puts 1 chip in the pot "
            "and is dealt one card, which the other player cannot see. Player 0 acts first and may check or "
            "bet (put 1 more chip in the pot). After a check, player 1 may check (then the cards are shown) "
            "or bet. A player facing a bet may call (put in 1 chip; then the cards are shown) or fold (give "
            "up the pot to the bettor). When the cards are shown, the higher card takes the pot. "
            "You win the game if you end the hand with more chips than you started with."
        )

    def describe(self, state: KuhnState, player: int) -> str:
        stake = stakes(state.history)
        betting = "; ".join(f"player {turn % 2} {PAST_TENSE[move]}" for turn, move in enumerate(state.history))
        return (
            f"You are player {player}. Your card is {CARDS[state.cards[player]]}.\n"
            f"Betting so far: {betting or 'none, you act first'}.\n"
            f"The pot holds {sum(stake)} chips, {stake[player]} of them yours."
        )


class KuhnNashOpponent(Opponent):
    """Kuhn's equilibrium strategy; `alpha` in [0, 1/3] picks one of the family of equilibria.

    Player 0 bets a J with probability alpha, a K with 3*alpha, never a Q; facing a bet after
    checking it folds a J, calls a Q with probability alpha + 1/3 and calls a K. Player 1 facing
    a bet calls a K, calls a Q with probability 1/3, folds a J; after a check it bets a K, bets a J
    with probability 1/3 and checks a Q. It reads only its own card and the betting.
    """

    def __init__(self, game: KuhnPoker, alpha: float = 1 / 6):
        if not isinstance(game, KuhnPoker):
            raise ValueError(f"the Kuhn poker equilibrium plays Kuhn poker, not {game.name}")
        if not 0 <= alpha <= 1 / 3:
            raise ValueError(f"alpha must be in [0, 1/3] for an equilibrium, got {alpha}")
        super().__init__(game)
        self.alpha = alpha

    def aggression(self, card: int, history: tuple[str, ...]) -> float:
        """Probability of the aggressive move (bet, or call when facing a bet)."""
        a = self.alpha
        table = {
            (): (a, 0.0, 3 * a),  # player 0 opens: bet
            ("check", "bet"): (0.0, a + 1 / 3, 1.0),  # player 0 faces a bet: call
            ("bet",): (0.0, 1 / 3, 1.0),  # player 1 faces a bet: call
            ("check",): (1 / 3, 0.0, 1.0),  # player 1 after a check: bet
        }
        return table[history][card]

    def move_probabilities(self, state: KuhnState) -> dict[str, float]:
        aggressive, passive = ("call", "fold") if "bet" in state.history else ("bet", "check")
        p = self.aggression(state.cards[self.game.current_player(state)], state.history)
        return {aggressive: p, passive: 1 - p}
