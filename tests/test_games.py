"""The games of SPIRAL self-play: rules, answer parsing, and the fixed opponents."""

import itertools
import random
from fractions import Fraction

import pytest

from execrl.games import (
    GAMES,
    AnswerFormat,
    IllegalMoveError,
    KuhnNashOpponent,
    KuhnPoker,
    MinimaxOpponent,
    RandomOpponent,
    TicTacToe,
    get_game,
    make_opponent,
    parse_move,
)
from execrl.games.kuhn_poker import KuhnState
from execrl.games.play import play_matches
from execrl.games.tictactoe import WIN_LINES, TicTacToeState

TTT = TicTacToe()
KUHN = KuhnPoker()


def play(game, moves, state=None):
    state = TTT.initial_state() if state is None else state
    for move in moves:
        state = game.apply_move(state, move)
    return state


def no_line(cells) -> bool:
    return not any(set(line) <= set(cells) for line in WIN_LINES)


# --- tic-tac-toe ---------------------------------------------------------------------------------


def test_registry_names_each_game_by_its_key():
    assert set(GAMES) == {"tictactoe", "kuhn_poker"}
    assert all(game.name == key for key, game in GAMES.items())
    assert get_game("tictactoe") is GAMES["tictactoe"]
    with pytest.raises(ValueError, match="'chess'.*tictactoe"):
        get_game("chess")


def test_tictactoe_starts_empty_with_nine_moves_for_player_0():
    state = TTT.initial_state()
    assert TTT.legal_moves(state) == tuple("012345678")
    assert TTT.current_player(state) == 0
    assert not TTT.is_terminal(state)


def test_tictactoe_players_alternate_and_occupied_cells_leave_the_legal_moves():
    state = play(TTT, ["4"])
    assert TTT.current_player(state) == 1
    assert "4" not in TTT.legal_moves(state) and len(TTT.legal_moves(state)) == 8
    state = TTT.apply_move(state, "0")
    assert TTT.current_player(state) == 0
    assert state.board[4] == 0 and state.board[0] == 1


@pytest.mark.parametrize("line", WIN_LINES)
@pytest.mark.parametrize("winner", [0, 1])
def test_every_line_wins_for_either_player(line, winner):
    # The loser's marks: cells off the line that hold no line of their own.
    free = [c for c in range(9) if c not in line]
    loser_cells = next(cells for cells in itertools.combinations(free, 2 + winner) if no_line(cells))
    order = [None] * (6 - (1 - winner))
    order[winner::2] = [str(c) for c in line]
    order[1 - winner :: 2] = [str(c) for c in loser_cells]
    state = TTT.initial_state()
    for move in order[:-1]:
        state = TTT.apply_move(state, move)
        assert not TTT.is_terminal(state)
    state = TTT.apply_move(state, order[-1])
    assert TTT.is_terminal(state)
    assert TTT.legal_moves(state) == ()
    expected = (1.0, -1.0) if winner == 0 else (-1.0, 1.0)
    assert TTT.returns(state) == expected


def test_a_full_board_without_a_line_is_a_draw_only_when_full():
    moves = ["0", "1", "2", "4", "3", "5", "7", "6", "8"]  # X O X / X O O / O X X
    state = TTT.initial_state()
    for move in moves[:-1]:
        state = TTT.apply_move(state, move)
        assert not TTT.is_terminal(state)
    state = TTT.apply_move(state, moves[-1])
    assert TTT.is_terminal(state) and TTT.returns(state) == (0.0, 0.0)


def test_a_win_on_the_last_cell_is_a_win_not_a_draw():
    state = play(TTT, ["0", "1", "2", "4", "3", "5", "7", "8", "6"])  # X fills 0-3-6 on the ninth move
    assert all(cell is not None for cell in state.board)
    assert TTT.returns(state) == (1.0, -1.0)


