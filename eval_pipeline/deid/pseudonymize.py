"""Keyed pseudonyms: HMAC-SHA256 of a value's normal form under a secret key from the environment the caller passes."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from eval_pipeline.deid.detectors import ENTITY_TYPES, normalize

KEY_ENV_VAR = "EVAL_PIPELINE_DEID_KEY"
MIN_KEY_LENGTH = 16
# Public and fixed, so demo runs are reproducible; tokens made with it can be reversed by guessing values.
DEMO_KEY = b"eval-pipeline-local-demo-key--not-a-secret"


class DeidKeyError(RuntimeError):
    """No usable de-identification key, and the local demo mode was not chosen."""


def resolve_key(environ: Mapping[str, str], demo: bool = False) -> bytes:
    """The HMAC secret from EVAL_PIPELINE_DEID_KEY of `environ` (the runner passes its environment, a step the key
    source of its EvalConfig); the fixed DEMO_KEY only when demo mode is chosen explicitly."""
    value = environ.get(KEY_ENV_VAR)
    if value:
        key = value.encode("utf-8")
        if len(key) < MIN_KEY_LENGTH:
            raise DeidKeyError(
                f"{KEY_ENV_VAR} is set but only {len(key)} bytes long; use a random secret of at least "
                f"{MIN_KEY_LENGTH} bytes (for example: python -c 'import secrets; print(secrets.token_hex(32))'), "
                "because a short key lets anyone rebuild pseudonyms by guessing values."
            )
        return key
    if demo:
        return DEMO_KEY
    raise DeidKeyError(
        f"No de-identification key: set {KEY_ENV_VAR} to a random secret of at least {MIN_KEY_LENGTH} bytes "
        f"(for example: export {KEY_ENV_VAR}=$(python -c 'import secrets; print(secrets.token_hex(32))')) "
        "and keep it out of the repository; or choose the explicit local demo mode (eval-pipeline run --deid-demo), "
        "which uses a fixed public key and must never be used on real customer data."
    )


class Pseudonymizer:
    """Consistent tokens `<TYPE_hex>`: the same value of the same type gives the same token under one key."""

    def __init__(self, key: bytes, hex_chars: int = 16) -> None:
        if not key:
            raise DeidKeyError("an empty de-identification key is not allowed")
        if not 16 <= hex_chars <= 64:
            # Fewer than 64 bits and two of ~100k distinct values of one type share a token (birthday bound).
            raise ValueError(f"hex_chars must lie in 16..64, got {hex_chars}")
        # Copying a keyed HMAC state skips re-deriving the padded key for every value.
        self._keyed = hmac.new(bytes(key), digestmod=hashlib.sha256)
        self._hex_chars = hex_chars
        self._cache: dict[tuple[str, str], str] = {}

    def token(self, entity_type: str, value: str) -> str:
        """The token of `value` as an `entity_type`, from the HMAC of its normal form (see detectors.normalize)."""
        cached = self._cache.get((entity_type, value))
        if cached is not None:
            return cached
        if entity_type not in ENTITY_TYPES:
            raise ValueError(f"unknown entity type {entity_type!r}; expected one of {ENTITY_TYPES}")
        # The type is part of the message, so one string seen as two types never shares a token.
        mac = self._keyed.copy()
        mac.update(f"{entity_type}\x1f{normalize(entity_type, value)}".encode())
        digest = mac.hexdigest()[: self._hex_chars]
        token = f"<{entity_type}_{digest}>"
        self._cache[(entity_type, value)] = token
        return token
