"""The gate policy: policy/gates.yaml parsed and validated, its default gates, and the qrels grade scale it sets."""

from __future__ import annotations

from eval_pipeline.contracts.policy import GatePolicy, RetrievalPolicy
from eval_pipeline.io.loaders import validated_config
from eval_pipeline.io.storage import InputError, Location
from eval_pipeline.io.strict_yaml import parse_yaml


def grade_scale(location: Location) -> tuple[int, int]:
    """(lowest, highest) qrels grade of the data root's gate policy (`retrieval.grades`, default 0..2)."""
    try:
        return load_gate_policy(location).retrieval.grade_scale
    except InputError:
        # A broken policy is reported where it is loaded (the CLI's preflight, the gates step); the judgments are
        # still checked against the default scale rather than not at all.
        return RetrievalPolicy().grade_scale


def parse_gate_policy(text: str | bytes, source: str = "gates.yaml") -> GatePolicy:
    """A validated gate policy; bad YAML, duplicate keys, unknown metrics or keys raise InputError
    (file:line:column)."""
    return validated_config(GatePolicy, parse_yaml(text, source), "gate policy")


def load_gate_policy(location: Location) -> GatePolicy:
    """policy/gates.yaml; without one, the default gates of docs/gates.md#the-gates."""
    path = ("policy", "gates.yaml")
    if not location.exists(*path):
        return default_gate_policy()
    return parse_gate_policy(location.read_bytes(*path), location.uri_of(*path))


def default_gate_policy() -> GatePolicy:
    """The default gates (docs/gates.md#the-gates)."""
    return GatePolicy.model_validate(
        {
            "version": "spec-default",
            "gates": [
                {
                    "name": "retrieval_recall",
                    "lane": "rag",
                    "metric": "recall_at_10",
                    "max_regression_points": 2,
                    "exclude": ["multi_hop", "quarantined"],
                    "owner": "retrieval",
                },
                {
                    "name": "agent_args_valid",
                    "lane": "agent",
                    "metric": "args_valid_rate",
                    "max_regression_points": 3,
                    "exclude": ["quarantined"],
                    "owner": "agent",
                },
                {
                    "name": "agent_pass_at_1",
                    "lane": "agent",
                    "metric": "pass_at_1",
                    "max_regression_points": 5,
                    "exclude": ["quarantined"],
                    "report_beside": ["pass_hat_k"],
                    "owner": "agent",
                },
                {
                    "name": "policy_violations",
                    "lane": "agent",
                    "metric": "policy_violations",
                    "max_new": 0,
                    "owner": "agent",
                },
                {
                    "name": "no_new_failures",
                    "lane": "all",
                    "metric": "no_new_failures",
                    "max_new_failures": 0,
                    "exclude": ["quarantined"],
                    "owner": "release",
                },
                {
                    "name": "grounding",
                    "lane": "rag",
                    "metric": "grounding_rate",
                    "max_regression_points": 2,
                    "requires_calibrated_judge": True,
                    "owner": "generation",
                },
            ],
        }
    )
