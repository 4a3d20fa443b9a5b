"""One JSON POST to a receiver (Langfuse, an OTLP collector), with its failure as one sentence."""

from __future__ import annotations

import urllib.error
import urllib.request


class SendError(Exception):
    """The receiver refused the request or could not be reached; the message says which, for the user."""


def post_json(url: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """(HTTP status, response body) of a POST; SendError for an HTTP error status or an unreachable receiver."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise SendError(f"HTTP {exc.code} from {url}: {detail or exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SendError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from exc
