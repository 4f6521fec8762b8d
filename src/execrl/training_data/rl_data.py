"""RL datasets from annotated candidates: n-best lists and preference pairs for DPO.

Ranking rule (n-best and pairing): more tests passed first; among equals a `pass` verdict
first, then the shorter program, then the lower sample index. Candidates whose code is
identical after whitespace normalisation count once (the best-ranked copy is kept).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from execrl.sandbox.result import counted_tests_passed


@dataclass(frozen=True)
class PairSettings:
    """How preference pairs are drawn from a problem's candidates."""

    max_pairs_per_problem: int = 4
    """Cap on pairs from one problem, so easy problems do not dominate."""
    include_partial: bool = False
    """Also pair a more-passing failure against a less-passing one when no candidate passes."""
    nbest_size: int = 8
    """Candidates kept per problem in the n-best list."""


def normalized_code(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def rank_key(record: dict) -> tuple:
    return (-counted_tests_passed(record), record["status"] != "pass", len(record["code"]), record["sample_index"])


def distinct_ranked(records: list[dict]) -> list[dict]:
    seen: set[str] = set()
    ranked = []
    for record in sorted(records, key=rank_key):
        key = normalized_code(record["code"])
        if key in seen:
            continue
        seen.add(key)
        ranked.append(record)
    return ranked


def _pair(problem_id: str, chosen: dict, rejected: dict, kind: str) -> dict:
    return {
        "problem_id": problem_id,
        "prompt": chosen["prompt"],
        "chosen": chosen["completion"],
        "rejected": rejected["completion"],
        "chosen_tests_passed": chosen["tests_passed"],
        "rejected_tests_passed": rejected["tests_passed"],
        "tests_total": chosen["tests_total"],
        "kind": kind,
    }


def problem_pairs(problem_id: str, ranked: list[dict], settings: PairSettings) -> tuple[list[dict], str | None]:
    """Pairs for one problem, and the reason when there are none."""
    passing = [r for r in ranked if r["status"] == "pass"]
    failing = [r for r in ranked if r["status"] != "pass"]
    pairs: list[dict] = []
    if passing and failing:
        # Walk the grid diagonally so the cap spreads pairs over distinct programs on both sides.
        grid = sorted(
            ((i, j) for i in range(len(passing)) for j in range(len(failing))), key=lambda ij: (ij[0] + ij[1], ij[0])
        )
        pairs = [_pair(problem_id, passing[i], failing[j], "pass_vs_fail") for i, j in grid]
    elif settings.include_partial and failing and not passing:
        for i, better in enumerate(failing):
            for worse in failing[i + 1 :]:
                if counted_tests_passed(better) > counted_tests_passed(worse):
                    pairs.append(_pair(problem_id, better, worse, "more_vs_less"))
    pairs = pairs[: settings.max_pairs_per_problem]
    if pairs:
        return pairs, None
    return [], "all_pass" if not failing else "none_pass"


def build_rl_datasets(annotations: list[dict], settings: PairSettings) -> tuple[list[dict], list[dict], dict]:
    """n-best lists, preference pairs and a manifest of what was (and was not) paired."""
    by_problem: dict[str, list[dict]] = defaultdict(list)
    for record in annotations:
        by_problem[record["problem_id"]].append(record)
    nbest, pairs = [], []
    reasons: dict[str, list[str]] = defaultdict(list)
    kinds: Counter = Counter()
    duplicates = 0
    for problem_id in sorted(by_problem):
        records = by_problem[problem_id]
        ranked = distinct_ranked(records)
        duplicates += len(records) - len(ranked)
        nbest.append(
            {
                "problem_id": problem_id,
                "prompt": records[0]["prompt"],
                "candidates": [
                    {k: r[k] for k in ("sample_index", "completion", "code", "status", "tests_passed", "tests_total")}
                    for r in ranked[: settings.nbest_size]
                ],
            }
        )
        problem_pair_list, reason = problem_pairs(problem_id, ranked, settings)
        pairs.extend(problem_pair_list)
        kinds.update(p["kind"] for p in problem_pair_list)
        if reason:
            reasons[reason].append(problem_id)
    manifest = {
        "n_problems": len(by_problem),
        "n_candidates": len(annotations),
        "n_duplicate_candidates": duplicates,
        "n_pairs": len(pairs),
        "pairs_by_kind": dict(kinds),
        "n_problems_with_pairs": len({p["problem_id"] for p in pairs}),
        "problems_without_pairs": {
            reason: {"count": len(ids), "examples": ids[:10]} for reason, ids in sorted(reasons.items())
        },
        "settings": asdict(settings),
    }
    return nbest, pairs, manifest


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


NO_PAIR_REASONS = {"all_pass": "where every sample passes", "none_pass": "where no sample passes"}


def no_pairs_message(pairs_path: str | Path) -> str:
    """Why a pairs file is empty, from the manifest beside it (``build_rl_datasets``): what DPO's
    train job says before it stops, naming both files."""
    manifest_path = Path(pairs_path).with_name("manifest.json")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        reasons = "; ".join(
            f"{entry['count']} {NO_PAIR_REASONS.get(reason, reason)} (e.g. {', '.join(entry['examples'][:3])})"
            for reason, entry in manifest["problems_without_pairs"].items()
        )
        why = f"of its {manifest['n_problems']} problems: {reasons or 'none'}"
    except (OSError, ValueError, KeyError, TypeError) as error:
        why = f"its manifest could not be read ({error})"
    return (f"no preference pairs to train DPO on in {pairs_path}: {why} ({manifest_path}); a pair needs a "
            f"passing and a failing sample of one problem from the base model")
