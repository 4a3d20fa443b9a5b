"""Reports of a run: the lane and gate reports, case pages, the index of runs, and the terminal summary.

The package imports nothing itself: each caller imports the module it needs (the command line loads only what a
command uses). `__all__` names those modules. A lane report is lane_rag.py or lane_agent.py, over `LaneData`
(lane_data.py) and the sections the two lanes share (the other lane_* modules).
"""

__all__ = [
    "case_pages",
    "case_story",
    "charts",
    "gate_report",
    "index",
    "lane_agent",
    "lane_baseline",
    "lane_data",
    "lane_evidence_diversity",
    "lane_gates",
    "lane_rag",
    "lane_reliability",
    "lane_sections",
    "lane_slices",
    "publish",
    "render",
    "summary",
    "values",
]
