"""Scoring settings shared by every scorer; defaults are those of docs/metrics.md, gates.yaml may override them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from eval_pipeline.contracts.policy import GatePolicy

DEFAULT_REFUSAL_PHRASES: tuple[str, ...] = (
    "i don't know",
    "i do not know",
    "i couldn't find",
    "i could not find",
    "i can't find",
    "i cannot find",
    "i don't have information",
    "i do not have information",
    "i don't have enough information",
    "i do not have enough information",
    "i'm not able to answer",
    "i am not able to answer",
    "i'm unable to answer",
    "i am unable to answer",
    "no information about",
    "not able to find",
)


@dataclass(frozen=True)
class ScoringSettings:
    """Thresholds and options of every stage scorer."""

    k: int = 10
    relevance_threshold: int = 2
    pool_depth: int = 10
    gain: str = "exponential"
    grounding_threshold: float = 1.0
    token_f1_threshold: float = 0.5
    refusal_phrases: tuple[str, ...] = field(default=DEFAULT_REFUSAL_PHRASES)
    loop_threshold: int = 3
    min_kappa: float = 0.6
    min_n: int = 50
    citations_required: bool = False

    @classmethod
    def from_policy(cls, policy: GatePolicy, **overrides) -> ScoringSettings:
        """Settings with the retrieval and judge sections of a gate policy applied."""
        base = cls(
            k=policy.retrieval.k,
            relevance_threshold=policy.retrieval.relevance_threshold,
            pool_depth=policy.retrieval.pool_depth,
            min_kappa=policy.judge.min_kappa,
            min_n=policy.judge.min_n,
        )
        return replace(base, **overrides)
