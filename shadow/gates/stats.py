"""Confidence bounds for divergence rates.

A surface's failure rate is estimated from ``k`` failing fixtures out of ``n``.  The
gate judges the *upper* end of the one-sided Wilson score interval, so a phase cannot
pass on too little evidence: with 0 failures out of 5 fixtures the 95 % upper bound is
still 0.35; it falls below 0.25 only from 9 clean fixtures on.
"""

from __future__ import annotations

import math
from statistics import NormalDist


def z_for(confidence: float) -> float:
    """One-sided normal quantile for ``confidence`` (0.95 -> 1.645)."""
    return NormalDist().inv_cdf(confidence)


def wilson_upper(k: int, n: int, confidence: float = 0.95) -> float:
    """Upper bound of the one-sided Wilson score interval for ``k`` of ``n``.

    ``n == 0`` gives 1.0 (nothing is known).  The result is clamped to ``[0, 1]``.
    """
    if n <= 0:
        return 1.0
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    z = z_for(confidence)
    p = k / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return min(1.0, max(0.0, (centre + margin) / (1 + z2 / n)))


def min_fixtures_for(max_upper: float, confidence: float = 0.95) -> int:
    """Smallest ``n`` whose bound with zero failures is at most ``max_upper``."""
    if max_upper >= 1.0:
        return 0
    if max_upper <= 0.0:
        raise ValueError("a zero upper bound is never reached")
    z2 = z_for(confidence) ** 2
    return math.ceil(z2 * (1 - max_upper) / max_upper)
