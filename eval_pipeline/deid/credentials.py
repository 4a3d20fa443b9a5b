"""Validators of secrets: JWTs, API keys, passwords and bearer tokens (not names or references to a secret)."""

from __future__ import annotations

import base64
import binascii
import json
import re

from eval_pipeline.deid.lookalikes import identifier_of_words


def validate_jwt(value: str) -> str | None:
    header = value.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, binascii.Error):
        return None
    return value if isinstance(decoded, dict) else None


def validate_api_key(value: str) -> str | None:
    # Real keys mix letters and digits; this keeps words such as `sk-learn-...` out.
    tail = value[4:]
    return value if any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail) else None


# Values that name a secret rather than hold one: `os.environ`, `settings.API_KEY`, `OPENAI_API_KEY`, `$TOKEN`.
_SECRET_REFERENCE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|\$.*"
)


def validate_secret(value: str) -> str | None:
    if identifier_of_words(value):
        return None  # `token: token-run-1`: a run or test named after the word, not a secret
    return value if len(value) >= 6 and not _SECRET_REFERENCE.fullmatch(value) else None


def validate_bearer(value: str) -> str | None:
    return value if len(value) >= 12 and not identifier_of_words(value) else None


def validate_exact(value: str) -> str | None:
    return value
