"""SPIRAL self-play: episodes in lockstep, the illegal-move rule, return crediting, role baselines, settings."""

import dataclasses
import json
import random
import re

import pytest

from execrl.games import GAMES, MinimaxOpponent, RandomOpponent
from execrl.games.play import Episode, MatchRules, Sampled, Turn, match_stats, play_against, play_matches
from execrl.games.tictactoe import TicTacToeState
from execrl.training.spiral import (
    Lockstep,
    RoleBaselines,
    SPIRALSettings,
    evaluate_policy,
    play_self_play,
    role_conditioned_advantages,
    self_play_seed,
)

TTT = GAMES["tictactoe"]
KUHN = GAMES["kuhn_poker"]


# --- scripted policies: they read only the prompt, as a model does --------------------------------


def legal_moves(observation: str) -> list[str]:
    line = re.search(r"^Legal moves: (.*)$", observation, re.MULTILINE).group(1)
    return re.findall(r"\[([^\]]*)\]", line)


def role(observation: str) -> int:
    return int(re.search(r"You are player (\d)", observation).group(1))


class Scripted:
    """A batched policy from a per-prompt rule; it logs every call's prompts."""

    def __init__(self, choose):
        self.choose = choose
        self.calls: list[list[str]] = []

    def __call__(self, observations):
        self.calls.append(list(observations))
        return [self.choose(observation) for observation in observations]


def first_legal(observation):
    return f"I take the first one. [{legal_moves(observation)[0]}]"


def seeded_random_policy(seed):
    rng = random.Random(seed)
    return Scripted(lambda observation: f"[{rng.choice(legal_moves(observation))}]")


def rigged(observation):
    """Player 0 fills the top row, player 1 the middle row: player 0 wins on its third move."""
    wanted = ["0", "1", "2"] if role(observation) == 0 else ["3", "4", "5"]
    return f"[{next(m for m in wanted if m in legal_moves(observation))}]"


def board(observation) -> TicTacToeState:
    rows = [line.split(" | ") for line in observation.splitlines() if line.count(" | ") == 2]
    marks = {"X": 0, "O": 1}
    return TicTacToeState(tuple(marks.get(cell.strip()) for row in rows for cell in row))


MINIMAX = MinimaxOpponent(TTT)


def perfect_text_policy(observation):
    """Minimax, reached through the prompt: the board is read back from the text."""
    probabilities = MINIMAX.move_probabilities(board(observation))
    return f"[{max(probabilities, key=probabilities.get)}]"


# --- episodes ------------------------------------------------------------------------------------


def test_self_play_records_every_turn_of_both_roles():
    policy = Scripted(first_legal)
    (episode,) = play_self_play(TTT, policy, 1, seed=0)
    # X takes 0, 2, 4, 6 (a diagonal on the seventh move); O takes 1, 3, 5.
    assert [turn.move for turn in episode.turns] == list("0123456")
    assert [turn.player for turn in episode.turns] == [0, 1] * 3 + [0]
    assert [turn.observation for turn in episode.turns] == [call[0] for call in policy.calls]
    assert all(turn.legal and turn.answer == turn.move for turn in episode.turns)
    assert episode.turns[0].completion == "I take the first one. [0]"
    assert episode.returns == (1.0, -1.0) and episode.forfeited_by is None and not episode.truncated
    assert episode.final_state.board == (0, 1, 0, 1, 0, 1, 0, None, None)
    assert episode.policy_roles == (0, 1)


@pytest.mark.parametrize("game", [TTT, KUHN])
def test_every_turn_is_credited_with_its_players_final_return(game):
    episodes = play_self_play(game, seeded_random_policy(1), 40, seed=3)
    outcomes = set()
    for episode in episodes:
        assert sum(episode.returns) == 0
        for player in (0, 1):
            turns = episode.turns_of(player)
            assert turns, "both roles move in every game"
            assert {turn.reward for turn in turns} == {episode.returns[player]}
        outcomes.add(episode.returns)
    assert (1.0, -1.0) in outcomes and (-1.0, 1.0) in outcomes  # credit follows the winner, not the role


