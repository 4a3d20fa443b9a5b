"""Small self-contained SVG charts for the HTML report (no JavaScript, no external assets).

There are no font metrics here: a label is taken as CHAR_EM of its font size per character, wider than DejaVu Sans
or Arial lowercase, and margins are sized from that so every text stays inside the viewBox.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 680
PLOT_HEIGHT = 180
CHAR_EM = 0.62
TITLE_SIZE, LABEL_SIZE, TICK_SIZE = 13, 10, 10
MAX_LABEL_CHARS = 40
ROTATION = 45
_COS = math.cos(math.radians(ROTATION))
AXIS = "#555"
GRID = "#e3e6ea"
BAR = "#3b6ea5"
BASE_BAR = "#b7c9de"
LINE = "#c0504d"
BASE_LINE = "#7f8c99"
PALETTE = ("#3b6ea5", "#c0504d", "#5b9a45", "#8064a2", "#d08a1e", "#2a9d9f", "#7f7f7f", "#b5527f")


def text_width(text: str, size: float) -> float:
    """Estimated width of a label in pixels."""
    return len(text) * size * CHAR_EM


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def _svg(title: str, width: float, height: float, body: str) -> str:
    size = min(TITLE_SIZE, (width - 16) / max(text_width(title, 1), 1))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="{size:.1f}" font-family="sans-serif">'
        f"{escape(title)}</text>{body}</svg>"
    )


def _nice_step(raw: float, integer: bool = False) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at least `raw` (a whole number of 1, 2, 5 × 10^k for counts)."""
    if raw <= 0 or (integer and raw <= 1):
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    multiples = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    return next(m * power for m in multiples if m * power >= raw - 1e-12)


def _ticks(low: float, high: float, step: float) -> list[float]:
    count = round((high - low) / step)
    return [round(low + i * step, 10) for i in range(count + 1)]


def _tick_label(value: float, step: float) -> str:
    decimals = next(
        (d for d in range(6) if abs(round(step, d) - step) < 1e-9 and abs(round(value, d) - value) < 1e-9), 4
    )
    return f"{value:.{decimals}f}"


def _y_scale(top: float, integer: bool = False) -> tuple[float, list[float]]:
    """A rounded axis top at or above `top` and its ticks from 0."""
    step = _nice_step((top or 1) / 4, integer)
    high = math.ceil(top / step - 1e-9) * step if top > 0 else step * 4
    return high, _ticks(0.0, high, step)


def _fit_left(left: float, spread: list[float], shift: list[float], need: list[float], right: float) -> float:
    """The least left margin ≥ `left` giving label i, at left + spread_i·(WIDTH − right − left) + shift_i, need_i px."""
    for f, g, n in zip(spread, shift, need, strict=True):
        if f < 1:
            left = max(left, (n - g - f * (WIDTH - right)) / (1 - f))
    return left


def _legend(items: list[tuple[str, str, str]], left: float, top: float, right: float) -> tuple[str, float]:
    """Legend entries (label, colour, kind: bar | line | dashed) in rows from `top`; the SVG and the y below it."""
    parts, x, y = [], left, top
    for label, colour, kind in items:
        label = _short(label)
        width = 22 + text_width(label, LABEL_SIZE) + 14
        if x > left and x + width > WIDTH - right:
            x, y = left, y + 16
        if kind == "bar":
            parts.append(f'<rect x="{x:.1f}" y="{y - 8:.1f}" width="14" height="9" fill="{colour}"/>')
        else:
            dash = ' stroke-dasharray="5 4"' if kind == "dashed" else ""
            parts.append(
                f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 16:.1f}" y2="{y - 4:.1f}" stroke="{colour}" '
                f'stroke-width="2"{dash}/>'
            )
        parts.append(
            f'<text x="{x + 20:.1f}" y="{y:.1f}" font-size="{LABEL_SIZE}" font-family="sans-serif">'
            f"{escape(label)}</text>"
        )
        x += width
    return "".join(parts), (y + 8 if items else top - 12)


