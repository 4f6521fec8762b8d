"""How different a model's candidates for one problem are from each other.

Programs are compared after normalization: Python tokens with comments, blank lines and
spacing dropped (indentation kept as INDENT/DEDENT tokens), so two programs that differ only in
layout or comments count as one. Per problem:

* ``distinct_programs``: distinct normalized programs among the n candidates (1 … n);
* ``distinct_passing``: distinct normalized programs among the passing candidates;
* ``mean_similarity``: mean over pairs of candidates of difflib's ratio between their token
  sequences (1 = identical, order-aware);
* ``mean_jaccard``: mean over pairs of the Jaccard index of their token sets.

Pairs are capped per problem (a deterministic sample) so large n stays cheap.
"""

from __future__ import annotations

import difflib
import io
import itertools
import random
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable

import pandas as pd

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_FALLBACK = re.compile(r"\w+|[^\w\s]")

COLUMNS = [
    "problem_id",
    "n",
    "distinct_programs",
    "distinct_passing",
    "mean_similarity",
    "mean_jaccard",
    "n_pairs",
]


def code_tokens(code: str) -> tuple[str, ...]:
    """The program's tokens without comments and layout; a regex split when it does not tokenize."""
    tokens: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in _SKIP:
                continue
            if token.type == tokenize.INDENT:
                tokens.append("<INDENT>")
            elif token.type == tokenize.DEDENT:
                tokens.append("<DEDENT>")
            elif token.type == tokenize.NEWLINE:
                tokens.append("<NEWLINE>")
            else:
                tokens.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return tuple(_FALLBACK.findall(code))
    # A trailing NEWLINE/DEDENT run carries no information about the program.
    while tokens and tokens[-1] in ("<NEWLINE>", "<DEDENT>"):
        tokens.pop()
    return tuple(tokens)


def normalize_code(code: str) -> str:
    """A canonical text of the program: its tokens joined by single spaces."""
    return " ".join(code_tokens(code))


def sequence_similarity(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    a, b = set(a), set(b)
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def sample_pairs(n: int, max_pairs: int, seed: int = 0) -> list[tuple[int, int]]:
    """All index pairs of n items, or a deterministic sample of max_pairs of them."""
    total = n * (n - 1) // 2
    if total <= max_pairs:
        return list(itertools.combinations(range(n), 2))
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(total), max_pairs))
    pairs, index, wanted = [], 0, iter(chosen)
    target = next(wanted, None)
    for i, j in itertools.combinations(range(n), 2):
        if index == target:
            pairs.append((i, j))
            target = next(wanted, None)
            if target is None:
                break
        index += 1
    return pairs


def problem_diversity(codes: list[str], passed: list[bool], max_pairs: int = 200) -> dict:
    """Diversity statistics of one problem's candidates."""
    if len(codes) != len(passed):
        raise ValueError("codes and passed must have the same length")
    tokens = [code_tokens(code) for code in codes]
    normalized = [" ".join(t) for t in tokens]
    pairs = sample_pairs(len(codes), max_pairs)
    similarities = [sequence_similarity(tokens[i], tokens[j]) for i, j in pairs]
    jaccards = [jaccard(tokens[i], tokens[j]) for i, j in pairs]
    return {
        "n": len(codes),
        "distinct_programs": len(set(normalized)),
        "distinct_passing": len({text for text, ok in zip(normalized, passed, strict=True) if ok}),
        "mean_similarity": sum(similarities) / len(similarities) if pairs else float("nan"),
        "mean_jaccard": sum(jaccards) / len(jaccards) if pairs else float("nan"),
        "n_pairs": len(pairs),
    }


def candidate_diversity(annotations: Iterable[dict], max_pairs: int = 200) -> pd.DataFrame:
    """One row per problem (in first-seen order) from annotated candidates (`code`, `status`)."""
    by_problem: dict[str, list[dict]] = defaultdict(list)
    for record in annotations:
        by_problem[record["problem_id"]].append(record)
    rows = []
    for problem_id, records in by_problem.items():
        records = sorted(records, key=lambda r: r.get("sample_index", 0))
        stats = problem_diversity(
            [r["code"] for r in records], [r["status"] == "pass" for r in records], max_pairs=max_pairs
        )
        rows.append({"problem_id": problem_id, **stats})
    return pd.DataFrame(rows, columns=COLUMNS)