def test_a_prompt_without_a_move_loses_at_once():
    policy = Scripted(lambda o: first_legal(o) if role(o) == 0 else "I am not sure.")
    (episode,) = play_self_play(TTT, policy, 1, seed=0)
    assert episode.forfeited_by == 1 and episode.returns == (1.0, -1.0)
    assert len(episode.turns) == 2  # the game stopped at the illegal answer
    last = episode.turns[-1]
    assert (last.player, last.answer, last.move, last.legal, last.reward) == (1, None, None, False, -1.0)
    assert episode.turns[0].reward == 1.0
    assert episode.final_state.board.count(None) == 8  # the illegal answer changed nothing


def test_a_move_on_an_occupied_cell_loses():
    policy = Scripted(lambda o: "[4]")
    (episode,) = play_self_play(TTT, policy, 1, seed=0)
    assert [(t.player, t.answer, t.legal) for t in episode.turns] == [(0, "4", True), (1, "4", False)]
    assert episode.forfeited_by == 1 and episode.returns == (1.0, -1.0)


def test_player_0_can_forfeit_too():
    (episode,) = play_self_play(KUHN, Scripted(lambda o: "[raise]"), 1, seed=0)
    assert episode.forfeited_by == 0 and episode.returns == (-1.0, 1.0)
    assert episode.turns_of(1) == () and episode.turns[0].answer == "raise"


def test_illegal_move_rule_random_substitutes_a_legal_move():
    rules = MatchRules(illegal_move="random")
    policy = Scripted(lambda o: first_legal(o) if role(o) == 0 else "[4]")  # O keeps asking for 4
    episodes = play_self_play(TTT, policy, 10, seed=5, rules=rules)
    for episode in episodes:
        assert episode.forfeited_by is None
        o_turns = episode.turns_of(1)
        assert len(o_turns) >= 2  # the game went on after the illegal answer
        assert o_turns[0].legal  # 4 was still free at O's first move
        for turn in o_turns[1:]:
            assert not turn.legal and turn.answer == "4" and turn.move not in (None, "4")
        assert o_turns[0].reward == episode.returns[1]  # the legal move gets the game's return
    substitutes = [tuple(t.move for t in e.turns_of(1)[1:]) for e in episodes]
    assert len(set(substitutes)) > 1  # drawn from each game's own generator
    again = play_self_play(TTT, Scripted(lambda o: first_legal(o) if role(o) == 0 else "[4]"), 10, seed=5, rules=rules)
    assert [tuple(t.move for t in e.turns_of(1)[1:]) for e in again] == substitutes


def test_an_illegal_answer_gets_the_penalty_even_when_its_random_substitute_wins():
    """Under `illegal_move: random` the substitute is played, but the illegal answer is not credited
    with where the substitute led: a policy cannot gain by answering illegally."""
    from execrl.games.play import ILLEGAL_MOVE_PENALTY

    rules = MatchRules(illegal_move="random")
    # X plays legal random moves; O answers illegally every time, so every O move is a random substitute
    rng = random.Random(0)
    policy = Scripted(lambda o: f"[{rng.choice(legal_moves(o))}]" if role(o) == 0 else "I pass.")
    episodes = play_self_play(TTT, policy, 60, seed=2, rules=rules)
    o_results = [episode.returns[1] for episode in episodes]
    assert max(o_results) == 1.0 and 0.0 in o_results  # substitutes won and drew games for O
    for episode in episodes:
        assert episode.forfeited_by is None
        o_turns = episode.turns_of(1)
        assert o_turns and all(not turn.legal and turn.move is not None for turn in o_turns)
        assert {turn.reward for turn in o_turns} == {ILLEGAL_MOVE_PENALTY} == {-1.0}
        assert {turn.reward for turn in episode.turns_of(0)} == {episode.returns[0]}
    # the illegal answers' advantages are the lowest a turn can get, whatever the games' outcomes
    baselines = RoleBaselines(0.5)
    advantages = role_conditioned_advantages(episodes, baselines)
    o_advantage = -1.0 - baselines.baseline("tictactoe", 1)
    for episode, game_advantages in zip(episodes, advantages, strict=True):
        for turn, advantage in zip(episode.turns, game_advantages, strict=True):
            if turn.player == 1:
                assert advantage == pytest.approx(o_advantage)
    # the role's baseline still follows its games' returns, not the penalty
    assert baselines.baseline("tictactoe", 1) == pytest.approx(0.5 * sum(o_results) / len(o_results))


