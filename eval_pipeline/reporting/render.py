"""Report sections rendered twice from one source: Markdown (files and Dagster metadata) and a self-contained HTML page.

Text in a report comes from traces (answers, queries, reasons), so both renderings escape it: HTML through
`html.escape` (tables) and markdown-it with raw HTML off (prose lines), Markdown by writing `&`, `<` and `>` as
entities, which Markdown viewers show as the characters and never read as markup (raw HTML in Markdown, such as a
`<script>` in an answer, would otherwise be rendered).

Over 400 lines: each piece (a cell, a link, a JSON cell, a section, the verdict) is rendered to Markdown and to HTML
side by side, so both renderings change together.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from html import escape
from urllib.parse import quote

import polars as pl
from markdown_it import MarkdownIt

from eval_pipeline.contracts.identifiers import bounded_file_name
from eval_pipeline.reporting.values import MISSING, format_value

MAX_ROWS = 200

# Raw HTML off: a tag in trace text is shown, never parsed. Entities off, so `&lt;` in an answer reads as those four
# characters, as in the Markdown rendering; autolinks off, as `<` is an entity there; images off, so no text makes the
# page fetch anything.
_INLINE = MarkdownIt("commonmark", {"html": False}).disable(["entity", "autolink", "image"])

VERDICT_STATUSES = ("pass", "fail", "undecided", "not_gated")
VERDICT_LABELS = {
    "pass": "Release passes",
    "fail": "Release blocked",
    "undecided": "Release undecided",
    "not_gated": "Not gated",
}

# Cell values shown coloured in HTML tables, by tone.
STATUS_TONES = {
    "good": ("pass", "scored", "SUPPORTED"),
    "bad": ("fail", "CONTRADICTED", "UNSUPPORTED"),
    "warn": (
        "incomplete",
        "incomparable",
        "insufficient",
        "undecided",
        "NOT_FOUND",
        "NOT_IN_EVIDENCE",
        "unsupported_correct",
    ),
    "muted": ("not_gating", "not_applicable", "not_gated"),
}
STATUS_WORDS = {word: tone for tone, words in STATUS_TONES.items() for word in words}
_TONE_COLOURS = {
    "good": ("#e6f4ea", "#1b5e20"),
    "bad": ("#fdecea", "#b71c1c"),
    "warn": ("#fff4e0", "#8a4b00"),
    "muted": ("#eef0f2", "#555"),
}

# A cell holding a longer unbroken token (an id, a URL) may break inside words; others wrap at spaces only, since
# breaking anywhere in every cell lets a table squeeze short columns into broken words.
LONG_TOKEN = 30

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Inline code in a table cell (reasons name fields and commands as `code`): <code> in HTML, left as is in Markdown.
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A cell of running text this long (with spaces) keeps a readable width instead of collapsing into a tall column.
LONG_TEXT = 60
# A JSON object cell shown as a nested table when it has at most this many leaf values; a larger one stays text.
MAX_NESTED_VALUES = 64
EMPTY_TABLE = "no rows"


@dataclass
class Section:
    """One report section: prose lines, an optional table and an optional SVG chart.

    `links` maps a column to an href template: `{value}` is the URL-quoted cell (each element of a list cell), and
    `{column}` another cell of the same row, so a row can link under its own run. `caption` is a line read with the
    chart, shown right under it.
    """

    title: str
    lines: list[str] = field(default_factory=list)
    table: pl.DataFrame | None = None
    chart: str | None = None
    level: int = 2
    links: dict[str, str] = field(default_factory=dict)
    caption: str | None = None


@dataclass
class Verdict:
    """The release decision shown as a banner atop a report."""

    status: str
    headline: str
    details: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in VERDICT_STATUSES:
            raise ValueError(f"verdict status {self.status!r} is not one of {', '.join(VERDICT_STATUSES)}")


def json_object(value) -> dict | None:
    """The cell as a JSON object (a struct, or text holding one object), or None when it is anything else."""
    if isinstance(value, dict):
        return value or None
    if not isinstance(value, str) or not (value.startswith("{") and value.endswith("}")):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed else None


def _leaf(value) -> str:
    """A value inside a JSON cell: numbers as written, text quoted (so "49" and 49 stay apart), null as –."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _leaves(value) -> int:
    if isinstance(value, dict):
        return sum(_leaves(v) for v in value.values()) or 1
    if isinstance(value, list):
        return sum(_leaves(v) for v in value) or 1
    return 1


