"""Playing games with a text policy: many games in lockstep, one batched policy call per round.

A *seat* is who plays a role: a policy (`policy(observations) -> completions`, batched, so a GPU
or vLLM sampler plugs in) or a fixed `Opponent`. Each round, opponents move wherever they are to
move, then every game waiting for a policy is advanced with one call per distinct policy (in
self-play, both roles of every game share one call). A policy's turn is recorded (who, the prompt,
the completion, its answer and move, legal or not), and when its game ends every turn is credited
with its player's final return, except an illegal answer: it gets `ILLEGAL_MOVE_PENALTY` (a lost
game's return), also under `illegal_move: random`, where the substitute move is played and the game
goes on. Credited with the final return, an illegal answer whose random substitute went on to win
would be trained as a good reply.

Each game draws its chance (the deal), its random opponent moves and its random substitutes from
its own `random.Random(f"{seed}/{index}")`, so a game is reproducible from the seed and its index
whatever else is in the batch.

On several training processes a policy call can be a collective: under DeepSpeed ZeRO-3 each call
gathers the sharded weights, and a tensor-parallel vLLM runs one call over a group of processes.
Every process must then make the same number of calls, although its games last a different number
of rounds. `Lockstep` keeps them in step: before each round the processes agree whether any of them
still has a game to play, and a process whose games are over makes a one-prompt padding call
(discarded) while the others play.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.games.base import Game
from execrl.games.moves import AnswerFormat, parse_move
from execrl.games.opponents import Opponent

ILLEGAL_MOVE_RULES = ("lose", "random")
ILLEGAL_MOVE_PENALTY = -1.0
"""The reward of a turn whose answer named no legal move: a lost game's return, whatever the game's outcome."""
OBSERVATIONS = ("full", "compact")


@dataclass(frozen=True)
class Sampled:
    """A completion with what its sampler returned beside the text (token ids, log-probabilities),
    kept on its turn so a trainer needs no retokenization."""

    text: str
    payload: Any = None


Policy = Callable[[list[str]], Sequence[str | Sampled]]
"""Prompts in, one completion per prompt out (a plain string, or `Sampled` to keep token ids)."""


@dataclass(frozen=True)
class MatchRules:
    """How games are refereed, whatever the game."""

    max_turns: int = 50
    """Moves (both players') after which an unfinished game stops as a draw."""
    illegal_move: str = "lose"
    """A completion without a legal move: `lose` (its player loses at once) or `random` (a random
    legal move is played in its place; the turn is still recorded as illegal)."""
    answer_format: AnswerFormat = field(default_factory=AnswerFormat)
    observation: str = "full"
    """`full` (the rules, the view, the legal moves and how to answer) or `compact` (the view and
    the legal moves only)."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.illegal_move not in ILLEGAL_MOVE_RULES:
            raise ValueError(f"illegal_move must be one of {ILLEGAL_MOVE_RULES}, got {self.illegal_move!r}")
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, got {self.observation!r}")


@dataclass(frozen=True)
class Turn:
    """One move a policy made."""

    player: int
    observation: str
    """The prompt the policy saw."""
    completion: str
    answer: str | None
    """The completion's last answer (`[...]`), None when it gave none."""
    move: str | None
    """The move played: the legal move the answer names, or under `illegal_move: random` the
    substitute; None when an illegal answer lost the game."""
    legal: bool
    """Whether the answer named a legal move."""
    reward: float
    """The final return of this turn's player (+1 win, 0 draw, -1 loss); `ILLEGAL_MOVE_PENALTY` when
    the answer was illegal."""
    payload: Any = None
    """What the sampler returned beside the text (`Sampled.payload`), if anything."""


@dataclass(frozen=True)
class Episode:
    """One finished game and the turns its policies took."""

    game: str
    seed: str
    """The label of the game's random generator (`{seed}/{index}`)."""
    policy_roles: tuple[int, ...]
    """The roles a policy played: both in self-play, one against an opponent."""
    turns: tuple[Turn, ...]
    """The policies' turns in order (an opponent's moves are in `final_state`, not here)."""
    returns: tuple[float, float]
    final_state: Any
    forfeited_by: int | None = None
    """The player whose illegal answer lost the game, if one did."""
    truncated: bool = False
    """Stopped as a draw after `max_turns` moves."""

    def turns_of(self, player: int) -> tuple[Turn, ...]:
        return tuple(turn for turn in self.turns if turn.player == player)


class _Table:
    """One game in progress."""

    def __init__(self, game: Game, seats: tuple, seed: str, rules: MatchRules):
        if len(seats) != 2:
            raise ValueError(f"a game has two seats, got {len(seats)}")
        for seat in seats:
            if isinstance(seat, Opponent):
                if seat.game.name != game.name:
                    raise ValueError(f"an opponent of {seat.game.name} cannot play {game.name}")
            elif not callable(seat):
                raise TypeError(f"a seat is a policy (a callable) or an Opponent, got {type(seat).__name__}")
        self.game, self.seats, self.seed, self.rules = game, seats, seed, rules
        self.rng = random.Random(seed)
        self.state = game.initial_state(self.rng)
        self.turns: list[dict] = []
        self.moves = 0
        self.forfeited_by: int | None = None
        self.truncated = False

    @property
    def done(self) -> bool:
        return self.forfeited_by is not None or self.truncated or self.game.is_terminal(self.state)

    @property
    def player(self) -> int:
        return self.game.current_player(self.state)

    @property
    def seat(self):
        return self.seats[self.player]

    def play_opponents(self) -> None:
        while not self.done and isinstance(self.seat, Opponent):
            self._move(self.seat.choose(self.state, self.rng))

    def observation(self) -> str:
        return self.game.observation(self.state, self.player, self.rules.answer_format, self.rules.observation == "compact")

    def play_completion(self, observation: str, completion) -> None:
        text, payload = completion_text(completion), getattr(completion, "payload", None)
        legal_moves = self.game.legal_moves(self.state)
        parsed = parse_move(text, legal_moves, self.rules.answer_format)
        move = parsed.move
        if move is None and self.rules.illegal_move == "random":
            move = self.rng.choice(legal_moves)
        self.turns.append(
            dict(player=self.player, observation=observation, completion=text, answer=parsed.answer,
                 move=move, legal=parsed.legal, payload=payload)
        )  # fmt: skip
        if move is None:
            self.forfeited_by = self.player
        else:
            self._move(move)

    def _move(self, move: str) -> None:
        self.state = self.game.apply_move(self.state, move)
        self.moves += 1
        if not self.game.is_terminal(self.state) and self.moves >= self.rules.max_turns:
            self.truncated = True

    def returns(self) -> tuple[float, float]:
        if self.forfeited_by is not None:
            return (-1.0, 1.0) if self.forfeited_by == 0 else (1.0, -1.0)
        if self.truncated:
            return (0.0, 0.0)
        return self.game.returns(self.state)

    def episode(self) -> Episode:
        returns = self.returns()
        return Episode(
            game=self.game.name,
            seed=self.seed,
            policy_roles=tuple(role for role, seat in enumerate(self.seats) if not isinstance(seat, Opponent)),
            turns=tuple(
                Turn(**turn, reward=returns[turn["player"]] if turn["legal"] else ILLEGAL_MOVE_PENALTY) for turn in self.turns
            ),
            returns=returns,
            final_state=self.state,
            forfeited_by=self.forfeited_by,
            truncated=self.truncated,
        )


def completion_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sampled):
        return completion.text
    raise TypeError(f"a policy returns str or Sampled completions, got {type(completion).__name__}")


