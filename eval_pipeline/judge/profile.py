"""Judge profiles: the decision thresholds of a scoring judge (local or model), fitted on labelled data, in YAML.

A scoring judge gives every claim a support score in [0, 1]; the profile says where SUPPORTED begins
(`support`) and how much of a claim must be on topic before a conflict makes it CONTRADICTED
(`contradiction_overlap`). Its digest (the backend and the two thresholds, not the provenance) is part of
the judge version, so verdicts of two profiles are never mixed, reused or compared as one judge.

`fit_support_threshold` chooses `support` on labelled scores: the threshold that maximises balanced accuracy
(the mean over label sets, each counting equally), taken in the middle of the best interval of scores, with a
percentile bootstrap interval of that balanced accuracy (seeded; label sets resampled separately).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from eval_pipeline.io.strict_yaml import YamlError, load_yaml
from eval_pipeline.judge.base import JudgeConfigError

PROFILE_VERSION = 1
SCORING_BACKENDS = ("local", "model")
# A claim with less than half its words in the evidence is never supported: the local judge halves the score for
# every missing number, name or conflict, so thresholds above 0.5 make those rules hold whatever the fit says.
MIN_SUPPORT = {"local": 0.5, "model": 0.0}
DEFAULT_PROFILE_FILES = {"local": "local.yaml"}
_KEYS = {"profile_version", "backend", "thresholds", "fitted"}
_THRESHOLD_KEYS = {"support", "contradiction_overlap"}


@dataclass(frozen=True)
class JudgeProfile:
    """Decision thresholds of a scoring judge and where they came from."""

    backend: str = "local"
    support_threshold: float = 0.6
    contradiction_overlap: float = 0.75
    source: str = "built-in"
    fitted: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.backend not in SCORING_BACKENDS:
            raise JudgeConfigError(
                f"{self.source}: a judge profile is for a scoring backend ({', '.join(SCORING_BACKENDS)}), "
                f"not {self.backend!r}"
            )
        low = MIN_SUPPORT[self.backend]
        if not low < self.support_threshold <= 1.0:
            raise JudgeConfigError(
                f"{self.source}: thresholds.support must be in ({low:g}, 1], got {self.support_threshold!r}"
            )
        if not 0.0 < self.contradiction_overlap <= 1.0:
            raise JudgeConfigError(
                f"{self.source}: thresholds.contradiction_overlap must be in (0, 1], got {self.contradiction_overlap!r}"
            )

    @property
    def digest(self) -> str:
        """8 hex digits of SHA-256 over the backend and the thresholds (not the provenance)."""
        decision = {
            "backend": self.backend,
            "support": round(self.support_threshold, 6),
            "contradiction_overlap": round(self.contradiction_overlap, 6),
        }
        return hashlib.sha256(json.dumps(decision, sort_keys=True).encode()).hexdigest()[:8]

    def to_yaml(self) -> str:
        """The profile as a YAML document (the format `from_yaml` reads)."""
        document = {
            "profile_version": PROFILE_VERSION,
            "backend": self.backend,
            "thresholds": {
                "support": round(self.support_threshold, 6),
                "contradiction_overlap": round(self.contradiction_overlap, 6),
            },
            "fitted": self.fitted,
        }
        return f"# eval_pipeline judge profile (digest {self.digest})\n" + yaml.safe_dump(
            document, sort_keys=False, allow_unicode=True
        )

    @classmethod
    def from_yaml(cls, text: str, source: str) -> JudgeProfile:
        """A profile from YAML text; unknown keys, bad values and a missing backend or threshold are errors."""
        try:
            document = load_yaml(text, source)
        except YamlError as exc:
            raise JudgeConfigError(f"not valid YAML: {exc}") from exc
        if not isinstance(document, dict):
            raise JudgeConfigError(f"{source}: a judge profile is a mapping with backend and thresholds")
        unknown = set(document) - _KEYS
        if unknown:
            raise JudgeConfigError(f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        if document.get("profile_version", PROFILE_VERSION) != PROFILE_VERSION:
            raise JudgeConfigError(
                f"{source}: profile_version {document.get('profile_version')!r} is not {PROFILE_VERSION}"
            )
        thresholds = document.get("thresholds")
        if not isinstance(thresholds, dict) or "support" not in thresholds:
            raise JudgeConfigError(f"{source}: thresholds.support is required")
        unknown = set(thresholds) - _THRESHOLD_KEYS
        if unknown:
            raise JudgeConfigError(f"{source}: unknown threshold(s) {', '.join(sorted(map(str, unknown)))}")
        values = {}
        for key in _THRESHOLD_KEYS & set(thresholds):
            value = thresholds[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise JudgeConfigError(f"{source}: thresholds.{key} must be a number, got {value!r}")
            values[key] = float(value)
        fitted = document.get("fitted") or {}
        if not isinstance(fitted, dict):
            raise JudgeConfigError(f"{source}: fitted must be a mapping")
        return cls(
            backend=str(document.get("backend", "")),
            support_threshold=values["support"],
            contradiction_overlap=values.get("contradiction_overlap", 0.75),
            source=source,
            fitted=fitted,
        )


def load_profile(path: str | Path) -> JudgeProfile:
    """The profile in a YAML file."""
    file = Path(path)
    if not file.is_file():
        raise JudgeConfigError(f"judge profile {path} does not exist")
    return JudgeProfile.from_yaml(file.read_text(encoding="utf-8"), str(path))


def default_profile(backend: str) -> JudgeProfile:
    """The shipped profile of a backend (`eval_pipeline/judge/profiles/`), else its built-in thresholds."""
    name = DEFAULT_PROFILE_FILES.get(backend)
    if name is None:
        return JudgeProfile(backend=backend, support_threshold=0.5, source=f"built-in {backend} default")
    text = resources.files("eval_pipeline.judge").joinpath("profiles", name).read_text(encoding="utf-8")
    return JudgeProfile.from_yaml(text, f"default {backend} profile")


def resolve_profile(backend: str, profile: JudgeProfile | str | Path | None) -> JudgeProfile:
    """`profile` (or the profile at that path), which must be for `backend`; else the backend's default."""
    if profile is None or profile == "":
        return default_profile(backend)
    chosen = profile if isinstance(profile, JudgeProfile) else load_profile(profile)
    if chosen.backend != backend:
        raise JudgeConfigError(f"judge profile {chosen.source} is for the {chosen.backend} backend, not {backend}")
    return chosen


