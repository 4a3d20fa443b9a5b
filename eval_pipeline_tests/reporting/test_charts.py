"""SVG charts: every text inside the viewBox, the κ axis zoomed to what it shows, baselines and trends drawn."""

import math
import random
import re
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from eval_pipeline.reporting import charts

NS = {"s": "http://www.w3.org/2000/svg"}
# Text boxes are estimated independently of the chart code: 0.6 em per character, ascent 0.8 em, descent 0.25 em.
EM, ASCENT, DESCENT = 0.6, 0.8, 0.25


def _svg(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _text_box(text: ET.Element) -> list[tuple[float, float]]:
    """The four corners of a text's estimated box, after its rotate() transform."""
    x, y = float(text.get("x")), float(text.get("y"))
    size = float(text.get("font-size"))
    width = len(text.text or "") * size * EM
    start = {"start": x, "middle": x - width / 2, "end": x - width}[text.get("text-anchor", "start")]
    corners = [
        (start, y - ASCENT * size),
        (start + width, y - ASCENT * size),
        (start, y + DESCENT * size),
        (start + width, y + DESCENT * size),
    ]
    transform = text.get("transform")
    if not transform:
        return corners
    angle, cx, cy = (
        float(v) for v in re.fullmatch(r"rotate\(([-\d.]+)[ ,]([-\d.]+)[ ,]([-\d.]+)\)", transform).groups()
    )
    a = math.radians(angle)
    return [
        (cx + (px - cx) * math.cos(a) - (py - cy) * math.sin(a), cy + (px - cx) * math.sin(a) + (py - cy) * math.cos(a))
        for px, py in corners
    ]


def _outside(svg: str) -> list[str]:
    """Texts whose estimated box leaves the viewBox."""
    root = _svg(svg)
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    bad = []
    for text in root.iter("{http://www.w3.org/2000/svg}text"):
        for px, py in _text_box(text):
            if not (0 <= px <= width and 0 <= py <= height):
                bad.append(f"{text.text!r} at ({px:.1f}, {py:.1f}) outside {width}×{height}")
                break
    return bad


def _texts(svg: str) -> list[str]:
    return [t.text for t in _svg(svg).iter("{http://www.w3.org/2000/svg}text")]


@pytest.mark.parametrize(
    "labels",
    [
        ["retrieval", "context_assembly", "grounding", "citation", "answer"],
        ["context_assembly", "tool_arguments", "tool_selection", "policy", "loop", "recovery", "outcome"],
        ["a_stage_label_long_enough_to_need_rotation_and_truncation_beyond_forty", "x"],
    ],
)
def test_every_text_of_a_pareto_chart_is_inside_the_svg(labels):
    values = [float(len(labels) - i) * 3 for i in range(len(labels))]
    cumulative = [sum(values[: i + 1]) / sum(values) for i in range(len(values))]
    svg = charts.bar_chart("rag: failures by first failing stage", labels, values, cumulative)
    assert _outside(svg) == []
    root = _svg(svg)
    assert 640 <= float(root.get("width")) <= 720
    shown = _texts(svg)
    for label in labels:
        assert label in shown or charts._short(label) in shown
    assert len(root.findall("s:rect", NS)) == len(labels)


def test_bar_chart_with_a_baseline_draws_a_lighter_bar_and_a_legend():
    svg = charts.bar_chart("failures", ["retrieval", "grounding"], [7.0, 3.0], baseline=[2.0, 5.0])
    root = _svg(svg)
    fills = [r.get("fill") for r in root.findall("s:rect", NS) if r.find("s:title", NS) is not None]
    assert fills.count(charts.BAR) == 2 and fills.count(charts.BASE_BAR) == 2
    titles = [r.find("s:title", NS).text for r in root.findall("s:rect", NS) if r.find("s:title", NS) is not None]
    assert "grounding, baseline: 5" in titles and "grounding: 3" in titles
    assert {"baseline", "this run"} <= set(_texts(svg))
    assert _outside(svg) == []


def test_kappa_chart_zooms_its_axis_to_estimate_interval_and_threshold():
    svg = charts.interval_chart("judge calibration", 0.45, 0.3, 0.6, 0.6)
    root = _svg(svg)
    width = float(root.get("width"))
    point = float(root.find("s:circle", NS).get("cx"))
    # zoomed to about 0.2–0.7 the estimate sits mid-axis; the interval spans a good part of the width, where on the
    # whole −1..1 axis it took an eighth
    assert 0.35 * width < point < 0.65 * width
    ticks = [float(t) for t in _texts(svg) if re.fullmatch(r"-?\d+(\.\d+)?", t or "")]
    assert min(ticks) >= 0.1 and max(ticks) <= 0.8 and min(ticks) <= 0.3 and max(ticks) >= 0.6
    assert len(ticks) >= 4
    interval = [line for line in root.findall("s:line", NS) if line.get("stroke-width") == "3"][0]
    assert float(interval.get("x2")) - float(interval.get("x1")) > 0.4 * width
    assert "threshold 0.6" in _texts(svg) and "κ = 0.450" in _texts(svg)
    assert _outside(svg) == []


@pytest.mark.parametrize(
    "args", [(1.0, 0.9, 1.0, 0.6), (-1.0, -1.0, -0.8, 0.6), (None, None, None, 0.6), (0.6, 0.6, 0.6, 0.6)]
)
def test_kappa_chart_stays_within_minus_one_and_one(args):
    svg = charts.interval_chart("κ", *args)
    ticks = [float(t) for t in _texts(svg) if re.fullmatch(r"-?\d+(\.\d+)?", t or "")]
    assert ticks and -1 <= min(ticks) and max(ticks) <= 1
    assert _outside(svg) == []


def test_line_chart_with_a_dashed_baseline():
    svg = charts.line_chart(
        "mean recall@k", ["1", "3", "5", "10", "20"], [0.5, 0.7, None, 0.9, 0.95], baseline=[0.6, 0.8, 0.85, None, 0.97]
    )
    root = _svg(svg)
    paths = root.findall("s:path", NS)
    assert len(paths) == 2
    assert [p.get("stroke-dasharray") for p in paths] == [None, "5 4"]
    assert {"baseline", "this run"} <= set(_texts(svg))
    assert len(root.findall("s:circle", NS)) == 8
    assert _outside(svg) == []


def test_trend_chart_draws_each_series_over_runs_and_skips_missing_points():
    runs = ["base-41", "cand-42", "cand-43"]
    svg = charts.trend_chart("gated rates", runs, {"recall_at_10": [0.9, None, 0.7], "pass_at_1": [1.0, 0.6, 0.8]})
    root = _svg(svg)
    x_of = {t.text: float(t.get("x")) for t in root.iter("{http://www.w3.org/2000/svg}text") if t.text in runs}
    circles = [
        (c.find("s:title", NS).text, float(c.get("cx")), float(c.get("cy"))) for c in root.findall("s:circle", NS)
    ]
    recall = [(title, cx, cy) for title, cx, cy in circles if title.startswith("recall_at_10")]
    assert [title for title, _, _ in recall] == ["recall_at_10, base-41: 0.9000", "recall_at_10, cand-43: 0.7000"]
    assert [cx for _, cx, _ in recall] == [x_of["base-41"], x_of["cand-43"]]
    passing = [(cx, cy) for title, cx, cy in circles if title.startswith("pass_at_1")]
    assert [cx for cx, _ in passing] == [x_of[r] for r in runs]
    # higher value, higher on the page: 1.0 > 0.8 > 0.6
    assert passing[0][1] < passing[2][1] < passing[1][1]
    assert len(root.findall("s:path", NS)) == 2
    assert {"recall_at_10", "pass_at_1"} <= set(_texts(svg))
    assert _outside(svg) == []


def test_trend_chart_with_long_run_ids_and_many_series_keeps_text_inside():
    runs = [f"2026-03-{d:02d}-support-assistant-candidate" for d in range(1, 13)]
    series = {
        f"gate_{i}_with_a_rather_long_name": [random.Random(i * 13 + j).random() for j in range(12)] for i in range(7)
    }
    series["gate_0_with_a_rather_long_name"][3] = None
    svg = charts.trend_chart("gated rates", runs, series)
    assert _outside(svg) == []
    assert 640 <= float(_svg(svg).get("width")) <= 720


def test_chart_coordinates_never_read_as_phone_numbers():
    # Reports are scanned for personal data as text: number runs in the markup must not look like a phone number.
    from eval_pipeline.deid import scan_frame

    rng = random.Random(7)
    svgs = []
    for _ in range(60):
        n = rng.randint(3, 12)
        values = [float(rng.randint(0, 60)) for _ in range(n)]
        total = sum(values) or 1.0
        svgs.append(
            charts.bar_chart(
                "pareto",
                [f"stage_{i}" for i in range(n)],
                values,
                [sum(values[: i + 1]) / total for i in range(n)],
                baseline=[float(rng.randint(0, 60)) for _ in range(n)],
            )
        )
        svgs.append(
            charts.line_chart(
                "recall",
                [str(k) for k in range(n)],
                [rng.random() for _ in range(n)],
                baseline=[rng.random() for _ in range(n)],
            )
        )
        svgs.append(
            charts.trend_chart(
                "trend",
                [f"run-{i}" for i in range(n)],
                {"a": [rng.random() for _ in range(n)], "b": [rng.random() for _ in range(n)]},
            )
        )
    assert scan_frame(pl.DataFrame({"html": svgs}), "charts", independent=True).height == 0