class Lockstep:
    """Keeps several processes' calls of one policy in step (see the module's docstring).

    `any_active(mine)` is a collective that every process calls at the same point: it returns
    whether any process passed True. Every process must run the same sequence of
    `play_matches(..., lockstep=)` and `idle()` calls with it.
    """

    def __init__(self, policy: Policy, any_active: Callable[[bool], bool], padding_prompt: str):
        self.policy = policy
        self.any_active = any_active
        self.padding_prompt = padding_prompt
        self.padding_calls = 0
        """Calls this process made only to keep in step (their completions are discarded)."""

    def pad(self) -> None:
        self.policy([self.padding_prompt])
        self.padding_calls += 1

    def idle(self) -> None:
        """Take part in the other processes' rounds, with padding calls, until none has a game left."""
        while self.any_active(False):
            self.pad()


def play_matches(
    game: Game, matches: Sequence[tuple], seed: int | str, rules: MatchRules = MatchRules(), lockstep: Lockstep | None = None
) -> list[Episode]:
    """Play one game per `(seat of player 0, seat of player 1)` in `matches`, all in lockstep.

    Game i draws its randomness from `random.Random(f"{seed}/{i}")`. Each round makes one call
    per distinct policy, with the prompts of every game where that policy is to move. With a
    `lockstep`, its policy is the only one, and every round is agreed with the other processes.
    """
    tables = [_Table(game, tuple(seats), f"{seed}/{index}", rules) for index, seats in enumerate(matches)]
    if lockstep is not None:
        for table in tables:
            for seat in table.seats:
                if not isinstance(seat, Opponent) and seat is not lockstep.policy:
                    raise ValueError("under a lockstep every policy seat is the lockstep's policy")
    while True:
        for table in tables:
            table.play_opponents()
        waiting = [table for table in tables if not table.done]
        if lockstep is not None and lockstep.any_active(bool(waiting)) and not waiting:
            lockstep.pad()
            continue
        if not waiting:
            return [table.episode() for table in tables]
        by_policy: dict[int, list[_Table]] = {}
        for table in waiting:
            by_policy.setdefault(id(table.seat), []).append(table)
        for group in by_policy.values():
            policy = group[0].seat
            observations = [table.observation() for table in group]
            completions = list(policy(observations))
            if len(completions) != len(observations):
                raise ValueError(f"the policy returned {len(completions)} completions for {len(observations)} prompts")
            for table, observation, completion in zip(group, observations, completions, strict=True):
                table.play_completion(observation, completion)