@pytest.mark.parametrize("move", ["4", "9", "-1", "10", "x", "", " 5", "4.0"])
def test_occupied_out_of_range_and_malformed_moves_are_illegal(move):
    state = play(TTT, ["4"])
    with pytest.raises(IllegalMoveError, match="is not a legal move") as error:
        TTT.apply_move(state, move)
    assert repr(move) in str(error.value)


def test_no_move_after_the_game_is_won_and_no_returns_before():
    won = play(TTT, ["0", "3", "1", "4", "2"])
    with pytest.raises(IllegalMoveError, match="game is over"):
        TTT.apply_move(won, "8")
    with pytest.raises(ValueError, match="not terminal"):
        TTT.returns(play(TTT, ["0"]))


def test_malformed_board_is_rejected_naming_it():
    with pytest.raises(ValueError, match="'X'"):
        TicTacToeState(("X",) + (None,) * 8)


def test_tictactoe_observation_has_rules_board_role_legal_moves_and_answer_format():
    state = play(TTT, ["4", "0"])
    text = TTT.observation(state, 0)
    assert "three marks in a row" in text
    assert "You are player 0 and play X" in text
    assert "O | 1 | 2" in text and "3 | X | 5" in text
    assert "Legal moves: [1], [2], [3], [5], [6], [7], [8]" in text
    assert "[MOVE]" in text and "only the last" in text
    with pytest.raises(ValueError, match="player 1 is not to move"):
        TTT.observation(state, 1)
    with pytest.raises(ValueError, match="terminal"):
        TTT.observation(play(TTT, ["0", "3", "1", "4", "2"]), 1)


# --- Kuhn poker ----------------------------------------------------------------------------------

DEALS = list(itertools.permutations(range(3), 2))
EXPECTED_BETTING = {
    # history: (who takes the pot: "showdown" or a player, chips moved)
    ("check", "check"): ("showdown", 1),
    ("bet", "fold"): (0, 1),
    ("bet", "call"): ("showdown", 2),
    ("check", "bet", "fold"): (1, 1),
    ("check", "bet", "call"): ("showdown", 2),
}


def all_histories():
    """Every history reachable by legal moves, by search from the empty one."""
    found, frontier = [], [()]
    while frontier:
        history = frontier.pop()
        found.append(history)
        state = KuhnState((0, 1), history)
        frontier += [history + (move,) for move in KUHN.legal_moves(state)]
    return found


def test_kuhn_legal_moves_follow_the_betting():
    assert KUHN.legal_moves(KuhnState((0, 1))) == ("check", "bet")
    assert KUHN.legal_moves(KuhnState((0, 1), ("check",))) == ("check", "bet")
    assert KUHN.legal_moves(KuhnState((0, 1), ("bet",))) == ("call", "fold")
    assert KUHN.legal_moves(KuhnState((0, 1), ("check", "bet"))) == ("call", "fold")
    assert [KUHN.current_player(KuhnState((0, 1), h)) for h in [(), ("check",), ("check", "bet")]] == [0, 1, 0]


def test_kuhn_has_exactly_the_five_betting_sequences():
    terminal = {h for h in all_histories() if KUHN.is_terminal(KuhnState((0, 1), h))}
    assert terminal == set(EXPECTED_BETTING)
    assert len(all_histories()) == 9  # the root, 3 decision points and 5 endings


@pytest.mark.parametrize("history", list(EXPECTED_BETTING))
@pytest.mark.parametrize("cards", DEALS)
def test_kuhn_payoffs_for_every_betting_sequence_and_deal(history, cards):
    state = KuhnState(cards)
    for move in history:
        assert not KUHN.is_terminal(state)
        state = KUHN.apply_move(state, move)
    assert KUHN.is_terminal(state) and KUHN.legal_moves(state) == ()
    taker, amount = EXPECTED_BETTING[history]
    if taker == "showdown":
        taker = 0 if cards[0] > cards[1] else 1
    expected = (amount, -amount) if taker == 0 else (-amount, amount)
    assert KUHN.chips(state) == expected
    assert KUHN.returns(state) == ((1.0, -1.0) if taker == 0 else (-1.0, 1.0))