def test_games_stop_as_draws_after_max_turns():
    (episode,) = play_self_play(TTT, Scripted(first_legal), 1, seed=0, rules=MatchRules(max_turns=3))
    assert episode.truncated and episode.returns == (0.0, 0.0)
    assert len(episode.turns) == 3 and all(turn.reward == 0.0 for turn in episode.turns)
    (finished,) = play_self_play(TTT, Scripted(first_legal), 1, seed=0, rules=MatchRules(max_turns=7))
    assert not finished.truncated and finished.returns == (1.0, -1.0)  # a game ending on its last allowed move is won


def test_sampled_completions_keep_their_payload_on_the_turn():
    def policy(observations):
        return [Sampled(first_legal(o), payload={"completion_ids": [i]}) for i, o in enumerate(observations)]

    episodes = play_self_play(KUHN, policy, 3, seed=0)
    assert [turn.payload for turn in episodes[2].turns] == [{"completion_ids": [2]}] * len(episodes[2].turns)
    assert episodes[0].turns[0].completion == first_legal(episodes[0].turns[0].observation)


def test_lockstep_makes_one_batched_call_per_round():
    policy = seeded_random_policy(0)
    episodes = play_self_play(KUHN, policy, 24, seed=1)
    lengths = [len(episode.turns) for episode in episodes]
    assert set(lengths) == {2, 3}  # some hands end a round early
    assert len(policy.calls) == max(lengths)
    assert [len(call) for call in policy.calls] == [sum(n > r for n in lengths) for r in range(max(lengths))]
    # Each game's turns are its prompts in the calls' order.
    for index, episode in enumerate(episodes):
        for r, turn in enumerate(episode.turns):
            still = [i for i, n in enumerate(lengths) if n > r]
            assert policy.calls[r][still.index(index)] == turn.observation


def test_one_call_serves_both_roles_when_both_are_to_move():
    # A game against an opponent in seat 0 puts the policy in role 1, so one round holds both roles.
    policy = Scripted(first_legal)
    matches = [(policy, policy), (RandomOpponent(TTT), policy)]
    play_matches(TTT, matches, seed=0)
    first_call = policy.calls[0]
    assert len(first_call) == 2 and {role(o) for o in first_call} == {0, 1}


def test_the_policy_must_answer_every_prompt_with_text():
    with pytest.raises(ValueError, match="returned 1 completions for 4 prompts"):
        play_self_play(TTT, lambda observations: ["[0]"], 4, seed=0)
    with pytest.raises(TypeError, match="got int"):
        play_self_play(TTT, lambda observations: [4] * len(observations), 2, seed=0)


def test_episodes_are_reproducible_from_the_seed():
    def run(seed):
        return play_self_play(KUHN, seeded_random_policy(9), 16, seed=seed)

    first, again = run(0), run(0)
    assert [(e.final_state, [t.completion for t in e.turns]) for e in first] == [
        (e.final_state, [t.completion for t in e.turns]) for e in again
    ]
    assert [e.final_state.cards for e in run(1)] != [e.final_state.cards for e in first]
    assert len({e.final_state.cards for e in first}) > 1  # each game deals from its own generator


# --- against fixed opponents ---------------------------------------------------------------------


@pytest.mark.parametrize("policy_role", [0, 1])
def test_play_against_seats_the_policy_in_its_role_only(policy_role):
    policy = Scripted(first_legal)
    episodes = play_against(TTT, policy, RandomOpponent(TTT), policy_role, 8, seed=0)
    assert all(e.policy_roles == (policy_role,) for e in episodes)
    assert all(turn.player == policy_role for e in episodes for turn in e.turns)
    assert all(role(o) == policy_role for call in policy.calls for o in call)


def test_play_against_rejects_bad_roles_and_other_games_opponents():
    with pytest.raises(ValueError, match="role must be 0 or 1, got 2"):
        play_against(TTT, Scripted(first_legal), RandomOpponent(TTT), 2, 1, seed=0)
    with pytest.raises(ValueError, match="an opponent of kuhn_poker cannot play tictactoe"):
        play_against(TTT, Scripted(first_legal), RandomOpponent(KUHN), 0, 1, seed=0)


