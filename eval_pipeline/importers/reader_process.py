"""A source read in a second process while this one builds, checks and writes the traces.

Decoding a large trace export (JSON parsing, spans, dialect reading) and building the run's traces (ids, contract
checks, encoding) each take about half of an import; with two cores they overlap. The child is the same interpreter
running `serve` of this module (so nothing of the importing program is run again, whatever its main module); it is
given the reader and its arguments pickled on its stdin and sends what the reader yields in pickled batches,
length-prefixed, on its stdout, in the order read, so the import is the same as when read in this process. The
pipe's buffer is the only backlog (the child waits while it is full), so memory stays bounded. An error in the child
ends the import with its message; leaving the import early stops the child.
"""

from __future__ import annotations

import gc
import pickle
import struct
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from eval_pipeline.importers.common import RARE_COLLECTIONS, ImporterError

BATCH = 256  # items a message: fewer, larger pickles
_SIZE = struct.Struct("<Q")


def _send(stream: IO[bytes], message: tuple[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_SIZE.pack(len(data)) + data)


def _receive(stream: IO[bytes]) -> tuple[str, Any] | None:
    head = stream.read(_SIZE.size)
    if len(head) < _SIZE.size:
        return None
    (size,) = _SIZE.unpack(head)
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


def serve(source: IO[bytes], out: IO[bytes]) -> None:
    """The child: read (reader, args) from `source`, send what the reader yields to `out`."""
    # the reader frees what it reads by reference counting; the cyclic collector would only walk it (as the writer's)
    gc.set_threshold(*RARE_COLLECTIONS)
    try:
        reader, args = pickle.loads(source.read())
        batch: list[Any] = []
        for item in reader(*args):
            batch.append(item)
            if len(batch) >= BATCH:
                _send(out, ("items", batch))
                batch = []
        _send(out, ("items", batch))
        _send(out, ("done", None))
    except Exception as exc:  # noqa: BLE001 - every failure goes back to the importing process as its message
        message = (
            str(exc) if isinstance(exc, ImporterError) else f"reading the source failed: {type(exc).__name__}: {exc}"
        )
        _send(out, ("error", message))
    out.flush()


def read_in_child(reader: Callable[..., Iterable[Any]], *args: Any) -> Iterator[Any]:
    """What `reader(*args)` yields, read in a child process (`reader` a module-level function: it is pickled)."""
    command = f"import sys; from {__name__} import serve; serve(sys.stdin.buffer, sys.stdout.buffer)"
    child = subprocess.Popen([sys.executable, "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(pickle.dumps((reader, args), protocol=pickle.HIGHEST_PROTOCOL))
        child.stdin.close()
        while (message := _receive(child.stdout)) is not None:
            kind, payload = message
            if kind == "items":
                yield from payload
            elif kind == "done":
                return
            else:
                raise ImporterError(payload)
        raise ImporterError(f"the reading process ended without finishing (exit code {child.wait()})")
    finally:
        child.stdout.close()
        if child.poll() is None:
            child.kill()
        child.wait()


__all__ = ["read_in_child", "serve"]
