"""Typed input contracts of docs/inputs.md; the JSON Schema files in eval_pipeline/schemas are generated from these."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from eval_pipeline.contracts.identifiers import identifier_problem, text_id_problem

JsonObject = dict[str, Any]

# The JSON Schema form of identifier_problem, so exported files can be checked before they reach the pipeline.
IDENTIFIER_PATTERN = r"^(?!\s)(?!.*\s$)(?!.*\.\.)[^/\\\u0000-\u001f\u007f-\u009f]+$"


def _identifier(value: str) -> str:
    problem = identifier_problem(value)
    if problem is not None:
        # the message template is fixed: a value holding braces must not be read as a placeholder
        raise PydanticCustomError("identifier", "{message}", {"message": f"{value!r} {problem}"})
    return value


# A run id or version string: it names a folder under the data root, so it is a name and never a path (docs/inputs.md#identifiers).
Identifier = Annotated[str, AfterValidator(_identifier), Field(json_schema_extra={"pattern": IDENTIFIER_PATTERN})]


def _text_id(value: str) -> str:
    problem = text_id_problem(value)
    if problem is not None:
        raise PydanticCustomError("text_id", "{message}", {"message": f"{value!r} {problem}"})
    return value


# A case or trace id: free text shown in reports and naming case pages, so no character a reader would not see
# (bidirectional overrides, zero-width and other format or control characters).
TextId = Annotated[str, Field(min_length=1), AfterValidator(_text_id)]


class _Strict(BaseModel):
    """Base: wrong types are rejected, never coerced; unknown fields are kept out of the model."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)


# ---------------------------------------------------------------- corpus and tools


class CorpusDoc(_Strict):
    """One version of one document of the corpus."""

    doc_id: str = Field(min_length=1)
    family: str | None = None
    version: str | None = None
    current: bool = True
    indexed: bool = True
    text: str = ""
    # the source system the document comes from ("confluence", "zendesk"): docs/evidence_diversity.md counts them
    source: str | None = None


MatchRule = Literal["exact", "normalized", "numeric", "any"]
VALUE_RULE_PROFILES: dict[str, dict[str, Any]] = {
    "exact": {"match": "exact", "strict_types": False},
    # BFCL's AST checker: strings compared case- and punctuation-blind, an integer given as 2.0 is a type error
    "bfcl": {"match": "normalized", "strict_types": True},
}


class ArgRule(_Strict):
    """How one argument's value is compared with the reference."""

    match: MatchRule
    tolerance: float | None = Field(default=None, ge=0)

    model_config = ConfigDict(strict=False, extra="forbid")


