"""SPIRAL (arXiv 2506.24119): self-play on zero-sum text games with role-conditioned advantages.

One policy plays both roles of a two-player zero-sum game (`execrl.games`). Every turn is a
training sample: its prompt is the observation of the player to move, its completion the model's
reply, and its return the final outcome of that player's game (+1 / 0 / -1), or -1 for an illegal
answer whatever the game's outcome (under `illegal_move: lose` it loses the game; under `random` a
random legal move is played for it, and the game goes on). Role-conditioned advantage estimation (RAE) subtracts from that return a running baseline
of the same game and role, because roles are not symmetric (the first mover of tic-tac-toe wins
more often): without it, a role's expected return would be credited to its every move.

What a trainer calls, per step and process:

    settings = SPIRALSettings(...)
    game, rules = get_game(settings.game), settings.match_rules()
    episodes = play_self_play(game, policy, settings.per_process_games(processes),
                              self_play_seed(settings.seed, step, rank), rules)
    advantages = role_conditioned_advantages(episodes, baselines)   # baselines: RoleBaselines
    # train on (turn.observation, turn.completion, advantage) of every turn of every episode;
    # keep baselines.state_dict() in each checkpoint and load it on resume.
    metrics = evaluate_policy(game, policy, settings.eval_opponents, settings.eval_games, seed, rules)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from execrl.games import GAMES, OPPONENT_KINDS, Game, get_game, make_opponent
from execrl.games.moves import DEFAULT_ANSWER_PATTERN, DEFAULT_ANSWER_TEMPLATE, AnswerFormat
from execrl.games.play import (
    Episode,
    Lockstep,
    MatchRules,
    MatchStats,
    Policy,
    Sampled,
    Turn,
    match_stats,
    play_against,
    play_matches,
)

__all__ = [
    "Episode",
    "Lockstep",
    "MatchRules",
    "MatchStats",
    "RoleBaselines",
    "SPIRALSettings",
    "Sampled",
    "Turn",
    "evaluate_policy",
    "get_game",
    "match_stats",
    "play_against",
    "play_self_play",
    "role_conditioned_advantages",
    "self_play_seed",
]


@dataclass(frozen=True)
class SPIRALSettings:
    """What SPIRAL adds to GRPO's settings (the `grpo` section holds the optimiser, sampling, steps
    and checkpoints): the game, self-play, the role baselines and the evaluation against fixed opponents."""

    game: str = "tictactoe"
    """The game trained on: a key of `execrl.games.GAMES` (`tictactoe`, `kuhn_poker`)."""
    games_per_step: int = 16
    """Self-play games per round over all training processes (each plays games_per_step / N of
    them); a step plays rounds until it has at least the step's completions in turns, and trains on
    a seeded draw of exactly that many turns of both roles."""
    max_turns: int = 50
    """Moves after which an unfinished game stops as a draw (SPIRAL's truncation)."""
    baseline_decay: float = 0.95
    """Decay of each (game, role) baseline's exponential moving average (the paper's alpha)."""
    illegal_move: str = "lose"
    """A reply without a legal move: `lose` (its player loses, the other wins) or `random` (a random
    legal move is played instead and the game goes on; the turn still counts as illegal in the
    metrics, and its reward is the illegal-move penalty, -1, not the game's return)."""
    answer_pattern: str = DEFAULT_ANSWER_PATTERN
    """Regex with one group, the move; the last match in a reply is its answer."""
    answer_template: str = DEFAULT_ANSWER_TEMPLATE
    """How the prompt writes a move ({move}); must read back through `answer_pattern`."""
    observation: str = "full"
    """The prompt of a turn: `full` (rules, view, legal moves, how to answer, as SPIRAL's) or
    `compact` (the view and the legal moves: for small models with a short context)."""
    eval_every: int = 25
    """Evaluate against the fixed opponents before the first step, every this many steps and after
    the last (0: never)."""
    eval_games: int = 16
    """Evaluation games per opponent and per role."""
    eval_opponents: tuple[str, ...] = OPPONENT_KINDS
    """Fixed opponents of the evaluation: `random` (uniform legal moves) and `perfect` (minimax for
    tic-tac-toe, Kuhn's equilibrium for Kuhn poker)."""
    eval_temperature: float = 0.2
    """Sampling temperature of the evaluation (0: greedy)."""

    def __post_init__(self) -> None:
        # JSON settings give lists; keep the dataclass hashable and immutable.
        object.__setattr__(self, "eval_opponents", tuple(self.eval_opponents))
        if self.game not in GAMES:
            raise ValueError(f"spiral.game must be one of {tuple(GAMES)}, got {self.game!r}")
        if self.games_per_step < 1:
            raise ValueError(f"spiral.games_per_step must be at least 1, got {self.games_per_step}")
        for name in ("eval_every", "eval_games"):
            if getattr(self, name) < 0:
                raise ValueError(f"spiral.{name} must be at least 0, got {getattr(self, name)}")
        if not 0 < self.baseline_decay < 1:
            raise ValueError(f"spiral.baseline_decay must be in (0, 1), got {self.baseline_decay}")
        if self.eval_temperature < 0:
            raise ValueError(f"spiral.eval_temperature must be at least 0, got {self.eval_temperature}")
        unknown = [kind for kind in self.eval_opponents if kind not in OPPONENT_KINDS]
        if unknown:
            raise ValueError(
                f"spiral.eval_opponents: unknown {', '.join(map(repr, unknown))} (known: {', '.join(OPPONENT_KINDS)})"
            )
        self.match_rules()  # max_turns, illegal_move and the answer format, checked where they are used

    def match_rules(self) -> MatchRules:
        return MatchRules(
            self.max_turns, self.illegal_move, AnswerFormat(self.answer_pattern, self.answer_template), self.observation
        )

    def per_process_games(self, processes: int) -> int:
        """Self-play games each of `processes` training processes plays per step."""
        if self.games_per_step % processes:
            raise ValueError(
                f"spiral.games_per_step ({self.games_per_step}) must be a multiple of the training processes ({processes})"
            )
        return self.games_per_step // processes


def self_play_seed(seed: int, step: int, rank: int = 0) -> str:
    """The seed of one process's games at one step: every step and process deals other cards."""
    return f"{seed}/step{step}/rank{rank}"


def play_self_play(
    game: Game, policy: Policy, games: int, seed: int | str, rules: MatchRules = MatchRules(), lockstep: Lockstep | None = None
) -> list[Episode]:
    """`games` games of `policy` against itself; every round is one batched call with both roles' prompts."""
    return play_matches(game, [(policy, policy)] * games, seed, rules, lockstep)


def evaluate_policy(
    game: Game,
    policy: Policy,
    opponent_kinds: Sequence[str],
    games_per_role: int,
    seed: int | str,
    rules: MatchRules = MatchRules(),
    lockstep: Lockstep | None = None,
) -> dict[str, float]:
    """The policy's record against each fixed opponent, `games_per_role` games in each role.

    Keys: `{opponent}/{rate}` over both roles and `{opponent}/role{r}/{rate}`, for the rates of
    `MatchStats.rates` (win, draw, loss and forfeit rates per game, illegal-move rate per turn).
    All matches are played in lockstep: each round is one batched policy call. Pass the same
    `seed` at every evaluation, so that every checkpoint meets the same deals and opponent draws.
    """
    matchups = [(kind, role) for kind in opponent_kinds for role in (0, 1)]
    opponents = {kind: make_opponent(kind, game) for kind in opponent_kinds}
    seats = [
        (policy, opponents[kind]) if role == 0 else (opponents[kind], policy)
        for kind, role in matchups
        for _ in range(games_per_role)
    ]
    episodes = play_matches(game, seats, seed, rules, lockstep)
    metrics: dict[str, float] = {}
    for kind in opponent_kinds:
        by_role = {}
        for role in (0, 1):
            start = matchups.index((kind, role)) * games_per_role
            by_role[role] = match_stats(episodes[start : start + games_per_role])
            metrics.update({f"{kind}/role{role}/{name}": value for name, value in by_role[role].rates().items()})
        metrics.update({f"{kind}/{name}": value for name, value in (by_role[0] + by_role[1]).rates().items()})
    return metrics


class RoleBaselines:
    """Role-conditioned baselines: per (game, role), an exponential moving average of that role's returns.

    Each step, `update` moves every (game, role) present in the batch towards the batch's mean
    return of that role (one return per game, however many turns the role took):
    b <- decay * b + (1 - decay) * mean; a turn's advantage is then its return minus the
    updated baseline. This is the order of the paper's Algorithm 1. (SPIRAL's OAT code instead
    subtracts each game's baseline before folding that game's return in, game by game.) Baselines
    start at 0, as SPIRAL's do.
    """

    def __init__(self, decay: float = 0.95):
        if not 0 < decay < 1:
            raise ValueError(f"baseline decay must be in (0, 1), got {decay}")
        self.decay = decay
        self._baselines: dict[str, list[float]] = {}

    def baseline(self, game: str, role: int) -> float:
        return self._baselines.get(game, [0.0, 0.0])[role]

    def update(self, episodes: Sequence[Episode]) -> None:
        returns: dict[tuple[str, int], list[float]] = {}
        for episode in episodes:
            for role in episode.policy_roles:
                returns.setdefault((episode.game, role), []).append(episode.returns[role])
        for (game, role), values in returns.items():
            baselines = self._baselines.setdefault(game, [0.0, 0.0])
            baselines[role] = self.decay * baselines[role] + (1 - self.decay) * sum(values) / len(values)

    def advantages(self, episode: Episode) -> list[float]:
        """Each turn's return minus its role's current baseline, in the order of `episode.turns`."""
        return [turn.reward - self.baseline(episode.game, turn.player) for turn in episode.turns]

    def state_dict(self) -> dict:
        """JSON-serializable: `{"baselines": {game: [role 0, role 1]}}`."""
        return {"baselines": {game: list(values) for game, values in self._baselines.items()}}

    def load_state_dict(self, state: dict) -> None:
        baselines = state.get("baselines") if isinstance(state, dict) else None
        if not isinstance(baselines, dict):
            raise ValueError(f"a role-baseline state is {{'baselines': {{game: [b0, b1]}}}}, got {state!r}")
        for game, values in baselines.items():
            if (
                not isinstance(values, (list, tuple))
                or len(values) != 2
                or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)
            ):
                raise ValueError(f"role baselines of {game!r} must be two finite numbers, got {values!r}")
        self._baselines = {game: [float(v) for v in values] for game, values in baselines.items()}


def role_conditioned_advantages(episodes: Sequence[Episode], baselines: RoleBaselines) -> list[list[float]]:
    """Update `baselines` with this batch, then each turn's advantage (one list per episode, as its turns)."""
    baselines.update(episodes)
    return [baselines.advantages(episode) for episode in episodes]
