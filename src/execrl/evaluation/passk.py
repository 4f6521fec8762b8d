"""The unbiased pass@k estimator (Chen et al., 2021) and its aggregation over problems."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n passes.

    Uses the product form 1 - prod_{i=n-c+1}^{n} (1 - k/i), which equals
    1 - C(n-c, k) / C(n, k) without computing large binomials.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass@k over problems given (n, c) per problem."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        raise ValueError("no problems to average")
    return float(np.mean(values))


def feasible_ks(ks: Sequence[int], n: int) -> list[int]:
    """The configured ks that n samples per problem can estimate."""
    return [k for k in ks if k <= n]
