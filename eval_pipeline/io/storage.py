"""One reader for local paths and object-store URLs (s3://, gs://, abfs:// …) through pyarrow's filesystems."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

import pyarrow.fs as pafs


class InputError(Exception):
    """An input location is missing or unusable; the message says which and why."""


class OutsideRootError(InputError, ValueError):
    """A local path whose real path (symbolic links followed) leaves the root it must stay under."""

    def __init__(self, path: str, root: str) -> None:
        super().__init__(
            f"refusing {path}: its real path {os.path.realpath(path)} is outside {root} "
            "(a symbolic link may not lead out of the data root)"
        )
        self.path, self.root = path, root


def within(path: str, real_root: str) -> str:
    """The real path of a local `path`; OutsideRootError unless it is `real_root` (a real path) or under it."""
    # realpath follows every link, also one that a later part of the path crosses, and resolves '..' after links,
    # as the kernel does; a path that does not exist yet is resolved as far as it exists (the parent of a new file).
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        raise OutsideRootError(path, real_root)
    return real


def inside_root(root: str, *parts: str) -> str:
    """The real path of a folder under a local root (the default warehouse or reports of a data root); OutsideRootError
    when a link takes it out of the root's real path."""
    return within(os.path.join(os.path.abspath(root), *parts), os.path.realpath(root))


def is_url(location: str) -> bool:
    """Whether a location is an object-store URL rather than a local path."""
    scheme = urlparse(location).scheme
    return len(scheme) > 1 and scheme != "file"


# The standard AWS variables that storage_options_from_env reads, each passed on under its own name.
STORAGE_ENV_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP")


def storage_options_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Object-store credentials and endpoint from the standard AWS variables of `environ`, for deltalake; the edge
    (the CLI, a Dagster resource through EnvVar) passes the environment in."""
    options = {}
    for env in STORAGE_ENV_VARS:
        if environ.get(env):
            options[env] = environ[env]
    if options.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        options.setdefault("AWS_ALLOW_HTTP", "true")
    if "AWS_ENDPOINT_URL" in options:
        # S3-compatible servers have no DynamoDB lock. deltalake (1.6 checked) commits with a conditional put
        # (If-None-Match), atomic on stores that honour it (AWS S3, MinIO, R2, moto): concurrent lane writers stay safe.
        options.setdefault("AWS_S3_ALLOW_UNSAFE_RENAME", "true")
    return options


def _inside(parts: tuple[str, ...]) -> list[str]:
    """The parts stripped of '/' at their ends; InputError for one that could leave the root."""
    # Identifiers are validated where they enter (manifests, CLI flags, importers); this is the defence in depth. A
    # part may hold '/' (a relative path such as the gate policy's `judge.profile`), never a '..' segment, '\\' or NUL.
    checked = []
    for part in parts:
        if not part:
            continue
        if "\\" in part or "\x00" in part or ".." in part.split("/"):
            raise InputError(f"refusing path part {part!r}: it could point outside the data root")
        checked.append(part.strip("/"))
    return checked


@dataclass(frozen=True)
class Location:
    """A root directory on some filesystem; paths under it are joined with '/' and never leave it."""

    fs: pafs.FileSystem
    root: str
    uri: str
    # The real path of a local root: every local path joined under it must resolve inside it (None for object stores,
    # whose keys have no links).
    jail: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.jail is None and isinstance(self.fs, pafs.LocalFileSystem):
            object.__setattr__(self, "jail", os.path.realpath(self.root))

    def join(self, *parts: str) -> str:
        path = "/".join([self.root.rstrip("/"), *_inside(parts)])
        if self.jail is not None:
            within(path, self.jail)
        return path

    def uri_of(self, *parts: str) -> str:
        return "/".join([self.uri.rstrip("/"), *_inside(parts)])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.join(*parts)).type != pafs.FileType.NotFound

    def is_dir(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.join(*parts)).type == pafs.FileType.Directory

    def subdirs(self, *parts: str) -> list[str]:
        path = self.join(*parts)
        if not self.is_dir(*parts):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=False))
        return sorted(info.base_name for info in infos if info.type == pafs.FileType.Directory)

    def files(self, *parts: str, suffixes: tuple[str, ...] = ()) -> list[str]:
        path = self.join(*parts)
        if not self.is_dir(*parts):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=False))
        names = [i.base_name for i in infos if i.type == pafs.FileType.File and not i.base_name.startswith(".")]
        return sorted(n for n in names if not suffixes or n.endswith(suffixes))

    def read_bytes(self, *parts: str) -> bytes:
        with self.fs.open_input_stream(self.join(*parts)) as stream:
            return stream.readall()

    def iter_blocks(self, *parts: str, block_bytes: int = 64 << 20) -> Iterator[bytes]:
        """A file's bytes in blocks of about `block_bytes` (bounded memory for large files)."""
        with self.fs.open_input_stream(self.join(*parts)) as stream:
            while block := stream.read(block_bytes):
                yield block

    def read_text(self, *parts: str) -> str:
        return self.read_bytes(*parts).decode("utf-8")

    def write_bytes(self, data: bytes, *parts: str) -> None:
        self.write_chunks([data], *parts)

    def write_chunks(self, chunks: Iterable[bytes], *parts: str) -> None:
        """Write a file from chunks as they come (a large file never held whole)."""
        path = self.join(*parts)
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        with self.fs.open_output_stream(path) as stream:
            for chunk in chunks:
                stream.write(chunk)


def open_location(location: str | os.PathLike) -> Location:
    """A Location for a local directory or an object-store URL."""
    text = os.fspath(location)
    if is_url(text):
        fs, path = pafs.FileSystem.from_uri(text)
        return Location(fs=fs, root=path, uri=text)
    absolute = os.path.abspath(text.removeprefix("file://"))
    return Location(fs=pafs.LocalFileSystem(), root=absolute, uri=absolute)