@pytest.mark.parametrize(
    ("history", "move"),
    [((), "call"), ((), "fold"), (("bet",), "check"), (("check",), "call"), ((), "raise"), ((), "Bet")],
)
def test_kuhn_moves_out_of_turn_are_illegal(history, move):
    with pytest.raises(IllegalMoveError, match=repr(move)):
        KUHN.apply_move(KuhnState((0, 1), history), move)


def test_kuhn_refuses_chips_and_returns_before_the_end_and_bad_deals():
    with pytest.raises(ValueError, match="not over"):
        KUHN.chips(KuhnState((0, 1), ("check",)))
    with pytest.raises(ValueError, match="not terminal"):
        KUHN.returns(KuhnState((0, 1), ("bet",)))
    with pytest.raises(ValueError, match=r"\(1, 1\)"):
        KuhnState((1, 1))


def test_kuhn_deal_comes_from_the_seeded_generator():
    assert KUHN.initial_state(random.Random(7)) == KUHN.initial_state(random.Random(7))
    deals = {KUHN.initial_state(random.Random(seed)).cards for seed in range(200)}
    assert deals == set(DEALS)


def test_kuhn_observation_shows_own_card_and_betting_never_the_opponents_card():
    for own in range(3):
        others = [c for c in range(3) if c != own]
        for history in [(), ("check",), ("check", "bet"), ("bet",)]:
            player = len(history) % 2
            views = {
                KUHN.observation(KuhnState(tuple((own, other) if player == 0 else (other, own)), history), player)
                for other in others
            }
            assert len(views) == 1  # what the player sees does not depend on the opponent's card
    text = KUHN.observation(KuhnState((2, 0), ("check", "bet")), 0)
    assert "Your card is K" in text
    assert "player 0 checked; player 1 bet" in text
    assert "The pot holds 3 chips, 1 of them yours" in text
    assert "Legal moves: [call], [fold]" in text


# --- answers -------------------------------------------------------------------------------------

MOVES = tuple("012345678")


@pytest.mark.parametrize(
    ("completion", "answer", "move"),
    [
        ("The center is strongest. [4]", "4", "4"),
        ("[4]", "4", "4"),
        ("I play 4", None, None),  # no brackets
        ("", None, None),
        ("[4", None, None),  # unclosed
        ("4]", None, None),
        ("[]", "", None),
        ("[four]", "four", None),
        ("[04]", "04", None),  # only case and whitespace are forgiven
        ("[1] no, better [4]", "4", "4"),  # the last answer counts
        ("[4] or maybe [9]", "9", None),  # even when an earlier one was legal
        ("[ 4 ]", "4", "4"),
        ("[\n 4\t]\n", "4", "4"),
        ("[[4]]", "4", "4"),
    ],
)
def test_parse_move(completion, answer, move):
    parsed = parse_move(completion, MOVES)
    assert (parsed.answer, parsed.move, parsed.legal) == (answer, move, move is not None)


def test_parse_move_matches_words_ignoring_case_and_inner_whitespace():
    assert parse_move("I will [ BET ]", ("check", "bet")).move == "bet"
    assert parse_move("[Call]", ("call", "fold")).move == "call"
    assert parse_move("[check]", ("call", "fold")).move is None
    assert parse_move("[all  in]", ("all in",)).move == "all in"


def test_a_boxed_answer_format_reads_boxed_answers_only():
    boxed = AnswerFormat(r"\\boxed\{([^{}]*)\}", "\\boxed{{{move}}}")
    assert parse_move(r"so \boxed{3} then \boxed{ 5 }", MOVES, boxed).move == "5"
    assert parse_move("[5]", MOVES, boxed).answer is None
    assert r"\boxed{MOVE}" in TTT.observation(TTT.initial_state(), 0, boxed)


