"""Small self-contained SVG charts for the HTML report (no JavaScript, no external assets)."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT, PAD = 520, 240, 44
AXIS = "#555"
BAR = "#3b6ea5"
LINE = "#c0504d"


def _frame(title: str, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13" font-family="sans-serif">{escape(title)}</text>'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - 10}" y2="{HEIGHT - PAD}" stroke="{AXIS}"/>'
        f'<line x1="{PAD}" y1="26" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="{AXIS}"/>{body}</svg>'
    )


def _y(value: float, top: float) -> float:
    span = HEIGHT - PAD - 26
    return HEIGHT - PAD - (value / top if top else 0) * span


def bar_chart(title: str, labels: list[str], values: list[float], cumulative: list[float] | None = None) -> str:
    """Vertical bars (a Pareto when `cumulative` shares are given as a line on a 0–1 scale)."""
    if not values:
        return _frame(title, f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="12">no data</text>')
    top = max(values) or 1
    slot = (WIDTH - PAD - 20) / len(values)
    parts = []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = PAD + 6 + i * slot
        y = _y(value, top)
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{HEIGHT - PAD - y:.1f}" fill="{BAR}">'
                     f'<title>{escape(label)}: {value:g}</title></rect>')
        parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">{value:g}</text>')
        parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{HEIGHT - PAD + 12}" text-anchor="end" font-size="9" '
                     f'transform="rotate(-30 {x + slot * 0.35:.1f} {HEIGHT - PAD + 12})">{escape(label)}</text>')
    if cumulative:
        points = " ".join(f"{PAD + 6 + i * slot + slot * 0.35:.1f},{_y(c, 1.0):.1f}" for i, c in enumerate(cumulative))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{LINE}" stroke-width="2"/>')
        parts.append(f'<text x="{WIDTH - 12}" y="34" text-anchor="end" font-size="10" fill="{LINE}">cumulative share</text>')
    return _frame(title, "".join(parts))


def line_chart(title: str, xs: list[str], ys: list[float | None], y_max: float = 1.0) -> str:
    """A line over categorical x positions on a 0..y_max scale; missing points are skipped."""
    if not xs:
        return _frame(title, "")
    slot = (WIDTH - PAD - 30) / max(len(xs) - 1, 1)
    parts, points = [], []
    for i, (x_label, y) in enumerate(zip(xs, ys, strict=True)):
        x = PAD + 10 + i * slot
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - PAD + 14}" text-anchor="middle" font-size="10">{escape(x_label)}</text>')
        if y is None:
            continue
        points.append(f"{x:.1f},{_y(y, y_max):.1f}")
        parts.append(f'<circle cx="{x:.1f}" cy="{_y(y, y_max):.1f}" r="3" fill="{LINE}"><title>{escape(x_label)}: {y:.4f}</title></circle>')
        parts.append(f'<text x="{x:.1f}" y="{_y(y, y_max) - 6:.1f}" text-anchor="middle" font-size="9">{y:.3f}</text>')
    for tick in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{PAD - 4}" y="{_y(tick * y_max, y_max) + 3:.1f}" text-anchor="end" font-size="9">{tick * y_max:g}</text>')
    if points:
        parts.insert(0, f'<polyline points="{" ".join(points)}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    return _frame(title, "".join(parts))


def interval_chart(title: str, estimate: float | None, low: float | None, high: float | None, threshold: float) -> str:
    """A point estimate with its interval on a -1..1 axis and the gating threshold as a dashed line."""
    def x_of(value: float) -> float:
        return PAD + (value + 1) / 2 * (WIDTH - PAD - 20)

    parts = [f'<line x1="{x_of(threshold):.1f}" y1="30" x2="{x_of(threshold):.1f}" y2="{HEIGHT - PAD}" stroke="{AXIS}" '
             f'stroke-dasharray="4 3"/><text x="{x_of(threshold):.1f}" y="40" font-size="10">threshold {threshold:g}</text>']
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        parts.append(f'<text x="{x_of(tick):.1f}" y="{HEIGHT - PAD + 14}" text-anchor="middle" font-size="10">{tick:g}</text>')
    if estimate is not None:
        mid = (HEIGHT - PAD + 30) / 2
        if low is not None and high is not None:
            parts.append(f'<line x1="{x_of(low):.1f}" y1="{mid}" x2="{x_of(high):.1f}" y2="{mid}" stroke="{BAR}" stroke-width="3"/>')
        parts.append(f'<circle cx="{x_of(estimate):.1f}" cy="{mid}" r="5" fill="{LINE}"/>'
                     f'<text x="{x_of(estimate):.1f}" y="{mid - 10}" text-anchor="middle" font-size="11">κ = {estimate:.3f}</text>')
    return _frame(title, "".join(parts))