def test_a_perfect_policy_never_loses_and_draws_with_minimax():
    metrics = evaluate_policy(TTT, Scripted(perfect_text_policy), ["random", "perfect"], 30, seed=0)
    assert metrics["random/loss_rate"] == 0 and metrics["random/win_rate"] > 0.7
    assert metrics["perfect/draw_rate"] == 1.0
    assert metrics["perfect/role0/draw_rate"] == metrics["perfect/role1/draw_rate"] == 1.0
    assert metrics["random/illegal_move_rate"] == 0


def test_an_illegal_policy_forfeits_every_game_in_both_roles():
    metrics = evaluate_policy(KUHN, Scripted(lambda o: "no idea"), ["random", "perfect"], 5, seed=0)
    for kind in ("random", "perfect"):
        for scope in (kind, f"{kind}/role0", f"{kind}/role1"):
            assert metrics[f"{scope}/loss_rate"] == 1.0
            assert metrics[f"{scope}/forfeit_rate"] == 1.0
            assert metrics[f"{scope}/illegal_move_rate"] == 1.0


def test_evaluation_plays_every_matchup_in_lockstep():
    policy = Scripted(first_legal)
    metrics = evaluate_policy(TTT, policy, ["random", "perfect"], 6, seed=0)
    assert len(policy.calls[0]) == 2 * 2 * 6  # the first round holds every game: both opponents, both roles
    assert len(policy.calls) <= 5  # a tic-tac-toe player moves at most five times
    for kind in ("random", "perfect"):
        rates = [metrics[f"{kind}/{name}"] for name in ("win_rate", "draw_rate", "loss_rate")]
        assert sum(rates) == pytest.approx(1.0)
    assert metrics["perfect/win_rate"] == 0.0


def test_match_stats_count_outcomes_per_game_and_illegal_answers_per_turn():
    def episode(policy_role, returns, legal):
        turns = tuple(Turn(policy_role, "", "", None, None, ok, returns[policy_role]) for ok in legal)
        return Episode("tictactoe", "s", (policy_role,), turns, returns, None, forfeited_by=None)

    stats = match_stats([
        episode(0, (1.0, -1.0), [True, True]),
        episode(1, (1.0, -1.0), [True, False, True]),
        episode(1, (0.0, 0.0), [True]),
    ])
    assert (stats.games, stats.wins, stats.losses, stats.draws, stats.turns, stats.illegal_moves) == (3, 1, 1, 1, 6, 1)
    assert stats.rates()["illegal_move_rate"] == pytest.approx(1 / 6)
    assert stats.rates()["win_rate"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="self-play"):
        match_stats(play_self_play(TTT, Scripted(first_legal), 1, seed=0))


# --- role-conditioned advantages -----------------------------------------------------------------


def fake_episode(game, returns, turns_per_role=(1, 1), roles=(0, 1)):
    turns = tuple(
        Turn(player, "", "", None, None, True, returns[player]) for player in roles for _ in range(turns_per_role[player])
    )
    return Episode(game, "s", roles, turns, returns, None)


def test_a_role_that_always_wins_sees_its_advantage_shrink_to_zero():
    baselines = RoleBaselines(decay=0.95)
    advantages = []
    for step in range(1, 151):
        (winner_advantages,) = role_conditioned_advantages([fake_episode("g", (1.0, -1.0), roles=(0,))], baselines)
        advantages.append(winner_advantages[0])
        assert baselines.baseline("g", 0) == pytest.approx(1 - 0.95**step)
    assert advantages[0] == pytest.approx(0.95)  # updated with the batch, then subtracted
    assert all(later < earlier for earlier, later in zip(advantages, advantages[1:]))
    assert 0 < advantages[-1] < 0.001


def test_rigged_game_gives_the_roles_baselines_of_opposite_signs():
    baselines = RoleBaselines(decay=0.9)
    for step in range(40):
        episodes = play_self_play(TTT, Scripted(rigged), 4, seed=step)
        assert all(e.returns == (1.0, -1.0) for e in episodes)
        advantages = role_conditioned_advantages(episodes, baselines)
    winner, loser = baselines.baseline("tictactoe", 0), baselines.baseline("tictactoe", 1)
    assert winner == pytest.approx(1 - 0.9**40) and loser == pytest.approx(-(1 - 0.9**40))
    for episode, per_turn in zip(episodes, advantages):
        assert len(per_turn) == len(episode.turns) == 5
        for turn, advantage in zip(episode.turns, per_turn):
            assert (advantage > 0) == (turn.player == 0)  # the winner is still above its baseline
            assert abs(advantage) < 0.02  # but barely: the role, not the moves, explains the outcome