def _matrix(value: dict) -> tuple[list[str], list[str]] | None:
    """(row keys, column keys) of an object whose values are all flat objects (a confusion matrix), else None."""
    if not all(
        isinstance(v, dict) and v and not any(isinstance(x, dict | list) for x in v.values()) for v in value.values()
    ):
        return None
    return [str(k) for k in value], list(dict.fromkeys(str(k) for v in value.values() for k in v))


def _entry_text(inner) -> str | None:
    """A value of a JSON cell's object as plain text: a list joined, anything else as a leaf; None for an inner object,
    which the caller nests."""
    if isinstance(inner, dict) and inner:
        return None
    if isinstance(inner, list):
        return ", ".join(_leaf(v) for v in inner) if inner else MISSING
    return _leaf(inner)


def nested_html(value: dict) -> str:
    """A JSON object as a small table: an object of flat objects as a matrix (rows: outer keys, columns: inner keys),
    any other object as key / value rows (objects inside nested again, lists joined)."""
    matrix = _matrix(value)
    if matrix is not None:
        rows, columns = matrix
        head = "<tr><th></th>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr>"
        body = "".join(
            "<tr><th>"
            + escape(r)
            + "</th>"
            + "".join(f"<td>{escape(_leaf(value[k].get(c)))}</td>" for c in columns)
            + "</tr>"
            for r, k in zip(rows, value, strict=True)
        )
        return f'<table class="nested">{head}{body}</table>'
    cells = []
    for key, inner in value.items():
        text = _entry_text(inner)
        shown = nested_html(inner) if text is None else escape(text)
        cells.append(f"<tr><th>{escape(str(key))}</th><td>{shown}</td></tr>")
    return f'<table class="nested">{"".join(cells)}</table>'


def nested_text(value: dict, depth: int = 0) -> str:
    """A JSON object as one line of plain text: `key: value; key: value`, inner objects in parentheses."""
    parts = []
    for key, inner in value.items():
        text = _entry_text(inner)
        parts.append(f"{key}: {f'({nested_text(inner, depth + 1)})' if text is None else text}")
    return ("; " if depth == 0 else ", ").join(parts)


def _shown_object(value) -> dict | None:
    """The JSON object a cell is shown as a nested table (HTML) or key: value text (Markdown), when it is one and
    small."""
    found = json_object(value)
    return found if found is not None and _leaves(found) <= MAX_NESTED_VALUES else None


def code_html(text: str) -> str:
    """Text escaped for HTML, its `code` spans as <code>: the only Markdown a table cell is read for."""
    if "`" not in text:
        return escape(text)
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(f"<code>{escape(match.group(1))}</code>")
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


def markdown_text(text: str) -> str:
    """Text made inert in Markdown: `&`, `<` and `>` as HTML entities, so no raw HTML reaches a viewer."""
    return escape(text, quote=False)


@lru_cache(maxsize=1 << 16)
def inline_html(text: str) -> str:
    """One line of inline Markdown as HTML (emphasis, code, links); raw HTML in it stays escaped text."""
    return _INLINE.renderInline(text)


def href(template: str, value, row: dict | None = None) -> str | None:
    """The template with `{value}` and `{column}` replaced by URL-quoted text; None when a referenced cell is null."""
    row = row or {}
    missing = value is None

    def fill(match: re.Match) -> str:
        nonlocal missing
        name = match.group(1)
        if name != "value" and name not in row:
            return match.group(0)
        cell = value if name == "value" else row[name]
        missing = missing or cell is None
        return "" if cell is None else quote(str(cell), safe="")

    filled = _PLACEHOLDER.sub(fill, template)
    # a segment names a file: bounded as the file was named (case_page_name), so a long id still links to its page
    return None if missing else "/".join(map(bounded_file_name, filled.split("/")))


