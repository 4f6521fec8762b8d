"""Candidate diversity: normalization, distinct programs, pairwise similarity."""

import math

import pytest

from execrl.evaluation.diversity import candidate_diversity, code_tokens, jaccard, normalize_code, problem_diversity, sample_pairs


def test_layout_and_comments_do_not_make_programs_distinct():
    a = "def f(x):\n    return x + 1  # add one\n"
    b = "def f(x):\n\n  return x+1\n\n\n"
    assert normalize_code(a) == normalize_code(b)
    assert normalize_code(a) != normalize_code("def f(x):\n    return x + 2\n")


def test_indentation_structure_is_kept():
    flat = "if x:\n    y = 1\nz = 2\n"
    nested = "if x:\n    y = 1\n    z = 2\n"
    assert normalize_code(flat) != normalize_code(nested)


@pytest.mark.parametrize("broken", ["def f(:\n  return 'unterminated", "  )))", "\x00\x01", "", "   \n\t"])
def test_programs_that_do_not_tokenize_still_get_tokens(broken):
    tokens = code_tokens(broken)
    assert isinstance(tokens, tuple)


def test_problem_diversity_counts_and_similarity():
    same = ["def f(x):\n    return x\n"] * 3
    stats = problem_diversity(same, [True, False, True])
    assert stats["distinct_programs"] == 1 and stats["distinct_passing"] == 1
    assert stats["mean_similarity"] == pytest.approx(1.0) and stats["mean_jaccard"] == pytest.approx(1.0)
    assert stats["n_pairs"] == 3

    different = ["def f(x):\n    return x\n", "while True:\n    pass\n"]
    stats = problem_diversity(different, [False, False])
    assert stats["distinct_programs"] == 2 and stats["distinct_passing"] == 0
    assert stats["mean_similarity"] < 0.5 and stats["mean_jaccard"] < 0.5


def test_single_sample_has_no_pairs():
    stats = problem_diversity(["x = 1"], [True])
    assert stats["n_pairs"] == 0 and math.isnan(stats["mean_similarity"])


def test_pairs_are_capped_deterministically():
    assert sample_pairs(4, 100) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    capped = sample_pairs(100, 50)
    assert len(capped) == 50 == len(set(capped)) and capped == sample_pairs(100, 50)
    assert all(0 <= i < j < 100 for i, j in capped)


def test_jaccard_edges():
    assert jaccard([], []) == 1.0
    assert jaccard(["a"], ["b"]) == 0.0
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)


def test_candidate_diversity_one_row_per_problem():
    records = [
        {"problem_id": "p/1", "sample_index": i, "code": code, "status": status}
        for i, (code, status) in enumerate([("return 1", "pass"), ("return  1", "pass"), ("return 2", "fail")])
    ] + [{"problem_id": "p/2", "sample_index": 0, "code": "x", "status": "fail"}]
    table = candidate_diversity(records)
    assert list(table["problem_id"]) == ["p/1", "p/2"]
    first = table.iloc[0]
    assert first["n"] == 3 and first["distinct_programs"] == 2 and first["distinct_passing"] == 1