@dataclass(frozen=True)
class ThresholdFit:
    """The chosen support threshold and how it scores on each label set."""

    threshold: float
    balanced_accuracy: float
    ci_low: float
    ci_high: float
    per_set: list[dict[str, Any]]


def _balanced_accuracy(truth: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Balanced accuracy along the last axis (rows of predictions against one truth vector); NaN when a class is
    absent."""
    positives, negatives = truth.sum(), (~truth).sum()
    if positives == 0 or negatives == 0:
        return np.full(predicted.shape[:-1], np.nan)
    sensitivity = (predicted & truth).sum(axis=-1) / positives
    specificity = (~predicted & ~truth).sum(axis=-1) / negatives
    return (sensitivity + specificity) / 2


def fit_support_threshold(
    sets: list[tuple[str, np.ndarray, np.ndarray]], minimum: float = 0.5, n_boot: int = 1000, seed: int = 0
) -> ThresholdFit:
    """Threshold in (minimum, 1] maximising mean balanced accuracy over label sets (name, scores, grounded truth)."""
    usable = [(name, np.asarray(s, float), np.asarray(t, bool)) for name, s, t in sets if len(s)]
    if not usable:
        raise ValueError("no labelled scores to fit on")
    for name, _scores, truth in usable:
        if truth.all() or not truth.any():
            raise ValueError(f"label set {name} has only one class: balanced accuracy is undefined")
    everything = np.unique(np.concatenate([s for _, s, _ in usable]))
    edges = np.unique(np.concatenate([everything[everything > minimum], [1.0]]))
    # A threshold at a score predicts that score as supported; between two scores nothing changes.
    mean = np.mean([_balanced_accuracy(t, s[None, :] >= edges[:, None]) for _, s, t in usable], axis=0)
    best = int(np.argmax(mean))
    below = max([minimum, *everything[everything < edges[best]]])
    threshold = round(float((edges[best] + below) / 2), 4) if edges[best] > below else float(edges[best])
    threshold = min(max(threshold, np.nextafter(minimum, 1.0)), 1.0)
    rng = np.random.default_rng(seed)
    replicates = []
    for _, scores, truth in usable:
        index = rng.integers(0, len(scores), size=(n_boot, len(scores)))
        replicates.append(_balanced_accuracy_rows(truth[index], scores[index] >= threshold))
    stack = np.vstack(replicates)
    defined = (~np.isnan(stack)).sum(axis=0)
    # A replicate counts the label sets in which it drew both classes; one with none is skipped.
    boot = np.nansum(stack, axis=0)[defined > 0] / defined[defined > 0]
    low, high = np.percentile(boot, [2.5, 97.5]) if boot.size else (np.nan, np.nan)
    per_set = []
    for name, scores, truth in usable:
        predicted = scores >= threshold
        per_set.append(
            {
                "labels": name,
                "n": int(len(scores)),
                "grounded": int(truth.sum()),
                "balanced_accuracy": round(float(_balanced_accuracy(truth, predicted)), 4),
            }
        )
    value = float(np.mean([p["balanced_accuracy"] for p in per_set]))
    return ThresholdFit(
        threshold=threshold,
        balanced_accuracy=round(value, 4),
        ci_low=round(float(low), 4),
        ci_high=round(float(high), 4),
        per_set=per_set,
    )


def _balanced_accuracy_rows(truth: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Balanced accuracy of each row pair (bootstrap replicates); NaN where a replicate lacks a class."""
    positives, negatives = truth.sum(axis=1), (~truth).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sensitivity = (predicted & truth).sum(axis=1) / positives
        specificity = (~predicted & ~truth).sum(axis=1) / negatives
    return np.where((positives > 0) & (negatives > 0), (sensitivity + specificity) / 2, np.nan)


def fitted_profile(base: JudgeProfile, fit: ThresholdFit, provenance: dict[str, Any]) -> JudgeProfile:
    """`base` with the fitted support threshold and a record of the fit."""
    record = {
        **provenance,
        "objective": "balanced accuracy, mean over label sets",
        "balanced_accuracy": fit.balanced_accuracy,
        "balanced_accuracy_ci95": [fit.ci_low, fit.ci_high],
        "label_sets": fit.per_set,
    }
    return replace(base, support_threshold=fit.threshold, fitted=record, source="fitted")
