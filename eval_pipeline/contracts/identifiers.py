"""Identifiers (run ids, version strings) name folders under the data root: they are names, never paths.

See docs/inputs.md#identifiers.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import unicodedata
from urllib.parse import unquote_to_bytes

# Characters a reader does not see or that reorder what is shown: controls, format characters (bidirectional overrides
# and isolates U+202A..U+202E, U+2066..U+2069, zero-width U+200B..U+200D, U+FEFF …), line and paragraph separators.
HIDDEN_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")
# The same set as a Rust-regex class, for polars (`str.contains`) on columnar paths; Python's `re` has no \p{…}.
HIDDEN_CHARACTER_REGEX = "[" + "".join(rf"\p{{{category}}}" for category in HIDDEN_CATEGORIES) + "]"


def hidden_character_problem(value: str) -> str | None:
    """Why a text holds a character a reader would not see as written (a control or format character), or None."""
    for character in value:
        if unicodedata.category(character) in HIDDEN_CATEGORIES:
            return f"must not contain control characters (found U+{ord(character):04X})"
    return None


def text_id_problem(value: object) -> str | None:
    """Why a value cannot be a case id (free text that may hold '/': it is percent-encoded where it names a file),
    or None when it can: a non-empty string with no control or format characters."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    return hidden_character_problem(value)


def identifier_problem(value: object) -> str | None:
    """Why a value cannot be an identifier, or None when it can."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if value != value.strip():
        return "must not start or end with whitespace"
    hidden = hidden_character_problem(value)
    if hidden is not None:
        return hidden
    if "/" in value or "\\" in value:
        return "must not contain '/' or '\\' (it is a name, not a path)"
    if ".." in value:
        return "must not contain '..' (it is a name, not a path)"
    return None


def validate_identifier(value: str, what: str) -> str:
    """The value itself when it is a valid identifier; ValueError naming `what` and why otherwise."""
    problem = identifier_problem(value)
    if problem is not None:
        raise ValueError(f"{what} {value!r} {problem}")
    return value


def identifier_arg(what: str):
    """An argparse `type=` that accepts only identifiers, so a bad value is a usage error (exit 2)."""

    def parse(value: str) -> str:
        try:
            return validate_identifier(value, what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    parse.__name__ = what.replace(" ", "_")
    return parse


# The longest file name (in bytes) that common file systems accept (ext4, XFS, APFS, NTFS in UTF-16 units).
FILE_NAME_MAX_BYTES = 255
# Names derived from ids stay shorter: a writer puts its temporary file beside the final one under a longer name
# (`.<name>.<32 hex digits>.tmp`, 38 bytes more), which must fit too.
ID_FILE_NAME_MAX_BYTES = FILE_NAME_MAX_BYTES - 55
_HASH_HEX = 24  # 96 bits of SHA-256: two long names that share their first 150 bytes still get two files
_TRAILING_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})$")


def bounded_file_name(name: str, max_bytes: int = ID_FILE_NAME_MAX_BYTES) -> str:
    """A file name of at most `max_bytes` UTF-8 bytes: the name itself when it fits; else its start, '~' and a hash of
    the whole name, before its extension (the same name always gives the same result, two names two results)."""
    encoded = name.encode("utf-8")
    if len(encoded) <= max_bytes:
        return name
    stem, dot, extension = name.rpartition(".")
    suffix = f".{extension}" if dot and stem and len(extension.encode("utf-8")) <= 16 else ""
    stem = stem if suffix else name
    marker = "~" + hashlib.sha256(encoded).hexdigest()[:_HASH_HEX]
    room = max_bytes - len(marker) - len(suffix.encode("utf-8"))
    kept = stem.encode("utf-8")[:room].decode("utf-8", errors="ignore")
    # a URL-quoted name is cut between whole characters: no half escape (`%C`), no half of a character's escapes
    kept = re.sub(r"%[0-9A-Fa-f]?$", "", kept)
    for _ in range(3):
        try:
            unquote_to_bytes(kept).decode("utf-8")
            break
        except UnicodeDecodeError:
            escape = _TRAILING_ESCAPE.search(kept)
            if escape is None or int(escape.group(1), 16) < 0x80:
                break
            kept = kept[: escape.start()]
    return kept + marker + suffix


# What `--baseline` takes for "the newest earlier run of the candidate's dataset whose gates all passed" (chosen by
# eval_pipeline.gating.baseline); here, at the bottom layer, so the command line names it without importing gating.
LATEST_PASSING = "latest-passing"