def _flat(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _cell(value) -> str:
    shown = _shown_object(value)
    return _flat(markdown_text(nested_text(shown) if shown is not None else format_value(value)))


def _md_destination(target: str) -> str:
    # Percent-encoded rather than backslash-escaped: every viewer reads %XX in a link destination.
    return "".join(f"%{ord(c):02X}" if c in " ()<>\\|[]" or ord(c) < 32 else c for c in target)


def _md_link(value, template: str, row: dict) -> str:
    target = href(template, value, row)
    text = markdown_text(format_value(value))
    if target is None:
        return text
    text = re.sub(r"([\\\[\]])", r"\\\1", text)
    return f"[{text}]({_md_destination(target)})"


def _md_cell(value, template: str | None, row: dict) -> str:
    if template is None or value is None:
        return _cell(value)
    if isinstance(value, list):
        return _flat(", ".join(_md_link(v, template, row) for v in value)) if value else _cell(value)
    return _flat(_md_link(value, template, row))


def markdown_table(frame: pl.DataFrame, max_rows: int = MAX_ROWS, links: dict[str, str] | None = None) -> str:
    """A Markdown table of a frame (values formatted and escaped, linked columns as links; long tables cut with a
    note)."""
    if frame.height == 0:
        return f"_{EMPTY_TABLE}_"
    links = links or {}
    templates = [links.get(c) for c in frame.columns]
    header = "| " + " | ".join(_cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(_md_cell(v, t, row) for v, t in zip(row.values(), templates, strict=True)) + " |"
        for row in frame.head(max_rows).iter_rows(named=True)
    ]
    more = [f"\n_{frame.height - max_rows} more rows in the table_"] if frame.height > max_rows else []
    return "\n".join([header, rule, *rows, *more])


def _html_link(value, template: str, row: dict) -> str:
    target = href(template, value, row)
    text = escape(format_value(value))
    return text if target is None else f'<a href="{escape(target)}">{text}</a>'


def _html_cell(value, template: str | None, row: dict) -> str:
    shown = _shown_object(value) if template is None else None
    if shown is not None:
        return f'<td class="json">{nested_html(shown)}</td>'
    text = format_value(value)
    if template is None or value is None:
        inner = code_html(text)
    elif isinstance(value, list):
        inner = ", ".join(_html_link(v, template, row) for v in value) if value else escape(text)
    else:
        inner = _html_link(value, template, row)
    classes = [f"status status-{value.lower()}"] if isinstance(value, str) and value in STATUS_WORDS else []
    # no token is longer than the whole text: most cells skip the split
    if len(text) > LONG_TOKEN and any(len(token) > LONG_TOKEN for token in text.split()):
        classes.append("long")
    elif len(text) > LONG_TEXT and " " in text:
        classes.append("text")
    return f'<td class="{" ".join(classes)}">{inner}</td>' if classes else f"<td>{inner}</td>"


@lru_cache(maxsize=1 << 16)
def _cached_cell(kind: type, value) -> str:  # kind: only part of the cache key
    return _html_cell(value, None, {})


def _plain_cell(value) -> str:
    """An unlinked cell; the same few statuses, flags and ids fill most cells, so each is rendered once."""
    # keyed by type as well, so True and 1 stay apart; floats are not kept (-0.0 equals 0.0 but shows apart)
    if value is None or type(value) in (str, int, bool):
        return _cached_cell(type(value), value)
    return _html_cell(value, None, {})


def html_table(frame: pl.DataFrame, max_rows: int = MAX_ROWS, links: dict[str, str] | None = None) -> str:
    """An HTML table of a frame in a horizontally scrolling wrapper; status words are classed, linked columns linked."""
    if frame.height == 0:
        return f"<p><em>{EMPTY_TABLE}</em></p>"
    links = links or {}
    templates = [links.get(c) for c in frame.columns]
    # a long column name (total_cost_usd_per_success) may break after an underscore: it need not widen its column
    head = "".join(f"<th>{escape(c).replace('_', '_<wbr>')}</th>" for c in frame.columns)
    shown = frame.head(max_rows) if frame.height > max_rows else frame
    if any(templates):
        body = "".join(
            "<tr>" + "".join(_html_cell(v, t, row) for v, t in zip(row.values(), templates, strict=True)) + "</tr>"
            for row in shown.rows(named=True)
        )
    else:
        # no linked column: a cell needs no row, so plain tuples will do
        body = "".join("<tr>" + "".join(map(_plain_cell, values)) + "</tr>" for values in shown.rows())
    more = f"<p><em>{frame.height - max_rows} more rows in the table</em></p>" if frame.height > max_rows else ""
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}'


def _verdict_parts(verdict: Verdict) -> tuple[str, str]:
    """The banner's bold label and the rest of the headline, without the label said twice."""
    label = VERDICT_LABELS[verdict.status]
    rest = verdict.headline.strip()
    if rest.lower().startswith(label.lower()):
        rest = rest[len(label) :].lstrip(" :—–-")
    return label, rest


def _markdown_lines(lines: list[str]) -> list[str]:
    """Prose lines as Markdown: bullets stay one list; any other line is its own paragraph."""
    out: list[str] = []
    for i, line in enumerate(lines):
        bullet = line.startswith("- ")
        if i and (not bullet or not lines[i - 1].startswith("- ")):
            out.append("")
        out.append(markdown_text(line))
    return out


