"""Identifiers (run ids, version strings) name folders under the data root: they are names, never paths (SPEC §11)."""

from __future__ import annotations

import argparse
import unicodedata


def identifier_problem(value: object) -> str | None:
    """Why a value cannot be an identifier, or None when it can."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if value != value.strip():
        return "must not start or end with whitespace"
    for character in value:
        if unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp"):
            return f"must not contain control characters (found U+{ord(character):04X})"
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
