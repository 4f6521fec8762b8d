"""RL datasets from a hand-made annotated file: ranking, pairing, caps and the manifest."""

import json

import pytest

from execrl.training_data.rl_data import PairSettings, build_rl_datasets, no_pairs_message


def candidate(problem, index, code, status, passed, total=3):
    return {
        "problem_id": problem,
        "sample_index": index,
        "prompt": f"prompt of {problem}",
        "completion": f"```python\n{code}\n```",
        "code": code,
        "status": status,
        "tests_passed": passed,
        "tests_total": total,
    }


@pytest.fixture
def annotations():
    return [
        # mixed: two distinct passing programs (one duplicated), three distinct failures
        candidate("mixed", 0, "def f(x):\n    return x + 1", "pass", 3),
        candidate("mixed", 1, "def f(x):\n    return x + 2", "fail", 1),
        candidate("mixed", 2, "def f(x):  \n    return x + 1", "pass", 3),  # duplicate of 0 up to whitespace
        candidate("mixed", 3, "def f(x):\n    return 1 + x", "pass", 3),
        candidate("mixed", 4, "def f(x):\n    return x", "fail", 0),
        candidate("mixed", 5, "def f(x) return", "syntax_error", 0),
        # all pass
        candidate("easy", 0, "def g():\n    return 1", "pass", 3),
        candidate("easy", 1, "def g():\n    return 2 - 1", "pass", 3),
        # none pass, with partial credit differences
        candidate("hard", 0, "def h(x):\n    return 0", "fail", 2),
        candidate("hard", 1, "def h(x):\n    raise ValueError", "error", 0),
        candidate("hard", 2, "def h(x):\n    return 1", "fail", 1),
    ]


def test_ranking_dedup_and_pairs(annotations):
    nbest, pairs, manifest = build_rl_datasets(annotations, PairSettings(max_pairs_per_problem=4, nbest_size=8))
    mixed = next(entry for entry in nbest if entry["problem_id"] == "mixed")
    # more tests passed first; among passes the shorter program; the whitespace duplicate dropped
    assert [c["sample_index"] for c in mixed["candidates"]] == [0, 3, 1, 5, 4]
    mixed_pairs = [p for p in pairs if p["problem_id"] == "mixed"]
    assert len(mixed_pairs) == 4
    assert all(p["kind"] == "pass_vs_fail" for p in mixed_pairs)
    assert all(p["chosen_tests_passed"] == 3 and p["rejected_tests_passed"] < 3 for p in mixed_pairs)
    # the cap spreads over both passing programs rather than exhausting the first
    assert {p["chosen"] for p in mixed_pairs} == {annotations[0]["completion"], annotations[3]["completion"]}
    assert all(p["chosen"] != p["rejected"] for p in pairs)
    assert {p["problem_id"] for p in pairs} == {"mixed"}

    assert manifest["n_problems"] == 3
    assert manifest["n_candidates"] == len(annotations)
    assert manifest["n_duplicate_candidates"] == 1
    assert manifest["n_pairs"] == 4
    assert manifest["n_problems_with_pairs"] == 1
    assert manifest["problems_without_pairs"] == {
        "all_pass": {"count": 1, "examples": ["easy"]},
        "none_pass": {"count": 1, "examples": ["hard"]},
    }
    json.dumps(manifest)


def test_cap_and_partial_pairs(annotations):
    _, pairs, manifest = build_rl_datasets(
        annotations, PairSettings(max_pairs_per_problem=2, include_partial=True, nbest_size=2)
    )
    by_problem = {}
    for pair in pairs:
        by_problem.setdefault(pair["problem_id"], []).append(pair)
    assert len(by_problem["mixed"]) == 2
    hard = by_problem["hard"]
    assert [p["kind"] for p in hard] == ["more_vs_less", "more_vs_less"]
    assert all(p["chosen_tests_passed"] > p["rejected_tests_passed"] for p in hard)
    assert manifest["pairs_by_kind"] == {"pass_vs_fail": 2, "more_vs_less": 2}
    assert manifest["problems_without_pairs"] == {"all_pass": {"count": 1, "examples": ["easy"]}}


def test_nbest_size_limits_list(annotations):
    nbest, _, _ = build_rl_datasets(annotations, PairSettings(nbest_size=2))
    assert all(len(entry["candidates"]) <= 2 for entry in nbest)


def test_an_empty_pairs_file_says_why_from_its_manifest(annotations, tmp_path):
    """DPO's train job stops on an empty pairs file with the manifest's reasons and both paths."""
    without_mixed = [a for a in annotations if a["problem_id"] != "mixed"]
    _, pairs, manifest = build_rl_datasets(without_mixed, PairSettings(include_partial=False))
    assert pairs == []
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    message = no_pairs_message(tmp_path / "pairs.jsonl")
    assert message.startswith(f"no preference pairs to train DPO on in {tmp_path / 'pairs.jsonl'}: of its 2 problems: ")
    assert "1 where every sample passes (e.g. easy); 1 where no sample passes (e.g. hard)" in message
    assert f"({tmp_path / 'manifest.json'})" in message
    (tmp_path / "manifest.json").unlink()
    assert "its manifest could not be read" in no_pairs_message(tmp_path / "pairs.jsonl")


def test_a_run_that_passed_every_test_and_did_not_pass_ranks_as_one_test_short():
    """It ranks below a run that passed (fewer counted tests, not the tie-break) and gives no
    partial pair over a run that failed one test."""
    over = candidate("slow", 0, "def s(x):\n    return x  # over its CPU limit after the last test", "timeout", 3)
    short = candidate("slow", 1, "def s(x):\n    return -x", "fail", 2)
    passed = candidate("fast", 0, "def t(x):\n    return x", "pass", 3)
    longer = candidate("fast", 1, "def t(x):\n    return x  # a longer program that timed out after every test", "timeout", 3)
    nbest, pairs, _ = build_rl_datasets([over, short, passed, longer], PairSettings(include_partial=True))
    ranked = {entry["problem_id"]: [c["sample_index"] for c in entry["candidates"]] for entry in nbest}
    assert ranked["fast"] == [0, 1]
    assert ranked["slow"] == [1, 0]  # equal counted tests (2): the shorter program first
    assert [p for p in pairs if p["problem_id"] == "slow"] == []