@pytest.mark.parametrize(
    ("pattern", "template", "message"),
    [
        (r"\[(", "[{move}]", "not a regular expression"),
        (r"\[[^\]]*\]", "[{move}]", "exactly one group"),
        (r"(\d)\s*\[(\d)\]", "[{move}]", "exactly one group"),
        (r"\[([^\]]*)\]", "[move]", "must contain {move}"),
        (r"<([^>]*)>", "[{move}]", "does not read back"),
        (r"\[(\d)\]", "[{move}]", "'bet'"),  # a format must carry every game's moves
    ],
)
def test_inconsistent_answer_formats_are_rejected(pattern, template, message):
    with pytest.raises(ValueError, match=message):
        AnswerFormat(pattern, template)


# --- opponents -----------------------------------------------------------------------------------


def play_out(seats, games, seed):
    return play_matches(TTT, [seats] * games, seed)


def test_random_opponent_is_uniform_and_reproducible_from_its_generator():
    state = play(TTT, ["4"])
    opponent = RandomOpponent(TTT)
    assert opponent.move_probabilities(state) == {m: 1 / 8 for m in "01235678"}
    draws = [opponent.choose(state, random.Random(seed)) for seed in range(100)]
    assert draws == [opponent.choose(state, random.Random(seed)) for seed in range(100)]
    assert set(draws) == set("01235678")


def test_minimax_values_the_empty_board_as_a_draw():
    assert MinimaxOpponent(TTT).value(TTT.initial_state()) == 0


def test_minimax_blocks_the_only_threat_and_takes_a_win():
    must_block = play(TTT, ["0", "4", "1"])  # X threatens 2; O to move
    probabilities = MinimaxOpponent(TTT).move_probabilities(must_block)
    assert probabilities["2"] == 1.0 and sum(probabilities.values()) == 1.0
    can_win = play(TTT, ["0", "3", "1", "4"])  # X to move: 2 wins now
    values = MinimaxOpponent(TTT).move_values(can_win)
    assert values["2"] == 1.0
    assert all(values[m] == 1.0 for m, p in MinimaxOpponent(TTT).move_probabilities(can_win).items() if p > 0)


@pytest.mark.parametrize("minimax_role", [0, 1])
def test_minimax_never_loses_to_random(minimax_role):
    minimax, random_player = MinimaxOpponent(TTT), RandomOpponent(TTT)
    seats = (minimax, random_player) if minimax_role == 0 else (random_player, minimax)
    episodes = play_out(seats, 300, seed=minimax_role)
    outcomes = [episode.returns[minimax_role] for episode in episodes]
    assert min(outcomes) >= 0
    assert outcomes.count(1.0) > 200  # and mostly wins: it is not merely drawing
    assert len({episode.final_state for episode in episodes}) > 50  # the random player varied the games


def test_minimax_against_minimax_always_draws():
    episodes = play_out((MinimaxOpponent(TTT), MinimaxOpponent(TTT)), 50, seed=0)
    assert all(episode.returns == (0.0, 0.0) for episode in episodes)
    assert len({episode.final_state for episode in episodes}) > 1  # ties between best moves are broken at random


def test_minimax_refuses_games_with_hidden_information():
    with pytest.raises(ValueError, match="kuhn_poker hides information"):
        MinimaxOpponent(KUHN)


def expected_chips(strategies) -> Fraction:
    """Player 0's exact expected chips when player p moves by `strategies[p](state) -> {move: probability}`."""

    def value(state) -> Fraction:
        if KUHN.is_terminal(state):
            return Fraction(KUHN.chips(state)[0])
        probabilities = strategies[KUHN.current_player(state)](state)
        return sum(Fraction(p).limit_denominator(1000) * value(KUHN.apply_move(state, m)) for m, p in probabilities.items())

    return sum(value(KuhnState(cards)) for cards in DEALS) / len(DEALS)


