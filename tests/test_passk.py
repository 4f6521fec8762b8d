from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from execrl.evaluation.passk import feasible_ks, mean_pass_at_k, pass_at_k


@st.composite
def n_c_k(draw):
    n = draw(st.integers(min_value=1, max_value=200))
    c = draw(st.integers(min_value=0, max_value=n))
    k = draw(st.integers(min_value=1, max_value=n))
    return n, c, k


@given(n_c_k())
def test_matches_binomial_formula(args):
    n, c, k = args
    reference = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(reference, abs=1e-9)


@given(n_c_k())
def test_monotone_in_k_and_c(args):
    n, c, k = args
    if k < n:
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k) - 1e-12
    if c < n:
        assert pass_at_k(n, c + 1, k) >= pass_at_k(n, c, k) - 1e-12


def test_edge_cases():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 1, 5) == 1.0


def test_rejects_impossible_inputs():
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 6)
    with pytest.raises(ValueError):
        mean_pass_at_k([], 1)


def test_mean_and_feasible():
    assert mean_pass_at_k([(4, 0), (4, 4)], 1) == pytest.approx(0.5)
    assert feasible_ks([1, 5, 10], 8) == [1, 5]
