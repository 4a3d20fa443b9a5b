"""Names of people from records: the keys that hold them, and which values look like a person's name."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from eval_pipeline.deid.detectors import TOKEN_RE

NAME_KEYS = (
    r"(?:first|last|full|given|family|middle|maiden|display|legal|preferred|nick)?_?name|surname|"
    r"(?:customer|contact|recipient|sender|cardholder|card_?holder|account_?holder|holder|passenger|patient|"
    r"employee|user|owner|member|guest|traveler|traveller|beneficiary|payee|payer|client|person|buyer|seller|"
    r"assignee|reporter|requester)_?(?:first_?|last_?|full_?)?name"
)


def _field_pattern(keys: str) -> str:
    """`"key": "value"` in JSON text for keys matching `keys`; group 1 is the value, still JSON-escaped."""
    return r'"(?i:' + keys + r')"\s*:\s*"((?:[^"\\]|\\.)*)"'


NAME_FIELD_PATTERN = _field_pattern(NAME_KEYS)
NAME_FIELD_RE = re.compile(NAME_FIELD_PATTERN)
NAME_KEY_RE = re.compile(r"(?i:" + NAME_KEYS + r")")
# Keys that name a person by role rather than by `name` (`signed_by`, `approved_by`, `agent_name`, `assignee`):
# their values count as names when they look like a full name (two or more capitalized words).
ROLE_KEYS = (
    r"[a-z0-9_]*_by|(?:[a-z0-9]+_)*(?:agent|signer|signatory|signee|author|approver|reviewer|assignee|manager|"
    r"representative|witness|officer|contact|recipient|requester|requestor|addressee|customer|employee|"
    r"cardholder|beneficiary|patient|doctor|physician|nurse|spouse|guardian|next_?of_?kin)(?:_?name)?"
)
ROLE_FIELD_PATTERN = _field_pattern(ROLE_KEYS)
ROLE_FIELD_RE = re.compile(ROLE_FIELD_PATTERN)
ROLE_KEY_RE = re.compile(r"(?i:" + ROLE_KEYS + r")")
# Any `"key":"string value"` pair in JSON text: group 1 the key, group 2 the value, both still JSON-escaped.
KV_STRING_PATTERN = r'"((?:[^"\\]|\\.){1,80})"\s*:\s*"((?:[^"\\]|\\.)*)"'
KV_STRING_RE = re.compile(KV_STRING_PATTERN)


def learned_field_pattern(keys: Iterable[str]) -> str | None:
    """A `"key":"value"` pattern for keys learned to hold names (see name_learning.NameCollector), None when there
    are none."""
    keys = sorted(set(keys))
    if not keys:
        return None
    return r'"(?:' + "|".join(re.escape(k) for k in keys) + r')"\s*:\s*"((?:[^"\\]|\\.)*)"'


_NAME_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*\.?")
_HONORIFICS = {"mr", "mrs", "ms", "mx", "dr", "prof", "sir", "jr", "sr", "ii", "iii", "iv"}


def person_name(value: str) -> str | None:
    """`value` with whitespace collapsed when it looks like a person's name (1-4 capitalized words), else None."""
    words = value.split()
    if not 1 <= len(words) <= 4:
        return None
    for word in words:
        if not (word[0].isupper() and _NAME_WORD.fullmatch(word)):
            return None
    name = " ".join(words)
    if len(name) < 2 or len(words) == 1 and name.rstrip(".").lower() in _HONORIFICS:
        return None
    return name


def name_variants(name: str) -> set[str]:
    """The words of a name that are replaced wherever they stand as whole words, as written and in upper case.

    Each word is its own pseudonym, so `Mia Li` becomes two tokens and `Mia` alone the first of them. Hyphens split
    words (`Jean-Luc`); an apostrophe word stays whole and also gives its parts (`O'Brien`, `Brien`).
    """
    variants: set[str] = set()
    for word in re.split(r"[\s.-]+", name):
        for part in {word, *re.split(r"['’]", word)}:
            if len(part) >= 2 and part.lower() not in _HONORIFICS and part[0].isupper():
                variants.update({part, part.upper()})
    return variants


def full_name(value: str) -> str | None:
    """`value` as a person's name of two to four capitalized words, else None."""
    name = person_name(value)
    return name if name is not None and len(name.split()) >= 2 else None


def names_from_field_match(match_text: str, learned: re.Pattern[str] | None = None) -> str | None:
    """The person name in one `"key":"value"` match of NAME_FIELD_PATTERN, ROLE_FIELD_PATTERN (a full name only)
    or a learned key's pattern, or None."""
    m = NAME_FIELD_RE.fullmatch(match_text)
    judge = person_name
    if m is None and learned is not None:
        m = learned.fullmatch(match_text)
    if m is None:
        m, judge = ROLE_FIELD_RE.fullmatch(match_text), full_name
    if m is None:
        return None
    try:
        value = json.loads(f'"{m.group(1)}"')
    except ValueError:
        return None
    if TOKEN_RE.search(value):
        return None
    return judge(value)