def _x_labels(labels: list[str], xs: list[float], y: float, rotated: bool) -> str:
    parts = []
    for label, x in zip(labels, xs, strict=True):
        shown = escape(_short(label))
        if rotated:
            parts.append(
                f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="end" font-size="{LABEL_SIZE}" font-family="sans-serif" '
                f'transform="rotate(-{ROTATION},{x:.1f},{y:.1f})">{shown}<title>{escape(label)}</title></text>'
            )
        else:
            parts.append(
                f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" font-size="{LABEL_SIZE}" '
                f'font-family="sans-serif">{shown}<title>{escape(label)}</title></text>'
            )
    return "".join(parts)


def _layout(
    labels: list[str], spread: list[float], shift: list[float], left: float, right: float, spacing: float
) -> tuple[float, bool, float]:
    """Left margin, whether x labels are rotated, and the bottom margin they need."""
    widths = [text_width(_short(label), LABEL_SIZE) for label in labels]
    widest = max(widths, default=0.0)
    if widest <= spacing * 0.9:
        need = [w / 2 + 2 for w in widths]
        return _fit_left(left, spread, shift, need, right), False, 30.0
    # rotated labels end at their tick and reach down-left by their width × cos 45°, plus a glyph's height
    need = [w * _COS + LABEL_SIZE + 2 for w in widths]
    return _fit_left(left, spread, shift, need, right), True, 14 + widest * _COS + LABEL_SIZE + 6


def _y_axis(left: float, right: float, top: float, bottom: float, high: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    parts = []
    for tick in ticks:
        y = bottom - (tick / high) * (bottom - top) if high else bottom
        parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{WIDTH - right:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        parts.append(
            f'<text x="{left - 5:.1f}" y="{y + 3.5:.1f}" text-anchor="end" font-size="{TICK_SIZE}" '
            f'font-family="sans-serif">{_tick_label(tick, step)}</text>'
        )
    parts.append(
        f'<line x1="{left:.1f}" y1="{bottom:.1f}" x2="{WIDTH - right:.1f}" y2="{bottom:.1f}" stroke="{AXIS}"/>'
        f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{bottom:.1f}" stroke="{AXIS}"/>'
    )
    return "".join(parts)


def _y_margin(high: float, ticks: list[float]) -> float:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    return max(36.0, max(text_width(_tick_label(t, step), TICK_SIZE) for t in ticks) + 12)


def _path(points: list[tuple[float, float]]) -> str:
    # "M x,y L x,y": space-separated coordinate pairs ("169.4 252.2") read as phone numbers to the privacy scan of
    # reports
    return "M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in points)


def _no_data(title: str) -> str:
    return _svg(
        title,
        WIDTH,
        90,
        f'<text x="{WIDTH / 2}" y="55" text-anchor="middle" font-size="12" font-family="sans-serif">no data</text>',
    )


def bar_chart(
    title: str,
    labels: list[str],
    values: list[float],
    cumulative: list[float] | None = None,
    baseline: list[float] | None = None,
) -> str:
    """Vertical bars (a Pareto when `cumulative` shares are given as a 0–1 line), each beside its `baseline` bar if
    given."""
    if not values:
        return _no_data(title)
    n = len(values)
    integer = all(float(v).is_integer() for v in [*values, *(baseline or [])])
    high, ticks = _y_scale(max([*values, *(baseline or [])]), integer)
    right = 40.0 if cumulative else 14.0
    spread, shift = [(i + 0.5) / n for i in range(n)], [0.0] * n
    left = _y_margin(high, ticks)
    left, rotated, bottom_margin = _layout(labels, spread, shift, left, right, (WIDTH - right - left) / n)
    items = ([("baseline", BASE_BAR, "bar"), ("this run", BAR, "bar")] if baseline else []) + (
        [("cumulative share", LINE, "line")] if cumulative else []
    )
    legend, below = _legend(items, left, 40, right)
    top = below + 16
    bottom = top + PLOT_HEIGHT
    slot = (WIDTH - right - left) / n
    centres = [left + f * (WIDTH - right - left) for f in spread]

    def y_of(value: float, scale: float) -> float:
        return bottom - (value / scale if scale else 0) * (bottom - top)

    parts = [_y_axis(left, right, top, bottom, high, ticks), legend]
    bar_width = slot * (0.36 if baseline else 0.62)
    for i, (label, value, centre) in enumerate(zip(labels, values, centres, strict=True)):
        x = centre - (0 if baseline else bar_width / 2)
        if baseline:
            base = baseline[i]
            parts.append(
                f'<rect x="{centre - bar_width:.1f}" y="{y_of(base, high):.1f}" width="{bar_width:.1f}" '
                f'height="{bottom - y_of(base, high):.1f}" fill="{BASE_BAR}"><title>{escape(label)}, baseline: '
                f"{base:g}</title></rect>"
            )
        y = y_of(value, high)
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_width:.1f}" height="{bottom - y:.1f}" fill="{BAR}">'
            f"<title>{escape(label)}: {value:g}</title></rect>"
        )
        parts.append(
            f'<text x="{x + bar_width / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="{LABEL_SIZE}" '
            f'font-family="sans-serif">{value:g}</text>'
        )
    parts.append(_x_labels(labels, centres, bottom + 14, rotated))
    if cumulative:
        points = [(c, y_of(share, 1.0)) for c, share in zip(centres, cumulative, strict=False)]
        parts.append(f'<path d="{_path(points)}" fill="none" stroke="{LINE}" stroke-width="2"/>')
        for tick in (0.0, 0.5, 1.0):
            parts.append(
                f'<text x="{WIDTH - right + 4:.1f}" y="{y_of(tick, 1.0) + 3.5:.1f}" font-size="{TICK_SIZE}" '
                f'font-family="sans-serif" fill="{LINE}">{tick:.0%}</text>'
            )
    return _svg(title, WIDTH, bottom + bottom_margin, "".join(parts))