def test_each_game_counts_once_in_its_roles_batch_mean():
    baselines = RoleBaselines(decay=0.5)
    # Role 0 wins a long game and loses a short one: the mean return is 0, whatever the turn counts.
    role_conditioned_advantages(
        [fake_episode("g", (1.0, -1.0), turns_per_role=(5, 4)), fake_episode("g", (-1.0, 1.0), turns_per_role=(1, 1))],
        baselines,
    )
    assert baselines.baseline("g", 0) == 0.0 and baselines.baseline("g", 1) == 0.0


def test_baselines_are_kept_per_game_and_only_for_roles_a_policy_played():
    baselines = RoleBaselines(decay=0.5)
    baselines.update([fake_episode("a", (1.0, -1.0)), fake_episode("b", (-1.0, 1.0), roles=(1,))])
    assert (baselines.baseline("a", 0), baselines.baseline("a", 1)) == (0.5, -0.5)
    assert (baselines.baseline("b", 0), baselines.baseline("b", 1)) == (0.0, 0.5)  # role 0 of b was an opponent
    assert baselines.baseline("never played", 1) == 0.0


def test_baselines_survive_a_json_round_trip():
    baselines = RoleBaselines(decay=0.95)
    for step in range(5):
        baselines.update([fake_episode("tictactoe", (1.0, -1.0)), fake_episode("kuhn_poker", (-1.0, 1.0))])
    restored = RoleBaselines(decay=0.95)
    restored.load_state_dict(json.loads(json.dumps(baselines.state_dict())))
    batch = [fake_episode("tictactoe", (0.0, 0.0)), fake_episode("kuhn_poker", (1.0, -1.0))]
    assert role_conditioned_advantages(batch, restored) == role_conditioned_advantages(batch, baselines)
    assert restored.state_dict() == baselines.state_dict()


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({}, "baselines"),
        ({"baselines": {"tictactoe": [0.1]}}, "'tictactoe'"),
        ({"baselines": {"tictactoe": [0.1, float("nan")]}}, "two finite numbers"),
        ({"baselines": {"tictactoe": "0.1 0.2"}}, "two finite numbers"),
    ],
)
def test_malformed_baseline_state_is_rejected(state, message):
    with pytest.raises(ValueError, match=message):
        RoleBaselines().load_state_dict(state)


@pytest.mark.parametrize("decay", [0, 1, -0.5, 1.5])
def test_baseline_decay_must_be_a_fraction(decay):
    with pytest.raises(ValueError, match=f"got {decay}"):
        RoleBaselines(decay)


# --- settings ------------------------------------------------------------------------------------


def test_settings_defaults_and_json_round_trip():
    settings = SPIRALSettings()
    assert settings.baseline_decay == 0.95 and settings.illegal_move == "lose"
    assert all(f.default is not dataclasses.MISSING for f in dataclasses.fields(SPIRALSettings))
    from_json = SPIRALSettings(**json.loads(json.dumps(dataclasses.asdict(settings))))
    assert from_json == settings and isinstance(from_json.eval_opponents, tuple)


def test_settings_build_the_match_rules():
    settings = SPIRALSettings(max_turns=7, illegal_move="random", answer_pattern=r"<([^<>]*)>", answer_template="<{move}>")
    rules = settings.match_rules()
    assert (rules.max_turns, rules.illegal_move) == (7, "random")
    assert "<MOVE>" in TTT.observation(TTT.initial_state(), 0, rules.answer_format)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"game": "chess"}, "spiral.game.*'chess'"),
        ({"games_per_step": 0}, "spiral.games_per_step must be at least 1, got 0"),
        ({"max_turns": 0}, "max_turns must be at least 1, got 0"),
        ({"baseline_decay": 1.0}, r"spiral.baseline_decay must be in \(0, 1\), got 1.0"),
        ({"illegal_move": "retry"}, "illegal_move must be one of.*'retry'"),
        ({"eval_opponents": ["random", "gemini"]}, "spiral.eval_opponents: unknown 'gemini'"),
        ({"eval_games": -1}, "spiral.eval_games must be at least 0, got -1"),
        ({"eval_temperature": -1}, "spiral.eval_temperature must be at least 0"),
        ({"answer_pattern": r"\[.*\]"}, "exactly one group"),
    ],
)
def test_bad_settings_are_rejected_naming_the_value(overrides, message):
    with pytest.raises(ValueError, match=message):
        SPIRALSettings(**overrides)


