"""Scorers: the stages and metrics of each lane, computed from the run's tables, and the release gates over them.

The package imports nothing itself: each caller imports the module it needs. `__all__` names the modules other
layers use; citation_verdicts, diversity, gate_counts, gate_rates and values serve the modules it names.
"""

__all__ = [
    "answer",
    "attribution",
    "calibration",
    "citations",
    "claims",
    "common",
    "context",
    "counterfactual",
    "gate_facts",
    "gate_table",
    "gates",
    "grounding",
    "outcome",
    "pairwise",
    "qrels",
    "reliability",
    "retrieval",
    "slices",
    "tools",
]
