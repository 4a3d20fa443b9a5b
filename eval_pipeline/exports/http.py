"""One JSON POST to a receiver (Langfuse, an OTLP collector), with its failure as one sentence.

Credentials never follow a redirect: a redirect to another origin (scheme, host, port) is refused and named; one to
the same origin is followed only when it keeps the method and the body (307, 308), since 301, 302 and 303 turn the
POST into a GET without its body. Whatever the receiver says back (an error body, a redirect target, a refusal
message) is printed only scrubbed of anything that looks like a credential, on one line, cut to `SHOWN_CHARS`.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable

# what is shown of a receiver's answer; enough to read an error message, too little to replay a page
SHOWN_CHARS = 200
# bytes of an error body read to scrub it whole before cutting (a secret is never half shown at the cut)
READ_BYTES = 64 << 10
MAX_REDIRECTS = 5
KEEPS_METHOD_AND_BODY = (307, 308)
REDACTED = "[redacted]"
DEFAULT_PORTS = {"http": 80, "https": 443}

_CREDENTIAL_PATTERNS = (
    # a header or field that carries a credential, quoted or not: Authorization: …, "x-api-key": "…", token=…
    re.compile(
        r"""(?i)((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token|secret[-_]?key|password)"""
        r"""(["']?\s*[:=]\s*["']?)[^"'\r\n,;}&]+"""
    ),
    re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}"),
    # Langfuse-style keys (pk-lf-…, sk-lf-…), OpenAI-style sk-… keys
    re.compile(r"\b()()(?:pk|sk)-[A-Za-z0-9_-]{4,}"),
    # JSON Web Tokens: three base64url parts, the first a JSON header ({" → eyJ)
    re.compile(r"\b()()eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
)
_NOT_PRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")


class SendError(Exception):
    """The receiver refused the request or could not be reached; the message says which, for the user."""


def scrub(text: str, secrets: Iterable[str] = (), limit: int = SHOWN_CHARS) -> str:
    """`text` with known secrets and anything credential-like replaced, control characters folded, cut to `limit`."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _CREDENTIAL_PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _NOT_PRINTABLE.sub(" ", text).strip()
    return text if len(text) <= limit else text[:limit] + "…"


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the default port filled in: what decides whether credentials may go there."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port if port is not None else DEFAULT_PORTS.get(scheme)


def header_secrets(headers: dict[str, str]) -> list[str]:
    """The values of every request header but Content-Type, and the token of an `Authorization: <scheme> <token>`."""
    values = [v for k, v in headers.items() if k.lower() != "content-type"]
    return values + [v.split(None, 1)[1] for v in values if len(v.split(None, 1)) == 2]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hands every redirect back as an HTTPError, so post_json decides (urllib would resend the headers to any host)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _redirect_target(url: str, exc: urllib.error.HTTPError, secrets: list[str], shown_url: str) -> str:
    """The URL a redirect points to; SendError when it may not be followed with the request's credentials."""
    location = exc.headers.get("Location") if exc.headers else None
    if not location:
        raise SendError(f"HTTP {exc.code} from {shown_url} without a Location: not followed")
    target = urllib.parse.urljoin(url, location)
    shown = scrub(target, secrets, limit=500)
    if origin(target) != origin(url):
        raise SendError(
            f"HTTP {exc.code} from {shown_url} redirects to another origin, {shown}: refused, credentials are "
            "never sent to another server (give that URL as --endpoint if you trust it)"
        )
    if exc.code not in KEEPS_METHOD_AND_BODY:
        raise SendError(
            f"HTTP {exc.code} from {shown_url} redirects to {shown}: not followed, a {exc.code} would resend the "
            "POST as a GET without its body (only 307 and 308 keep them)"
        )
    return target


def post_json(
    url: str, body: bytes, headers: dict[str, str], timeout: float, secrets: Iterable[str] = ()
) -> tuple[int, bytes]:
    """(HTTP status, response body) of a POST; SendError for an HTTP error status, a refused redirect or an
    unreachable receiver. `secrets` (besides the header values) are never shown in the error."""
    hidden = [*header_secrets(headers), *secrets]
    current = url

    def where() -> str:
        # a URL a redirect gave is the receiver's text too
        return scrub(current, hidden, limit=500)

    for _ in range(MAX_REDIRECTS + 1):
        request = urllib.request.Request(current, data=body, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                current = _redirect_target(current, exc, hidden, where())
                continue
            detail = scrub(exc.read(READ_BYTES).decode("utf-8", "replace"), hidden)
            raise SendError(f"HTTP {exc.code} from {where()}: {detail or scrub(str(exc.reason), hidden)}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise SendError(f"cannot reach {where()}: {scrub(str(getattr(exc, 'reason', exc)), hidden)}") from exc
    raise SendError(f"more than {MAX_REDIRECTS} redirects from {url}: stopped")
