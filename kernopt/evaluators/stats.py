"""Timing statistics: ratio of medians, a bootstrap confidence interval and a one-sided rank test."""

from __future__ import annotations

import numpy as np


def ratio_of_medians(baseline: list[float], candidate: list[float], resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """Speedup median(baseline)/median(candidate) and its 95% percentile-bootstrap interval."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    point = float(np.median(b) / np.median(c))
    rng = np.random.default_rng(seed)
    bs = np.median(rng.choice(b, size=(resamples, b.size), replace=True), axis=1)
    cs = np.median(rng.choice(c, size=(resamples, c.size), replace=True), axis=1)
    lo, hi = np.quantile(bs / cs, [0.025, 0.975])
    return point, float(lo), float(hi)


def faster_p_value(baseline: list[float], candidate: list[float]) -> float:
    """One-sided Mann-Whitney U p-value for 'candidate times are smaller than baseline times'."""
    from scipy.stats import mannwhitneyu

    if len(set(baseline) | set(candidate)) == 1:
        return 1.0
    return float(mannwhitneyu(baseline, candidate, alternative="greater").pvalue)


def median(xs: list[float]) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))