def _lines_svg(
    title: str,
    xs: list[str],
    series: list[tuple[str, list[float | None], str, bool]],
    y_max: float,
    legend: bool,
    point_labels: bool,
) -> str:
    """Lines over categorical x positions on a 0..y_max scale (series: name, values, colour, dashed); missing points
    skipped."""
    if not xs:
        return _no_data(title)
    n = len(xs)
    high, ticks = _y_scale(y_max)
    right, pad = 14.0, 12.0
    if n == 1:
        spread, shift = [0.5], [0.0]
    else:
        spread = [i / (n - 1) for i in range(n)]
        shift = [pad * (1 - 2 * i / (n - 1)) for i in range(n)]
    left = _y_margin(high, ticks)
    spacing = (WIDTH - right - left - 2 * pad) / max(n - 1, 1)
    left, rotated, bottom_margin = _layout(xs, spread, shift, left, right, spacing)
    if not rotated and n > 1:
        # the last label is centred on the last point: keep its right half inside
        right = max(right, text_width(_short(xs[-1]), LABEL_SIZE) / 2 + 4 - pad)
    items = [(name, colour, "dashed" if dashed else "line") for name, _, colour, dashed in series] if legend else []
    legend_svg, below = _legend(items, left, 40, right)
    top = below + 18
    bottom = top + PLOT_HEIGHT
    positions = [left + f * (WIDTH - right - left) + g for f, g in zip(spread, shift, strict=True)]

    def y_of(value: float) -> float:
        return bottom - (value / high if high else 0) * (bottom - top)

    parts = [_y_axis(left, right, top, bottom, high, ticks), legend_svg, _x_labels(xs, positions, bottom + 14, rotated)]
    for name, values, colour, dashed in series:
        points = [(x, v, label) for x, v, label in zip(positions, values, xs, strict=True) if v is not None]
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        if len(points) > 1:
            path = _path([(x, y_of(v)) for x, v, _ in points])
            parts.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x, v, label in points:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y_of(v):.1f}" r="3" fill="{colour}"><title>{escape(name)}, '
                f"{escape(label)}: {v:.4f}</title></circle>"
            )
            if point_labels and not dashed:
                parts.append(
                    f'<text x="{x:.1f}" y="{y_of(v) - 6:.1f}" text-anchor="middle" font-size="9" '
                    f'font-family="sans-serif">{v:.3f}</text>'
                )
    return _svg(title, WIDTH, bottom + bottom_margin, "".join(parts))


def line_chart(
    title: str, xs: list[str], ys: list[float | None], y_max: float = 1.0, baseline: list[float | None] | None = None
) -> str:
    """A line over categorical x positions on a 0..y_max scale, the baseline's dashed beside it; missing points
    skipped."""
    series = [("this run", ys, LINE, False)] + (
        [("baseline", baseline, BASE_LINE, True)] if baseline is not None else []
    )
    return _lines_svg(title, xs, series, y_max, legend=baseline is not None, point_labels=True)


