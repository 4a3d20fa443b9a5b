"""Agreement of two raters' labels: Cohen's κ with its bootstrap interval, balanced accuracy, the confusion matrix.

κ is Cohen's kappa (null when undefined: both sides used one and the same category); its 95% interval is the
percentile bootstrap (numpy default_rng(seed), resampling label pairs with replacement, undefined replicates
skipped, linear-interpolated 2.5th and 97.5th percentiles).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _encode(a: Sequence[Any], b: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, int]:
    left, right = list(a), list(b)
    if len(left) != len(right):
        raise ValueError(f"label sequences differ in length: {len(left)} vs {len(right)}")
    categories = {value: i for i, value in enumerate(sorted(set(left) | set(right), key=str))}
    return (
        np.array([categories[v] for v in left], dtype=np.int64),
        np.array([categories[v] for v in right], dtype=np.int64),
        len(categories),
    )


def _kappa_from_counts(counts: np.ndarray) -> np.ndarray:
    """Cohen's κ of confusion counts shaped (..., K, K); NaN where undefined."""
    n = counts.sum(axis=(-2, -1))
    observed = np.trace(counts, axis1=-2, axis2=-1) / n
    expected = (counts.sum(axis=-1) * counts.sum(axis=-2)).sum(axis=-1) / n**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isclose(expected, 1.0), np.nan, (observed - expected) / (1.0 - expected))


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) of two raters' labels; None when empty or undefined (p_e = 1)."""
    x, y, k = _encode(a, b)
    if x.size == 0:
        return None
    counts = np.bincount(x * k + y, minlength=k * k).reshape(k, k)
    value = float(_kappa_from_counts(counts))
    return None if np.isnan(value) else value


def bootstrap_kappa_ci(
    a: Sequence[Any], b: Sequence[Any], n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of Cohen's κ (module docstring); (None, None) when no replicate is defined."""
    x, y, k = _encode(a, b)
    n = x.size
    if n == 0 or n_boot < 1:
        return None, None
    rng = np.random.default_rng(seed)
    pair_codes = x * k + y
    kappas = []
    # Replicates in blocks bound memory at block × n indices.
    block = max(1, min(n_boot, 2_000_000 // n))
    for start in range(0, n_boot, block):
        size = min(block, n_boot - start)
        sample = pair_codes[rng.integers(0, n, size=(size, n))]
        offsets = (np.arange(size) * k * k)[:, None]
        counts = np.bincount((sample + offsets).ravel(), minlength=size * k * k).reshape(size, k, k)
        kappas.append(_kappa_from_counts(counts))
    values = np.concatenate(kappas)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def balanced_accuracy(truth: Sequence[Any], predicted: Sequence[Any]) -> float | None:
    """Mean over the true classes present of the share of that class predicted right; None when empty."""
    pairs = list(zip(truth, predicted, strict=True))
    if not pairs:
        return None
    recalls = []
    for label in sorted({t for t, _ in pairs}, key=str):
        rows = [p for t, p in pairs if t == label]
        recalls.append(sum(p == label for p in rows) / len(rows))
    return float(sum(recalls) / len(recalls))


def confusion_matrix(
    truth: Sequence[Any], predicted: Sequence[Any], labels: Sequence[Any] | None = None
) -> dict[str, dict[str, int]]:
    """{true label: {predicted label: count}} over `labels` (default: every label seen), zeros included."""
    pairs = list(zip(truth, predicted, strict=True))
    names = list(labels) if labels is not None else sorted({v for pair in pairs for v in pair}, key=str)
    matrix = {str(t): {str(p): 0 for p in names} for t in names}
    for t, p in pairs:
        matrix.setdefault(str(t), {str(q): 0 for q in names})
        matrix[str(t)][str(p)] = matrix[str(t)].get(str(p), 0) + 1
    return matrix
