"""Why a text is not JSON, in one wording wherever input is read (trace lines, imports, `eval-pipeline judge` input).

orjson decodes fast but words its errors for its own authors ("invalid literal, expected 'null': line 1 column 1
(char 0)"); a reader of a reject reason gets Python's JSON reader's words instead, with the column (and the line,
for a text of several lines) where the JSON breaks.
"""

from __future__ import annotations

import json

from eval_pipeline.io.json_limits import MAX_JSON_DEPTH, UTF8_BOM, limit_breach

INVALID = "invalid JSON: "


def json_problem(data: bytes | str) -> str:
    """Why `data` is not one JSON value, without a prefix: "Expecting value at column 1", "the text is empty",
    "NaN is not a JSON number" (a value Python reads and a strict reader refuses)."""
    if isinstance(data, bytes):
        try:
            data = data.removeprefix(UTF8_BOM).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 text at byte offset {exc.start}"
    # trailing white space (a line's newline) cut, so a value cut short is reported where the text ends
    text = data.removeprefix("\ufeff").rstrip()
    if not text.strip():
        return "the text is empty"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if "\n" in text.strip() else f"column {exc.colno}"
        ends = " (the text ends there)" if exc.pos >= len(text) else ""
        # Python's "Unterminated string starting at" names the column itself
        return f"{exc.msg.removesuffix(' at')} at {where}{ends}"
    except RecursionError:
        return f"nested deeper than {MAX_JSON_DEPTH} levels"
    breach = limit_breach(text)
    return breach.removeprefix(INVALID) if breach else "a value a strict JSON reader refuses"


def invalid_json(data: bytes | str) -> str:
    """A reject reason: "invalid JSON: " and why."""
    return INVALID + json_problem(data)