def trend_chart(title: str, runs: list[str], series: dict[str, list[float | None]], y_max: float | None = None) -> str:
    """One labelled line per series over runs in the given order; missing points skipped."""
    present = [v for values in series.values() for v in values if v is not None]
    if y_max is None:
        top = max(present, default=1.0)
        y_max = 1.0 if top <= 1 else _y_scale(top)[0]
    lines = [(name, values, PALETTE[i % len(PALETTE)], False) for i, (name, values) in enumerate(series.items())]
    return _lines_svg(title, runs, lines, y_max, legend=True, point_labels=False)


def interval_chart(title: str, estimate: float | None, low: float | None, high: float | None, threshold: float) -> str:
    """A point estimate with its interval and the gating threshold (dashed), on an axis zoomed to hold them all."""
    known = [v for v in (estimate, low, high, threshold) if v is not None]
    lo, hi = min(known), max(known)
    if estimate is None:
        lo, hi = threshold - 0.25, threshold + 0.25
    margin = max(0.05, 0.15 * (hi - lo))
    lo, hi = max(-1.0, lo - margin), min(1.0, hi + margin)
    step = _nice_step((hi - lo) / 5)
    lo = max(-1.0, math.floor(lo / step + 1e-9) * step)
    hi = min(1.0, math.ceil(hi / step - 1e-9) * step)
    left, right, height = 30.0, 30.0, 170.0
    axis_y, mid = 130.0, 88.0

    def x_of(value: float) -> float:
        return left + (value - lo) / (hi - lo) * (WIDTH - left - right)

    parts = [f'<line x1="{left}" y1="{axis_y}" x2="{WIDTH - right}" y2="{axis_y}" stroke="{AXIS}"/>']
    # every nice step divides 1, so the clamped ends are ticks as well
    for tick in _ticks(lo, hi, step):
        parts.append(
            f'<line x1="{x_of(tick):.1f}" y1="{axis_y}" x2="{x_of(tick):.1f}" y2="{axis_y + 4}" stroke="{AXIS}"/>'
            f'<text x="{x_of(tick):.1f}" y="{axis_y + 16}" text-anchor="middle" font-size="{TICK_SIZE}" '
            f'font-family="sans-serif">{_tick_label(tick, step)}</text>'
        )
    tx = x_of(threshold)
    label = f"threshold {threshold:g}"
    anchor = "end" if tx + text_width(label, LABEL_SIZE) + 4 > WIDTH - 4 else "start"
    parts.append(
        f'<line x1="{tx:.1f}" y1="36" x2="{tx:.1f}" y2="{axis_y}" stroke="{AXIS}" stroke-dasharray="4 3"/>'
        f'<text x="{tx + (-4 if anchor == "end" else 4):.1f}" y="46" text-anchor="{anchor}" font-size="{LABEL_SIZE}" '
        f'font-family="sans-serif">{escape(label)}</text>'
    )
    if estimate is None:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{mid}" text-anchor="middle" font-size="12" font-family="sans-serif">'
            "no estimate</text>"
        )
    else:
        if low is not None and high is not None:
            parts.append(
                f'<line x1="{x_of(low):.1f}" y1="{mid}" x2="{x_of(high):.1f}" y2="{mid}" stroke="{BAR}" '
                f'stroke-width="3"><title>95% CI {low:.3f}–{high:.3f}</title></line>'
            )
            for end in (low, high):
                parts.append(
                    f'<line x1="{x_of(end):.1f}" y1="{mid - 6}" x2="{x_of(end):.1f}" y2="{mid + 6}" stroke="{BAR}" '
                    f'stroke-width="2"/><text x="{x_of(end):.1f}" y="{mid + 20}" text-anchor="middle" font-size="9" '
                    f'font-family="sans-serif">{end:.3f}</text>'
                )
        label = f"κ = {estimate:.3f}"
        half = text_width(label, 11) / 2 + 4
        parts.append(
            f'<circle cx="{x_of(estimate):.1f}" cy="{mid}" r="5" fill="{LINE}"/>'
            f'<text x="{min(max(x_of(estimate), half), WIDTH - half):.1f}" y="{mid - 11}" text-anchor="middle" '
            f'font-size="11" font-family="sans-serif">{escape(label)}</text>'
        )
    return _svg(title, WIDTH, height, "".join(parts))
