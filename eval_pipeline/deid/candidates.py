"""The detector driver: the combined regex's candidate matches classified into validated findings.

The hot path runs one combined regex over whole columns in polars; Python only classifies the unique candidate
matches here: which detector matched, whether its checksum holds, and which part of the match is the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eval_pipeline.deid.detectors import DETECTORS, IBAN, PERSON, TOKEN_RE, Detector
from eval_pipeline.deid.identifiers import iban_prefix

_PY_PATTERNS = {d.name: d.python() for d in DETECTORS}
_VALUE_DETECTORS = tuple(d for d in DETECTORS if not d.context)


@dataclass(frozen=True)
class Finding:
    """One detected value inside a candidate match: its type, span within the candidate, and raw text."""

    entity_type: str
    start: int
    end: int
    value: str


_SEPARATOR = re.compile(r"[\s.()/-]|\\[nrt]")


def _try(detector: Detector, value: str, offset: int, regions: frozenset[str] = frozenset()) -> Finding | None:
    """`value`, or its longest valid prefix, as this value detector's entity; None when nothing validates."""
    pattern = _PY_PATTERNS[detector.name]
    if detector.name == "iban":
        end = iban_prefix(value) if pattern.fullmatch(value) else None
        return None if end is None else Finding(IBAN, offset, offset + end, value[:end])
    if detector.name == "email" and ".." in value.partition("@")[0]:
        # `see...jane@x.com`: the local part the regex took starts at `see`; the address starts after the dots.
        start = value.rindex("..", 0, value.index("@")) + 2
        start += len(value[start:]) - len(value[start:].lstrip("."))
        return _try(detector, value[start:], offset + start, regions) if start < value.index("@") else None
    text = value
    if detector.trim and not (detector.name == "ipv6" and value.endswith("::")):
        text = value.rstrip(detector.trim)
    cuts = [len(text)]
    if detector.shrink:
        cuts += sorted({m.start() for m in _SEPARATOR.finditer(text)}, reverse=True)
    for cut in cuts:
        prefix = text[:cut]
        if prefix and pattern.fullmatch(prefix) is not None and detector.check(prefix, regions) is not None:
            return Finding(detector.entity_type, offset, offset + cut, prefix)
    return None


# All value detectors as one alternation: the first alternative that fully matches names the likely detector, so
# most candidates cost one regex call; the ordered loop below settles the rest (failed checksums, trims).
_VALUE_ALTERNATION = re.compile("|".join(f"(?P<{d.name}>{_PY_PATTERNS[d.name].pattern})" for d in _VALUE_DETECTORS))
_BY_NAME = {d.name: d for d in DETECTORS}
_CONTEXT_DETECTORS = tuple(d for d in DETECTORS if d.context)
_CONTEXT_ALTERNATION = re.compile(
    "|".join(
        f"(?P<{d.name}>{_PY_PATTERNS[d.name].pattern.replace('(?P<v>', f'(?P<v_{d.name}>')})"
        for d in _CONTEXT_DETECTORS
    )
)
# The combined scan in Python, to search the rest of a match after its first value (a card after a phone's digits).
_PY_SCAN = re.compile(
    "|".join(
        ("(?:_|\\b)" if d.lead_boundary else "") + f"(?:{_PY_PATTERNS[d.name].pattern.replace('(?P<v>', '(?:')})"
        for d in DETECTORS
    )
)


def _classify_value(value: str, offset: int, regions: frozenset[str] = frozenset()) -> Finding | None:
    """The first value detector that fully matches `value` (or a prefix of it) and validates it."""
    first = _VALUE_ALTERNATION.match(value)
    if first is None:
        return None  # no detector matches at the start, so no prefix can validate either
    likely = _BY_NAME[first.lastgroup]  # type: ignore[index]
    if (found := _try(likely, value, offset, regions)) is not None:
        return found
    for detector in _VALUE_DETECTORS:
        if detector is not likely and (found := _try(detector, value, offset, regions)) is not None:
            return found
    return None


def _classify_body(body: str, offset: int, names: frozenset[str], regions: frozenset[str]) -> Finding | None:
    """The value that one candidate (without its escape prefix; it starts at `offset`) begins with, or None."""
    if body in names:
        return Finding(PERSON, offset, offset + len(body), body)
    # After a context match the value is classified by the value detectors first, so `"api_key":"sk-…"` and a
    # bare `sk-…` get the same token: identical values must become identical tokens wherever they are found.
    match = _CONTEXT_ALTERNATION.fullmatch(body)
    if match is None:
        return _classify_value(body, offset, regions)
    detector = _BY_NAME[match.lastgroup]  # type: ignore[index]
    group = f"v_{detector.name}"
    value = match.group(group)
    if TOKEN_RE.fullmatch(value):
        return None
    start = offset + match.start(group)
    inner = _classify_value(value, start, regions)
    if inner is not None and inner.end - inner.start == len(value):
        return inner
    if detector.check(value, regions) is not None:
        return Finding(detector.entity_type, start, start + len(value), value)
    return None


def _first_finding(text: str, offset: int, names: frozenset[str], regions: frozenset[str]) -> Finding | None:
    """The value a candidate starts with, also when an underscore edge was taken into the match (`_203.0.113.7_`)."""
    found = _classify_body(text, offset, names, regions)
    if found is None and (text[0] == "_" or text[-1] == "_"):
        lead = 1 if text[0] == "_" else 0
        trail = len(text) - 1 if text[-1] == "_" else len(text)
        found = _classify_body(text[lead:trail], offset + lead, names, regions) if trail > lead else None
    return found


def classify(
    candidate: str, names: frozenset[str] = frozenset(), regions: frozenset[str] = frozenset()
) -> list[Finding]:
    """The personal values inside one regex candidate, in order, with spans relative to the candidate; `regions`
    (from locale_regions) turn on bare digit ids and set the region of national phone numbers.

    Usually one; more when the regex ran a value on into the next one (a card after a phone number's digits).
    """
    if candidate.startswith("\\"):
        if len(candidate) == 2 or candidate[1] == "u" and len(candidate) == 6 or candidate[1] not in "nrtbf":
            return []
        offset = 2
    else:
        offset = 0
    body = candidate[offset:]
    if not body or TOKEN_RE.fullmatch(body):
        return []
    first = _first_finding(body, offset, names, regions)
    if first is None:
        # A match that fails as a whole (a card failing Luhn) is a look-alike: its digits are not searched again.
        return []
    findings = [first]
    # The regex may have run a value on into the next one (a phone number's digit groups into a card): the rest
    # after the first value is searched again.
    pos = first.end
    while pos < len(candidate):
        match = _PY_SCAN.search(candidate, pos)
        if match is None:
            break
        found = _first_finding(match.group(), match.start(), frozenset(), regions)
        if found is not None and not TOKEN_RE.fullmatch(found.value):
            findings.append(found)
            pos = found.end
        else:
            pos = match.start() + 1
    return findings
