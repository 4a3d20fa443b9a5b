"""A story beside the baseline run's story of the same case, as a table and as terminal lines.

Attempts are paired by number; every stage status and metric is set side by side with its delta.
"""

from __future__ import annotations

import math

import polars as pl

from eval_pipeline.reporting.case_story.formatting import DIGITS, delta_cell, fmt
from eval_pipeline.reporting.case_story.model import CASE_METRICS, Attempt, CaseStory, pass_hat_columns
from eval_pipeline.reporting.values import MISSING


def _changed(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return not (a == b or math.isclose(a, b, rel_tol=0, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)))
    return a != b


def _delta(a, b) -> float | None:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return float(b) - float(a)


def _paired(story: CaseStory, baseline: CaseStory) -> list[tuple[int | None, Attempt | None, Attempt | None]]:
    """(attempt number, baseline attempt, this run's attempt), paired by attempt number; only the focus with one."""
    focus = next((a for a in story.attempts if a.trace_id == story.focus), None)
    numbers = (
        [focus.attempt]
        if focus
        else list(dict.fromkeys([a.attempt for a in story.attempts] + [a.attempt for a in baseline.attempts]))
    )
    return [(n, baseline.attempt_of(n), story.attempt_of(n)) for n in numbers]


def _case_metrics(story: CaseStory) -> dict[str, object]:
    row = story.reliability[0] if story.reliability else {}
    return {k: row[k] for k in (*CASE_METRICS, *pass_hat_columns(row)) if k in row}


def side_by_side(story: CaseStory, baseline: CaseStory) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(stages, metrics) of the baseline next to this run: per attempt and stage the two statuses; per metric the two
    values, the delta and whether it changed (metrics of attempt null are the case's reliability)."""
    stage_rows, metric_rows = [], []
    for number, old, new in _paired(story, baseline):
        old_stages = {(r["lane"], r["stage"]): r for r in (old.stages.rows(named=True) if old else [])}
        new_stages = {(r["lane"], r["stage"]): r for r in (new.stages.rows(named=True) if new else [])}
        for key in dict.fromkeys([*new_stages, *old_stages]):
            b, c = old_stages.get(key, {}).get("status"), new_stages.get(key, {}).get("status")
            stage_rows.append(
                {
                    "attempt": number,
                    "lane": key[0],
                    "stage": key[1],
                    "baseline": b,
                    "candidate": c,
                    "changed": b != c,
                    "reason": new_stages.get(key, {}).get("reason"),
                }
            )
        old_metrics, new_metrics = (old.metrics if old else {}), (new.metrics if new else {})
        for label in dict.fromkeys([*new_metrics, *old_metrics]):
            b, c = old_metrics.get(label), new_metrics.get(label)
            if b is None and c is None:
                continue
            metric_rows.append(
                {
                    "attempt": number,
                    "metric": label,
                    "baseline": fmt(b, DIGITS.get(label, 4)),
                    "candidate": fmt(c, DIGITS.get(label, 4)),
                    "delta": delta_cell(_delta(b, c), label),
                    "changed": _changed(b, c),
                }
            )
    old_case, new_case = _case_metrics(baseline), _case_metrics(story)
    for label in dict.fromkeys([*new_case, *old_case]):
        b, c = old_case.get(label), new_case.get(label)
        if b is None and c is None:
            continue
        metric_rows.append(
            {
                "attempt": None,
                "metric": label,
                "baseline": fmt(b),
                "candidate": fmt(c),
                "delta": delta_cell(_delta(b, c), label),
                "changed": _changed(b, c),
            }
        )
    stages = pl.DataFrame(
        stage_rows,
        schema={
            "attempt": pl.Int64,
            "lane": pl.String,
            "stage": pl.String,
            "baseline": pl.String,
            "candidate": pl.String,
            "changed": pl.Boolean,
            "reason": pl.String,
        },
    )
    metrics = pl.DataFrame(
        metric_rows,
        schema={
            "attempt": pl.Int64,
            "metric": pl.String,
            "baseline": pl.String,
            "candidate": pl.String,
            "delta": pl.String,
            "changed": pl.Boolean,
        },
    )
    return stages, metrics


def baseline_lines(story: CaseStory, baseline: CaseStory) -> list[str]:
    """Baseline → this run, per attempt: every stage status, and the metrics that changed."""
    if not baseline.known:
        return [f"against baseline {baseline.run_id}: the case is not in that run"]
    stages, metrics = side_by_side(story, baseline)
    out = [f"against baseline {baseline.run_id} (baseline → {story.run_id}):"]
    seen: dict[tuple, int | None] = {}
    for number, old, new in _paired(story, baseline):
        head = (
            f"  attempt {fmt(number)}: {old.trace_id if old else '(no attempt)'} → "
            f"{new.trace_id if new else '(no attempt)'}"
        )
        rows = (
            stages.filter(pl.col("attempt") == number)
            if number is not None
            else stages.filter(pl.col("attempt").is_null())
        )
        body = [
            f"    {row['lane']} {row['stage']}: {fmt(row['baseline'])} → {fmt(row['candidate'])}"
            + ("  ✘ changed" if row["changed"] else "")
            for row in rows.rows(named=True)
        ]
        moved = metrics.filter((pl.col("attempt") == number) & pl.col("changed"))
        both = moved.filter((pl.col("baseline") != MISSING) & (pl.col("candidate") != MISSING))
        body.extend(
            f"    {row['metric']} {row['baseline']} → {row['candidate']}"
            + (f" ({row['delta']})" if row["delta"] else "")
            for row in both.rows(named=True)
        )
        for side, label in (
            ("candidate", f"no value in {story.run_id}"),
            ("baseline", f"no value in {baseline.run_id}"),
        ):
            gone = moved.filter(pl.col(side) == MISSING)["metric"].to_list()
            if gone:
                body.append(f"    {label}: {', '.join(gone)}")
        same = metrics.filter((pl.col("attempt") == number) & ~pl.col("changed")).height
        body.append(f"    ({same} other metrics unchanged)")
        twin = seen.setdefault(tuple(body), number)
        out.append(head)
        out.extend(body if twin == number else [f"    same as attempt {fmt(twin)}"])
    case_rows = metrics.filter(pl.col("attempt").is_null())
    if case_rows.height:
        out.append(
            "  case: "
            + ", ".join(f"{r['metric']} {r['baseline']} → {r['candidate']}" for r in case_rows.rows(named=True))
        )
    return out