class ValueRules(_Strict):
    """Value comparison rules of tool arguments (docs/agent_lane.md "Value rules"); unset fields inherit."""

    match: MatchRule | None = None
    tolerance: float | None = Field(default=None, ge=0)
    strict_types: bool | None = None
    args: dict[str, MatchRule | ArgRule] = Field(default_factory=dict)

    model_config = ConfigDict(strict=False, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _profile_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value not in VALUE_RULE_PROFILES:
                raise ValueError(f"unknown value rules profile {value!r}; known: {sorted(VALUE_RULE_PROFILES)}")
            return dict(VALUE_RULE_PROFILES[value])
        return value


class ToolSpec(_Strict):
    """A tool of the registry: its argument schema and side effects; an unknown key is an error."""

    # extra="forbid": a misspelt read_only would otherwise silently make a tool writable

    name: str = Field(min_length=1)
    description: str = ""
    read_only: bool = False
    destructive: bool = False
    args: JsonObject = Field(default_factory=lambda: {"type": "object"})
    value_rules: ValueRules | None = None

    model_config = ConfigDict(extra="forbid")


class ToolRegistry(_Strict):
    """tools.yaml of one environment version; an unknown key is an error."""

    environment_version: Identifier
    value_rules: ValueRules | None = None
    tools: list[ToolSpec]

    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- cases


class ToolCall(_Strict):
    """A tool call as a case states it; `accepted` lists every accepted value of an argument, `optional` those
    that may be left out (the BFCL form)."""

    name: str = Field(min_length=1)
    args: JsonObject = Field(default_factory=dict)
    accepted: dict[str, list[Any]] | None = None
    optional: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _accepted_values(self) -> ToolCall:
        empty = sorted(
            name for name, values in (self.accepted or {}).items() if not values and name not in self.optional
        )
        if empty:
            raise ValueError(f"accepted values of {', '.join(empty)} are empty and the argument is not optional")
        return self


class Milestone(_Strict):
    """A named predicate over the final state: one dotted path and exactly one operator."""

    path: str = Field(min_length=1)
    equals: Any = None
    not_equals: Any = None
    exists: bool | None = None
    absent: bool | None = None
    gte: float | None = None
    lte: float | None = None
    contains: Any = None

    model_config = ConfigDict(strict=False, extra="forbid")

    @model_validator(mode="after")
    def _one_operator(self) -> Milestone:
        ops = [op for op in MILESTONE_OPERATORS if op in self.model_fields_set]
        if len(ops) != 1:
            raise ValueError(f"a milestone needs exactly one operator of {MILESTONE_OPERATORS}, got {ops or 'none'}")
        return self

    @property
    def operator(self) -> str:
        return next(op for op in MILESTONE_OPERATORS if op in self.model_fields_set)

    @property
    def operand(self) -> Any:
        return getattr(self, self.operator)


MILESTONE_OPERATORS = ("equals", "not_equals", "exists", "absent", "gte", "lte", "contains")


class Fault(_Strict):
    """An injected fault: it strikes the first call of `tool`."""

    kind: Literal["tool_error", "empty", "timeout", "injected_instruction"]
    tool: str


TAG_KEY_MAX, TAG_VALUE_MAX = 64, 128
TAG_KEY_RE = re.compile(rf"[A-Za-z][A-Za-z0-9_-]{{0,{TAG_KEY_MAX - 1}}}")


class Case(_Strict):
    """A golden case (docs/inputs.md#golden-cases): the RAG contract, the agent contract, or both."""

    case_id: TextId
    case_revision: int = 1
    lanes: list[Literal["rag", "agent"]] = Field(min_length=1)
    input: str = ""
    criticality: Literal["high", "normal"] = "normal"
    # RAG contract
    required_doc_ids: list[str] = Field(default_factory=list)
    expected_answer_contains: list[str] = Field(default_factory=list)
    reference_answer: str | None = None
    expect_refusal: bool = False
    multi_hop: bool = False
    # agent contract
    allowed_tools: list[str] | None = None
    forbidden_tools: list[str] = Field(default_factory=list)
    reference_tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_match: Literal["strict_order", "unordered", "goal_only"] = "strict_order"
    alternatives: list[list[ToolCall]] = Field(default_factory=list)
    dependencies: list[list[str]] = Field(default_factory=list)
    fixtures: JsonObject = Field(default_factory=dict)
    clock: str | None = None
    milestones: dict[str, Milestone] = Field(default_factory=dict)
    fault: Fault | None = None
    unsafe_after_fault: list[str] = Field(default_factory=list)
    escalation_tools: list[str] = Field(default_factory=list)
    scope: JsonObject | None = None
    value_rules: ValueRules | None = None
    # decision slices (docs/slices.md): intent, workflow, language, permission scope ... as short strings
    tags: dict[str, str] = Field(default_factory=dict)
    # a counterfactual pair (docs/evidence_use.md): this case is `counterfactual_of` another, with one fact changed
    counterfactual_of: str | None = Field(default=None, min_length=1)
    changed_fact: str | None = Field(default=None, min_length=1)

    # YAML turns an unquoted clock into a datetime and 49.00 into a float: accept YAML's natural types.
    model_config = ConfigDict(strict=False, extra="ignore")

    @field_validator("clock", mode="before")
    @classmethod
    def _clock_as_text(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if hasattr(value, "isoformat"):
            return value.isoformat().replace("+00:00", "Z")
        return value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_are_short_strings(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        for key, tag in value.items():
            if not isinstance(key, str) or not TAG_KEY_RE.fullmatch(key):
                raise PydanticCustomError(
                    "tag_key",
                    "{message}",
                    {
                        "message": (
                            f"tag name {key!r} must be a letter then up to {TAG_KEY_MAX - 1} letters, digits, _ or -"
                        )
                    },
                )
            if not isinstance(tag, str):
                # YAML reads `language: no` as false and `tier: 1` as a number: a tag must be written as a string
                raise PydanticCustomError(
                    "tag_value",
                    "{message}",
                    {"message": (f"tag {key}: {tag!r} is a {type(tag).__name__}, not a string; quote it in the YAML")},
                )
            if not 0 < len(tag) <= TAG_VALUE_MAX or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in tag):
                raise PydanticCustomError(
                    "tag_value",
                    "{message}",
                    {
                        "message": (
                            f"tag {key}: {tag!r} must be 1 to {TAG_VALUE_MAX} characters without control characters"
                        )
                    },
                )
        return value

    @field_validator("dependencies")
    @classmethod
    def _edges_are_pairs(cls, value: list[list[str]]) -> list[list[str]]:
        for edge in value:
            if len(edge) != 2:
                raise ValueError(f"a dependency is a pair [before, after], got {edge}")
        return value

    @model_validator(mode="after")
    def _rag_contract_states_something(self) -> Case:
        # Without either there is nothing to score retrieval against and no refusal to expect: the case would be
        # not_applicable in every RAG stage and silently drop out of the recall gate.
        if "rag" in self.lanes and not self.required_doc_ids and not self.expect_refusal:
            raise PydanticCustomError(
                "rag_contract",
                "a rag case needs required_doc_ids (the documents to retrieve), or expect_refusal: true when there is "
                "nothing to retrieve",
            )
        return self

    @model_validator(mode="after")
    def _pair_names_its_fact(self) -> Case:
        if (self.counterfactual_of is None) != (self.changed_fact is None):
            raise PydanticCustomError(
                "counterfactual",
                "a counterfactual case names both counterfactual_of (the case "
                "it varies) and changed_fact (the decision-bearing fact that differs)",
            )
        if self.counterfactual_of is not None and self.counterfactual_of == self.case_id:
            raise PydanticCustomError("counterfactual", "a case cannot be the counterfactual of itself")
        return self


# ---------------------------------------------------------------- run manifest


class Candidate(_Strict):
    """The system under test."""

    system: str
    version: str | None = None


class RunManifest(_Strict):
    """run.yaml of one trace batch."""

    run_id: Identifier
    candidate: str | Candidate
    model: str | None = None
    prompt_version: Identifier | None = None
    index_version: Identifier | None = None
    corpus_version: Identifier
    environment_version: Identifier | None = None
    dataset_version: Identifier
    mode: Literal["gate", "exploratory"] = "gate"
    created_at: str | None = None
    # the run this one is gated against; without it, the gate policy's baseline_run_id
    baseline_run_id: Identifier | None = None
    citations: Literal["required", "optional"] | None = None
    # BCP 47 tag (e.g. "de-DE"): the default region for national phone numbers and ids in this run's traces
    locale: str | None = None

    model_config = ConfigDict(strict=False, extra="ignore")

    @field_validator("created_at", mode="before")
    @classmethod
    def _timestamp_as_text(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if hasattr(value, "isoformat"):
            return value.isoformat().replace("+00:00", "Z")
        return str(value)

    @property
    def candidate_label(self) -> str:
        if isinstance(self.candidate, str):
            return self.candidate
        return f"{self.candidate.system}@{self.candidate.version}" if self.candidate.version else self.candidate.system


# ---------------------------------------------------------------- traces


class RankedDoc(_Strict):
    """One entry of a ranked list."""

    doc_id: str
    score: float | None = None


class RetrievalRound(_Strict):
    """One retrieval call: the query sent, candidates before reranking, final hits."""

    round: int = 1
    tool: str | None = None
    variant: str | None = None
    query: str | None = None
    candidates: list[RankedDoc] | None = None
    hits: list[RankedDoc] = Field(default_factory=list)


class ContextChunk(_Strict):
    """A chunk that reached the model's context."""

    doc_id: str
    text: str = ""
    tokens: int | None = None


class Citation(_Strict):
    """A structured citation of the answer."""

    doc_id: str
    quote: str | None = None
    claim_index: int | None = None


class Answer(_Strict):
    """The generated answer."""

    text: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    refused: bool | None = None


class Dispatched(_Strict):
    """The runtime record at the tool-dispatch boundary."""

    tool: str
    args: JsonObject = Field(default_factory=dict)


class StateChange(_Strict):
    """One change a step made to the world state."""

    path: str
    before: Any = None
    after: Any = None


class Step(_Strict):
    """One step of an agent trajectory."""

    index: int
    kind: str
    tool: str | None = None
    args: JsonObject | None = None
    status: str | None = None
    result: Any = None
    error: str | None = None
    state_diff: list[StateChange] | None = None
    dispatched: Dispatched | None = None
    content: str | None = None


class Usage(_Strict):
    """Tokens, cost and latency of the attempt."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None


class Trace(_Strict):
    """One attempt of one case (docs/inputs.md#traces)."""

    trace_id: TextId
    case_id: TextId
    case_revision: int | None = None
    attempt: int = 1
    status: Literal["ok", "error", "timeout"] = "ok"
    error: str | None = None
    input: str | None = None
    retrieval: list[RetrievalRound] | None = None
    context: list[ContextChunk] | None = None
    answer: Answer | None = None
    steps: list[Step] | None = None
    final_state: JsonObject | None = None
    usage: Usage | None = None


# ---------------------------------------------------------------- labels and policy


class QrelsJudgment(_Strict):
    """A relevance judgment: 2 supporting, 1 related, 0 irrelevant (the policy's `retrieval.grades` is the scale)."""

    query_id: str
    doc_id: str
    grade: int
    source: str = "human"
    annotator: str | None = None


class GroundingLabel(_Strict):
    """A human verdict on one claim, or on the whole answer."""

    trace_id: str
    claim: str | None = None
    verdict: Literal["SUPPORTED", "CONTRADICTED", "NOT_IN_EVIDENCE"] | None = None
    answer_grounded: bool | None = None

    @model_validator(mode="after")
    def _claim_or_answer(self) -> GroundingLabel:
        claim_level = self.claim is not None and self.verdict is not None
        answer_level = self.answer_grounded is not None
        if claim_level == answer_level:
            raise ValueError("a grounding label has either claim+verdict or answer_grounded")
        return self


# The grade a case's required_doc_ids are seeded at in the qrels (docs/inputs.md#qrels).
SEED_GRADE = 2
DEFAULT_GRADES = (0, 2)


class RetrievalPolicy(_Strict):
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


class JudgePolicy(_Strict):
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


class GateSpec(_Strict):
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


class GatePolicy(_Strict):
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
        return _identifier(value) if isinstance(value, str) else value


CONTRACTS: dict[str, type[BaseModel]] = {
    "corpus_doc": CorpusDoc,
    "tool_registry": ToolRegistry,
    "case": Case,
    "run_manifest": RunManifest,
    "trace": Trace,
    "qrels_judgment": QrelsJudgment,
    "grounding_label": GroundingLabel,
    "gate_policy": GatePolicy,
}
