"""What a JSON line may hold to be stored: finite numbers, integers of 64 bits, bounded nesting."""

from __future__ import annotations

import json
import math

MAX_JSON_DEPTH = 128
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UTF8_BOM = b"\xef\xbb\xbf"

# For a whole column at once (RE2 in Arrow): only a trace line matching this can break a limit that neither pydantic
# nor pyarrow enforces (pyarrow refuses 1e400 and lone surrogates itself); the exact check parses the line again.
SUSPICIOUS_JSON_PATTERN = rf"NaN|Infinity|[0-9]{{19}}|(?:[\[{{][^\[{{]*){{{MAX_JSON_DEPTH + 1}}}"


class _Refused(ValueError):
    pass


def _constant(name: str) -> float:
    raise _Refused(f"invalid JSON: {name} is not a JSON number")


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:  # more digits than Python converts
        value = None
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        raise _Refused(f"integer {_abbreviated(text)} is outside the 64-bit range")
    return value


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {_abbreviated(text)} is beyond the range of a 64-bit float")
    return value


def _abbreviated(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}…({len(text)} characters)"


# Digits mapped to "0" and "E" to "e" turn the search for long numbers into plain substring tests (a regex over
# every byte of a line is ~10x slower).
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789E", b"000000000e")
_LONG_NUMBER_MARKERS = (b"0" * 19, b"0e000", b"0e+000")


def may_break_limits(raw: bytes) -> bool:
    """Whether one line could hold a NaN/Infinity literal, a number beyond float64 or int64, a surrogate escape or
    nesting beyond MAX_JSON_DEPTH (false alarms only cost the exact check)."""
    if b"NaN" in raw or b"Infinity" in raw or b"\\ud" in raw or b"\\uD" in raw:
        return True
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
        return True
    if len(raw) < 5:
        return False
    normalized = raw.translate(_DIGITS_TO_ZERO)
    return any(marker in normalized for marker in _LONG_NUMBER_MARKERS)


def depth_of(value: object) -> int:
    """Nesting depth of a decoded JSON value (a scalar is 0, `{}` is 1)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        inner, depth = stack.pop()
        if isinstance(inner, dict):
            children = inner.values()
        elif isinstance(inner, list):
            children = inner
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def limit_breach(text: str) -> str | None:
    """Why a JSON text cannot be stored (a NaN/Infinity literal, a number beyond float64, an integer beyond 64 bits,
    nesting deeper than MAX_JSON_DEPTH, a lone surrogate); None when it can, or when it is not JSON (the caller says
    why)."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_number)
    except _Refused as exc:
        return str(exc)
    except RecursionError:
        return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    except json.JSONDecodeError:
        return None
    if depth_of(value) > MAX_JSON_DEPTH:
        return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"invalid JSON: a string holds a lone surrogate (U+{ord(exc.object[exc.start]):04X}), which is not text"
    return None
