"""Timing statistics: ratio of medians, a bootstrap confidence interval and a one-sided rank test.

Calls timed inside one process are not independent (same placement, same page layout, same
neighbours on the machine), so when samples come grouped by process, the interval resamples
whole processes and the rank test compares per-process medians. Treating every call as an
independent sample understates the noise and turns drift into false wins.
"""

from __future__ import annotations

import numpy as np

Samples = list[float] | list[list[float]]


def _groups(xs: Samples) -> list[np.ndarray]:
    if xs and isinstance(xs[0], list):
        return [np.asarray(g, dtype=float) for g in xs if g]  # type: ignore[arg-type]
    return [np.asarray([x], dtype=float) for x in xs]  # type: ignore[arg-type]


def median(xs: Samples) -> float:
    return float(np.median(np.concatenate(_groups(xs))))


def ratio_of_medians(baseline: Samples, candidate: Samples, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """Speedup median(baseline)/median(candidate) and its 95% percentile-bootstrap interval.

    Each argument is a flat list of times, or a list of per-process lists (then processes are
    resampled as units, and the calls of a resampled process come along).
    """
    bg, cg = _groups(baseline), _groups(candidate)
    point = median(baseline) / median(candidate)
    rng = np.random.default_rng(seed)
    ratios = _resampled_medians(bg, rng, resamples) / _resampled_medians(cg, rng, resamples)
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    return point, float(lo), float(hi)


def _resampled_medians(groups: list[np.ndarray], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of `resamples` bootstrap samples drawn by resampling whole groups."""
    picks = rng.integers(0, len(groups), size=(resamples, len(groups)))
    if len({g.size for g in groups}) == 1:  # the usual case: vectorized
        table = np.stack(groups)  # (groups, calls)
        return np.median(table[picks].reshape(resamples, -1), axis=1)
    return np.array([np.median(np.concatenate([groups[j] for j in row])) for row in picks])


def faster_p_value(baseline: Samples, candidate: Samples) -> float:
    """One-sided Mann-Whitney U p-value for 'candidate times are smaller than baseline times',
    on per-process medians when samples are grouped by process."""
    from scipy.stats import mannwhitneyu

    b = [float(np.median(g)) for g in _groups(baseline)]
    c = [float(np.median(g)) for g in _groups(candidate)]
    if len(set(b) | set(c)) == 1:
        return 1.0
    return float(mannwhitneyu(b, c, alternative="greater").pvalue)
