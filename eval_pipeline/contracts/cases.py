"""Contracts of golden cases and what they refer to: corpus documents, the tool registry, tool calls and milestones."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from eval_pipeline.contracts.base import Identifier, JsonObject, StrictModel, TextId

# ---------------------------------------------------------------- corpus and tools


class CorpusDoc(StrictModel):
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


class ArgRule(StrictModel):
    """How one argument's value is compared with the reference."""

    match: MatchRule
    tolerance: float | None = Field(default=None, ge=0)

    model_config = ConfigDict(strict=False, extra="forbid")


class ValueRules(StrictModel):
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


class ToolSpec(StrictModel):
    """A tool of the registry: its argument schema and side effects; an unknown key is an error."""

    # extra="forbid": a misspelt read_only would otherwise silently make a tool writable

    name: str = Field(min_length=1)
    description: str = ""
    read_only: bool = False
    destructive: bool = False
    args: JsonObject = Field(default_factory=lambda: {"type": "object"})
    value_rules: ValueRules | None = None

    model_config = ConfigDict(extra="forbid")


class ToolRegistry(StrictModel):
    """tools.yaml of one environment version; an unknown key is an error."""

    environment_version: Identifier
    value_rules: ValueRules | None = None
    tools: list[ToolSpec]

    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- cases


class ToolCall(StrictModel):
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


class Milestone(StrictModel):
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


class Fault(StrictModel):
    """An injected fault: it strikes the first call of `tool`."""

    kind: Literal["tool_error", "empty", "timeout", "injected_instruction"]
    tool: str


TAG_KEY_MAX, TAG_VALUE_MAX = 64, 128
TAG_KEY_RE = re.compile(rf"[A-Za-z][A-Za-z0-9_-]{{0,{TAG_KEY_MAX - 1}}}")


class Case(StrictModel):
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