def render_markdown(title: str, sections: list[Section], verdict: Verdict | None = None) -> str:
    """The report as Markdown, the verdict (if any) as a blockquote under the title."""
    out = [f"# {markdown_text(title)}", ""]
    if verdict is not None:
        label, rest = _verdict_parts(verdict)
        out.append(f"> **{label}**" + (f" — {markdown_text(rest)}" if rest else ""))
        if verdict.details:
            out.append(">")
            out.extend(f"> {line}" if line else ">" for line in _markdown_lines(verdict.details))
        out.append("")
    for section in sections:
        out.append(f"{'#' * section.level} {markdown_text(section.title)}")
        out.append("")
        out.extend(_markdown_lines(section.lines))
        if section.lines:
            out.append("")
        if section.caption:
            out.extend([markdown_text(section.caption), ""])
        if section.table is not None:
            out.append(markdown_table(section.table, links=section.links))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def html_lines(lines: list[str]) -> str:
    """Prose lines as HTML: consecutive "- " lines one list, any other line a paragraph, inline Markdown rendered."""
    out: list[str] = []
    items: list[str] = []
    for line in lines:
        if line.startswith("- "):
            items.append(f"<li>{inline_html(line[2:])}</li>")
            continue
        if items:
            out.append(f"<ul>{''.join(items)}</ul>")
            items = []
        out.append(f"<p>{inline_html(line)}</p>")
    if items:
        out.append(f"<ul>{''.join(items)}</ul>")
    return "\n".join(out)


def _status_style() -> str:
    rules = []
    for tone, words in STATUS_TONES.items():
        background, colour = _TONE_COLOURS[tone]
        selector = ",".join(f"td.status-{w.lower()}" for w in words)
        rules.append(f"{selector}{{background:{background};color:{colour};font-weight:600}}")
    return "\n".join(rules)


_STYLE = """
*,*::before,*::after{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:2rem auto;padding:0 1rem;max-width:1320px;color:#222;line-height:1.45}
p,li,h1,h2,h3,h4{overflow-wrap:anywhere}
.table-wrap{overflow-x:auto;max-width:100%;margin:.5rem 0 1rem}
table{border-collapse:collapse;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f1f3f6;overflow-wrap:normal} td{max-width:28rem;overflow-wrap:break-word}
td.long{overflow-wrap:anywhere;min-width:12rem}
td.text{min-width:10rem;max-width:28rem;word-break:break-word;white-space:normal}
td.json{padding:.15rem}
table.nested{font-size:.8rem;margin:0} table.nested th,table.nested td{padding:.1rem .35rem;min-width:0}
table.nested th{font-weight:600}
h1{font-size:1.5rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.chart{margin:.5rem 0 1rem;max-width:100%} .chart svg{max-width:100%;height:auto}
code{background:#f4f4f4;padding:0 .2rem} ul{padding-left:1.4rem} .caption{color:#555;font-size:.85rem;margin-top:-.5rem}
.verdict{border-left:.4rem solid;border-radius:.25rem;padding:.6rem 1rem;margin:1rem 0 1.5rem}
.verdict p{margin:.1rem 0;font-size:1.05rem} .verdict ul{margin:.4rem 0 0}
.verdict-pass{background:#e6f4ea;border-color:#2e7d32;color:#1b5e20}
.verdict-fail{background:#fdecea;border-color:#c62828;color:#7f1414}
.verdict-undecided{background:#fff4e0;border-color:#ef8f00;color:#6d3d00}
.verdict-not_gated{background:#eef0f2;border-color:#8a9299;color:#3c4247}
"""


def verdict_html(verdict: Verdict) -> str:
    """The verdict as a coloured banner."""
    label, rest = _verdict_parts(verdict)
    headline = f"<strong>{escape(label)}</strong>" + (f" — {inline_html(rest)}" if rest else "")
    details = html_lines(verdict.details)
    return (
        f'<div class="verdict verdict-{verdict.status}" role="status"><p class="verdict-headline">{headline}</p>'
        f"{details}</div>"
    )


def render_html(title: str, sections: list[Section], verdict: Verdict | None = None) -> str:
    """The report as one self-contained HTML page with inline SVG charts, the verdict (if any) as a banner under the
    title."""
    parts = [
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{escape(title)}</title>'
        f"<style>{_STYLE}{_status_style()}</style></head><body><h1>{inline_html(title)}</h1>"
    ]
    if verdict is not None:
        parts.append(verdict_html(verdict))
    for section in sections:
        level = min(section.level, 4)
        parts.append(f"<h{level}>{inline_html(section.title)}</h{level}>")
        if section.lines:
            parts.append(html_lines(section.lines))
        if section.chart:
            parts.append(f'<div class="chart">{section.chart}</div>')
        if section.caption:
            parts.append(f'<p class="caption">{inline_html(section.caption)}</p>')
        if section.table is not None:
            parts.append(html_table(section.table, links=section.links))
    parts.append("</body></html>")
    return "\n".join(parts)