def test_games_are_shared_out_over_processes():
    assert SPIRALSettings(games_per_step=64).per_process_games(4) == 16
    with pytest.raises(ValueError, match=r"games_per_step \(64\) must be a multiple of the training processes \(3\)"):
        SPIRALSettings(games_per_step=64).per_process_games(3)


def test_self_play_seeds_differ_per_step_and_process():
    seeds = {self_play_seed(0, step, rank) for step in range(3) for rank in range(2)}
    assert len(seeds) == 6 and self_play_seed(0, 1, 0) != self_play_seed(1, 1, 0)


class ThreadedProcesses:
    """`any_active` over threads that stand for training processes (a barrier as the collective)."""

    def __init__(self, processes: int):
        import threading

        self.barrier = threading.Barrier(processes, timeout=10)
        self.flags: dict[int, bool] = {}

    def any_active(self, rank: int):
        def collective(mine: bool) -> bool:
            self.flags[rank] = mine
            self.barrier.wait()
            result = any(self.flags.values())
            self.barrier.wait()  # nobody overwrites a flag before everyone has read them
            return result

        return collective


PADDING = TTT.observation(TTT.initial_state(random.Random(0)), 0, MatchRules().answer_format)


def run_in_lockstep(*bodies):
    """Run each body(lockstep_factory) in its own thread; the results in order."""
    import threading

    processes = ThreadedProcesses(len(bodies))
    results, errors = [None] * len(bodies), []

    def target(rank, body):
        try:
            results[rank] = body(lambda policy: Lockstep(policy, processes.any_active(rank), PADDING))
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(error)
            processes.barrier.abort()

    threads = [threading.Thread(target=target, args=(rank, body)) for rank, body in enumerate(bodies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def test_lockstep_makes_processes_with_games_of_unequal_length_call_the_policy_equally_often():
    # rigged self-play ends on player 0's third move (5 calls); first_legal on its fourth (7 calls)
    short, long_ = Scripted(rigged), Scripted(first_legal)
    alone = [play_self_play(TTT, Scripted(choose), 1, seed=0) for choose in (rigged, first_legal)]

    def play(policy):
        def body(make_lockstep):
            lockstep = make_lockstep(policy)
            return play_self_play(TTT, policy, 1, seed=0, lockstep=lockstep), lockstep.padding_calls

        return body

    (short_episodes, short_pads), (long_episodes, long_pads) = run_in_lockstep(play(short), play(long_))
    assert len(short.calls) == len(long_.calls) == 7
    assert (short_pads, long_pads) == (2, 0)
    assert short.calls[-2:] == [[PADDING], [PADDING]]
    # padding changes no game: the episodes are those each process plays alone
    assert [short_episodes, long_episodes] == alone


def test_lockstep_idle_process_pads_until_the_others_finish_and_evaluation_keeps_step():
    busy, idle = Scripted(first_legal), Scripted(first_legal)

    def evaluate(policy, play_too):
        def body(make_lockstep):
            lockstep = make_lockstep(policy)
            if play_too:
                play_self_play(TTT, policy, 2, seed=1, lockstep=lockstep)
            else:
                lockstep.idle()
            # then both evaluate against fixed opponents, whose games differ in length per role
            return evaluate_policy(TTT, policy, ["random"], 2, "eval", MatchRules(), lockstep)

        return body

    busy_metrics, idle_metrics = run_in_lockstep(evaluate(busy, True), evaluate(idle, False))
    assert len(busy.calls) == len(idle.calls)
    assert busy_metrics == idle_metrics == evaluate_policy(TTT, Scripted(first_legal), ["random"], 2, "eval")


def test_lockstep_refuses_a_second_policy():
    lockstep = Lockstep(Scripted(rigged), lambda mine: mine, PADDING)
    with pytest.raises(ValueError, match="lockstep's policy"):
        play_matches(TTT, [(Scripted(rigged), Scripted(rigged))], 0, lockstep=lockstep)