def play_against(
    game: Game, policy: Policy, opponent: Opponent, role: int, games: int, seed: int | str, rules: MatchRules = MatchRules()
) -> list[Episode]:
    """`games` games of `policy` playing `role` against `opponent`."""
    if role not in (0, 1):
        raise ValueError(f"role must be 0 or 1, got {role!r}")
    seats = (policy, opponent) if role == 0 else (opponent, policy)
    return play_matches(game, [seats] * games, seed, rules)


@dataclass(frozen=True)
class MatchStats:
    """A policy's record against an opponent: outcomes per game, illegal answers per turn."""

    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    forfeits: int = 0
    """Games the policy lost by an illegal answer (under `illegal_move: lose`)."""
    turns: int = 0
    illegal_moves: int = 0

    def __add__(self, other: MatchStats) -> MatchStats:
        return MatchStats(*(getattr(self, name) + getattr(other, name) for name in self.__dataclass_fields__))

    def rates(self) -> dict[str, float]:
        """win_rate, draw_rate, loss_rate, forfeit_rate (per game) and illegal_move_rate (per turn)."""
        per_game = max(self.games, 1)
        return {
            "win_rate": self.wins / per_game,
            "draw_rate": self.draws / per_game,
            "loss_rate": self.losses / per_game,
            "forfeit_rate": self.forfeits / per_game,
            "illegal_move_rate": self.illegal_moves / max(self.turns, 1),
        }


def match_stats(episodes: Sequence[Episode]) -> MatchStats:
    """The record of the policy in episodes against a fixed opponent (one policy role each)."""
    stats = MatchStats()
    for episode in episodes:
        if len(episode.policy_roles) != 1:
            raise ValueError(
                f"episode {episode.seed} is self-play (policy roles {episode.policy_roles}): it has no opponent to score against"
            )
        role = episode.policy_roles[0]
        outcome = episode.returns[role]
        stats += MatchStats(
            games=1,
            wins=int(outcome > 0),
            draws=int(outcome == 0),
            losses=int(outcome < 0),
            forfeits=int(episode.forfeited_by == role),
            turns=len(episode.turns),
            illegal_moves=sum(not turn.legal for turn in episode.turns),
        )
    return stats
