"""A team folder: an S3-compatible bucket prefix or a plain (shared) folder, through pyarrow's filesystems.

pyarrow's `S3FileSystem` is used because pyarrow is already what writes the corpus: no new dependency, the AWS
SDK's own credential chain (environment, profile, instance role) and request signing, and the same API for a local
folder (`LocalFileSystem`). Every remote error becomes a `RemoteError` with one line that says what to check; it
never holds a credential (the SDK's messages do not, and `scrub` removes any value of the credential variables).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.fs as pafs

SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID")
CHUNK = 8 * 1024 * 1024


class RemoteError(RuntimeError):
    """The team folder cannot be used as asked; the message (one line, no credentials) says why and what to do."""


class BadUrl(RemoteError):
    """The URL itself cannot be used (a person's mistake: exit 2)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a team folder is: a filesystem, the folder's path in it, and how to name it in messages."""

    fs: pafs.FileSystem
    root: str  # "bucket/prefix" or "/abs/folder", no trailing slash
    url: str  # as given (never holds credentials: `open_target` refuses a URL with any)
    endpoint: str | None = None
    env: Mapping[str, str] | None = None

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def where(self) -> str:
        return self.url if self.endpoint is None else f"{self.url} (endpoint {self.endpoint})"


def endpoint_of(env: Mapping[str, str], setting: str | None = None) -> str | None:
    """The S3 endpoint: the setting, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL (the SDKs' standard
    variables), else None (AWS itself)."""
    return setting or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None


def open_target(url: str, env: Mapping[str, str] | None = None, *, endpoint: str | None = None) -> Target:
    """The team folder at `url`: `s3://bucket/prefix` or a folder (`/path`, `file:///path`). Raises BadUrl."""
    env = dict(os.environ) if env is None else env
    parts = urlsplit(url)
    if parts.scheme in ("", "file"):
        if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
            raise BadUrl(f"{url}: a file URL names a folder of this machine (file:///path)")
        folder = Path(parts.path if parts.scheme == "file" else url).expanduser().absolute()
        return Target(pafs.LocalFileSystem(), str(folder).rstrip("/") or "/", url)
    if parts.scheme != "s3":
        raise BadUrl(
            f"{parts.scheme}:// is not supported: use s3://bucket/prefix (any S3-compatible store: for Google Cloud "
            "Storage its S3 API, with AWS_ENDPOINT_URL=https://storage.googleapis.com and HMAC keys) or a folder"
        )
    if "@" in parts.netloc or parts.password or parts.username:
        raise BadUrl("the URL must not hold credentials: give them the standard way (AWS_ACCESS_KEY_ID, a profile)")
    if not parts.netloc:
        raise BadUrl(f"{url}: no bucket (s3://bucket/prefix)")
    if parts.query or parts.fragment:
        raise BadUrl(f"{url}: no ?query or #fragment in a team URL (the endpoint is AWS_ENDPOINT_URL)")
    bucket, prefix = parts.netloc, parts.path.strip("/")
    where = endpoint_of(env, endpoint)
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    options: dict[str, object] = {
        "connect_timeout": 10,
        "request_timeout": 60,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3),
    }
    if where is not None:
        options["endpoint_override"] = where
        options["region"] = region or "us-east-1"  # an S3-compatible store mostly ignores it, but it is signed
    elif region:
        options["region"] = region
    else:
        with remote_errors(Target(pafs.LocalFileSystem(), bucket, url, None, env), f"finding the region of {bucket}"):
            options["region"] = pafs.resolve_s3_region(bucket)
    fs = pafs.S3FileSystem(**options)
    return Target(fs, f"{bucket}/{prefix}" if prefix else bucket, url, where, env)


def scrub(text: str, env: Mapping[str, str] | None) -> str:
    """`text` with the value of every credential variable replaced by `***`."""
    for name in SECRET_VARIABLES:
        value = (env or os.environ).get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text


_REQUEST_ID = re.compile(r"\s*\(Request ID: [^)]*\)")


def _credentials_given(env: Mapping[str, str]) -> bool:
    """Whether the environment or a credentials file offers credentials (an instance role cannot be seen here)."""
    if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return True
    home = env.get("HOME") or str(Path.home())
    files = (
        env.get("AWS_SHARED_CREDENTIALS_FILE") or f"{home}/.aws/credentials",
        env.get("AWS_CONFIG_FILE") or f"{home}/.aws/config",
    )
    return any(Path(f).exists() for f in files)


def explain(exc: BaseException, target: Target, doing: str) -> RemoteError:
    """One line for a failed remote operation: what was being done, where, and what to check."""
    text = scrub(_REQUEST_ID.sub("", str(exc).splitlines()[0] if str(exc) else type(exc).__name__), target.env)
    where = target.where()
    if "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        bucket = target.root.split("/", 1)[0]
        return RemoteError(f"{doing}: the bucket {bucket!r} does not exist at {where}: create it, or check the URL")
    if any(word in text for word in ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "403")):
        return RemoteError(
            f"{doing}: access denied at {where}: check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE) and that they may read and write this prefix"
        )
    if "INTERNAL_FAILURE" in text and not _credentials_given(target.env or os.environ):
        return RemoteError(
            f"{doing}: no credentials found for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
            "AWS_PROFILE (or run where an instance role answers)"
        )
    if any(word in text for word in ("NETWORK_CONNECTION", "curlCode", "Could not resolve", "Connection refused")):
        return RemoteError(f"{doing}: cannot reach {where} (no network, or a wrong endpoint): {text}")
    if isinstance(exc, PermissionError):
        return RemoteError(f"{doing}: permission denied in {where}: {exc.strerror or text}")
    return RemoteError(f"{doing} at {where}: {text}")


@contextlib.contextmanager
def remote_errors(target: Target, doing: str) -> Iterator[None]:
    """Turn an OSError of the block (what pyarrow raises for remote failures) into a RemoteError."""
    try:
        yield
    except RemoteError:
        raise
    except OSError as exc:
        raise explain(exc, target, doing) from None


def list_dir(target: Target, path: str, *, recursive: bool = False) -> list[pafs.FileInfo]:
    """What is under `path` (nothing when it does not exist)."""
    with remote_errors(target, f"listing {path}"):
        return list(target.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=recursive)))


def check_bucket(target: Target) -> None:
    """RemoteError when the target is in a bucket that does not exist (a folder: nothing to check)."""
    if _local(target):
        return
    bucket = target.root.split("/", 1)[0]
    with remote_errors(target, f"looking for the bucket {bucket}"):
        info = target.fs.get_file_info(bucket)
    if info.type == pafs.FileType.NotFound:
        raise RemoteError(f"the bucket {bucket!r} does not exist at {target.where()}: create it, or check the URL")


def read_bytes(target: Target, path: str) -> bytes | None:
    """The object at `path`, or None when there is none."""
    with remote_errors(target, f"reading {path}"):
        try:
            with target.fs.open_input_stream(path) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            if "NO_SUCH_KEY" in str(exc) or "Path does not exist" in str(exc):
                return None
            raise


def _local(target: Target) -> bool:
    return isinstance(target.fs, pafs.LocalFileSystem)


def write_bytes(target: Target, path: str, data: bytes) -> None:
    """Put `data` at `path` whole or not at all: S3 makes an object visible only once complete; in a folder, a
    temporary file is renamed over it."""
    with remote_errors(target, f"writing {path}"):
        if _local(target):
            folder = os.path.dirname(path)
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, f".tmp-{os.getpid()}-{os.path.basename(path)}")
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
            return
        with target.fs.open_output_stream(path) as out:
            out.write(data)


def upload(target: Target, local: Path, path: str) -> int:
    """Copy the local file to `path`, whole or not at all (as `write_bytes`); returns its size."""
    size = 0
    with remote_errors(target, f"uploading to {path}"):
        dest = path
        if _local(target):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            dest = os.path.join(os.path.dirname(path), f".tmp-{os.getpid()}-{os.path.basename(path)}")
        with open(local, "rb") as src, target.fs.open_output_stream(dest) as out:
            while chunk := src.read(CHUNK):
                out.write(chunk)
                size += len(chunk)
        if _local(target):
            os.replace(dest, path)
    return size


def download(target: Target, path: str, local: Path) -> int:
    """Copy `path` to the local file (written beside it and renamed into place); returns its size."""
    size = 0
    tmp = local.with_name(f".tmp-{os.getpid()}-{local.name}")
    with remote_errors(target, f"downloading {path}"):
        with target.fs.open_input_stream(path) as stream, open(tmp, "wb") as out:
            while chunk := stream.read(CHUNK):
                out.write(chunk)
                size += len(chunk)
        os.replace(tmp, local)
    return size


def delete(target: Target, path: str) -> None:
    with remote_errors(target, f"removing {path}"), contextlib.suppress(FileNotFoundError):
        target.fs.delete_file(path)