def pure_strategies(player):
    """Every deterministic strategy of `player`: one move per (card, betting it faces)."""
    decisions = [(), ("check", "bet")] if player == 0 else [("check",), ("bet",)]
    points = [(card, history) for card in range(3) for history in decisions]
    for choice in itertools.product([0, 1], repeat=len(points)):
        table = dict(zip(points, choice))

        def strategy(state, table=table):
            moves = KUHN.legal_moves(state)
            picked = moves[table[(state.cards[KUHN.current_player(state)], state.history)]]
            return {picked: 1.0}

        yield strategy


@pytest.mark.parametrize("alpha", [0, 1 / 6, 1 / 3])
def test_kuhn_equilibrium_is_worth_minus_one_eighteenth_to_player_0(alpha):
    nash = KuhnNashOpponent(KUHN, alpha)
    assert expected_chips((nash.move_probabilities, nash.move_probabilities)) == Fraction(-1, 18)


@pytest.mark.parametrize("alpha", [0, 1 / 6, 1 / 3])
def test_no_strategy_beats_the_kuhn_equilibrium(alpha):
    # An equilibrium guarantees its value against every strategy, so against every pure one.
    nash = KuhnNashOpponent(KUHN, alpha).move_probabilities
    as_player_0 = [expected_chips((nash, other)) for other in pure_strategies(1)]
    as_player_1 = [expected_chips((other, nash)) for other in pure_strategies(0)]
    assert min(as_player_0) == Fraction(-1, 18)
    assert max(as_player_1) == Fraction(-1, 18)
    assert len(as_player_0) == len(as_player_1) == 64


def test_the_kuhn_equilibrium_reads_only_its_own_card():
    nash = KuhnNashOpponent(KUHN, 1 / 6)
    for own, history in itertools.product(range(3), [(), ("check",), ("bet",), ("check", "bet")]):
        player = len(history) % 2
        deals = [(own, other) if player == 0 else (other, own) for other in range(3) if other != own]
        assert len({tuple(nash.move_probabilities(KuhnState(cards, history)).items()) for cards in deals}) == 1
    assert nash.move_probabilities(KuhnState((0, 2), ("bet",))) == {"call": 1.0, "fold": 0.0}  # K calls
    assert nash.move_probabilities(KuhnState((2, 0), ("bet",))) == {"call": 0.0, "fold": 1.0}  # J folds


def test_opponent_factory_and_its_errors():
    assert isinstance(make_opponent("random", KUHN), RandomOpponent)
    assert isinstance(make_opponent("perfect", TTT), MinimaxOpponent)
    assert isinstance(make_opponent("perfect", KUHN), KuhnNashOpponent)
    with pytest.raises(ValueError, match="'gemini'.*random, perfect"):
        make_opponent("gemini", TTT)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1/3\].*got 0.5"):
        KuhnNashOpponent(KUHN, 0.5)
    with pytest.raises(ValueError, match="not tictactoe"):
        KuhnNashOpponent(TTT)


def test_compact_observation_is_the_view_and_the_legal_moves():
    from execrl.games import get_game
    from execrl.games.moves import AnswerFormat

    game = get_game("tictactoe")
    state = game.apply_move(game.initial_state(None), "4")
    full = game.observation(state, 1, AnswerFormat())
    compact = game.observation(state, 1, AnswerFormat(), compact=True)
    assert len(compact) < len(full) / 3 and game.rules() not in compact
    assert "You play O.\n0 | 1 | 2\n3 | X | 5\n6 | 7 | 8\n" in compact
    assert "Legal: [0] [1] [2] [3] [5] [6] [7] [8]\n" in compact and "[4]" not in compact
    # ends at a line break, so a tokenizer never merges the prompt's end with the answer's "["
    assert compact.endswith("Move:\n")
