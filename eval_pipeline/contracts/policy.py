"""Contract of the gate policy (data/policy/gates.yaml): retrieval and judge settings and the release gates."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from eval_pipeline.contracts.base import Identifier, StrictModel, check_identifier
from eval_pipeline.contracts.cases import TAG_KEY_MAX, TAG_KEY_RE, TAG_VALUE_MAX

# The grade a case's required_doc_ids are seeded at in the qrels (docs/inputs.md#qrels).
SEED_GRADE = 2
DEFAULT_GRADES = (0, 2)


class RetrievalPolicy(StrictModel):
    """Retrieval settings of the gate policy; `grades` is the [lowest, highest] grade a qrels judgment may give."""

    k: int = Field(default=10, ge=1)
    relevance_threshold: int = 2
    pool_depth: int = Field(default=10, ge=1)
    grades: list[int] = Field(default_factory=lambda: list(DEFAULT_GRADES), min_length=2, max_length=2)
    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="after")
    def _scale_holds_threshold_and_seed(self) -> RetrievalPolicy:
        low, high = self.grades
        if low > high:
            raise ValueError(f"grades is [lowest, highest], got [{low}, {high}]")
        if not low <= self.relevance_threshold <= high:
            raise ValueError(f"relevance_threshold {self.relevance_threshold} is outside grades [{low}, {high}]")
        if not low <= SEED_GRADE <= high:
            raise ValueError(f"grades [{low}, {high}] must hold the seed grade {SEED_GRADE} of required_doc_ids")
        return self

    @property
    def grade_scale(self) -> tuple[int, int]:
        """(lowest, highest) grade of a judgment."""
        return self.grades[0], self.grades[1]


class JudgePolicy(StrictModel):
    """When the judge may gate."""

    min_kappa: float = 0.6
    min_n: int = 50
    # A judge profile (thresholds of the local or model judge), relative to the data root; default: the shipped one.
    profile: str | None = None
    model_config = ConfigDict(strict=False, extra="forbid")

    @field_validator("profile")
    @classmethod
    def _relative_inside(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith(("/", "\\")) or ".." in value.replace("\\", "/").split("/")):
            raise ValueError("judge.profile is a path inside the data root (no leading / and no ..)")
        return value


GATE_METRICS = (
    "recall_at_10",
    "args_valid_rate",
    "pass_at_1",
    "policy_violations",
    "no_new_failures",
    "grounding_rate",
    "evidence_ignored",
)


# Decision slices (docs/slices.md): the dimensions a gate's `segment` may name; `tags.<name>` names a case tag.
SLICE_DIMENSIONS = ("criticality", "corpus_family", "tool_risk")
TAG_DIMENSION_PREFIX = "tags."
CRITICALITIES = ("high", "normal")
TOOL_RISKS = ("read_only", "write", "destructive")
DEFAULT_MIN_CASES = 5


def _segment_error(message: str) -> PydanticCustomError:
    return PydanticCustomError("segment", "{message}", {"message": message})


def _check_segment(segment: dict) -> None:
    """Raise unless every key of a gate's segment is a slice dimension with a value it can take."""
    if not segment:
        raise _segment_error(
            "segment names no slice: give one or more of criticality, tags.<name>, corpus_family, "
            "tool_risk, or leave segment out"
        )
    for key, value in segment.items():
        if not isinstance(key, str) or not (key in SLICE_DIMENSIONS or key.startswith(TAG_DIMENSION_PREFIX)):
            raise _segment_error(f"unknown segment key {key!r}; known: {', '.join(SLICE_DIMENSIONS)}, tags.<name>")
        if not isinstance(value, str):
            raise _segment_error(
                f"segment {key}: {value!r} is a {type(value).__name__}, not a string; quote it in the YAML"
            )
        allowed = {"criticality": CRITICALITIES, "tool_risk": TOOL_RISKS}.get(key)
        if allowed and value not in allowed:
            raise _segment_error(f"segment {key}: {value!r} is not one of {', '.join(allowed)}")
        tag = key.removeprefix(TAG_DIMENSION_PREFIX) if key.startswith(TAG_DIMENSION_PREFIX) else None
        if tag is not None and not TAG_KEY_RE.fullmatch(tag):
            raise _segment_error(
                f"segment {key}: tag name {tag!r} must be a letter then up to {TAG_KEY_MAX - 1} letters, digits, _ or -"
            )
        if not 0 < len(value) <= TAG_VALUE_MAX or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
            raise _segment_error(
                f"segment {key}: {value!r} must be 1 to {TAG_VALUE_MAX} characters without control characters"
            )


class GateSpec(StrictModel):
    """One release gate; unknown metrics or keys are errors at load time."""

    name: str
    lane: Literal["rag", "agent", "all"]
    metric: str
    max_regression_points: float | None = None
    max_new: int | None = None
    max_new_failures: int | None = None
    exclude: list[Literal["multi_hop", "quarantined"]] = Field(default_factory=list)
    report_beside: list[str] = Field(default_factory=list)
    requires_calibrated_judge: bool = False
    owner: str | None = None
    # a decision slice (docs/slices.md): the gate is computed on that slice's cases only; several keys must all hold
    segment: dict[str, str] | None = None
    # fewer complete cases in the slice than this (default: the policy's min_cases) make the gate `insufficient`
    min_cases: int | None = Field(default=None, ge=1)

    model_config = ConfigDict(strict=False, extra="forbid")

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        if value not in GATE_METRICS:
            raise ValueError(f"unknown gate metric {value!r}; known: {', '.join(GATE_METRICS)}")
        return value

    @field_validator("segment", mode="before")
    @classmethod
    def _segment_names_a_slice(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise _segment_error("segment is a mapping of slice dimensions to values, e.g. {criticality: high}")
        if value is not None:
            _check_segment(value)
        return value

    @model_validator(mode="after")
    def _min_cases_of_a_slice(self) -> GateSpec:
        if self.min_cases is not None and self.segment is None:
            raise _segment_error(f"gate {self.name}: min_cases applies to a segmented gate only (add a segment)")
        # the agent lane reads no corpus (a corpus bump never re-scores it): families slice the rag lane and `all`
        if self.segment and "corpus_family" in self.segment and self.lane == "agent":
            raise _segment_error(
                f"gate {self.name}: corpus_family slices by required documents, a rag contract: use it "
                "on a rag or all gate"
            )
        return self


class GatePolicy(StrictModel):
    """data/policy/gates.yaml."""

    version: str | int
    baseline_run_id: Identifier | None = None
    retrieval: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    judge: JudgePolicy = Field(default_factory=JudgePolicy)
    # a segmented gate whose slice has fewer complete cases is `insufficient` (docs/slices.md); a gate may override it
    min_cases: int = Field(default=DEFAULT_MIN_CASES, ge=1)
    gates: list[GateSpec]

    model_config = ConfigDict(strict=False, extra="forbid")

    @field_validator("version")
    @classmethod
    def _version_is_a_name(cls, value: str | int) -> str | int:
        # checked here rather than with Identifier, so a bad version gets one error instead of one per union member
        return check_identifier(value) if isinstance(value, str) else value
