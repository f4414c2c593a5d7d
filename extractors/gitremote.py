"""A git remote as people group sessions by it: `host/owner/repo`, never with the credentials a URL can carry.

`https://user:token@github.com/o/r.git`, `git@github.com:o/r.git`, `ssh://git@github.com:22/o/r` and
`https://github.com/o/r/` are one repository, `github.com/o/r`: the scheme, the userinfo (where tokens live),
the port, a query or fragment, a trailing `/` and `.git` are dropped, the host is lowercased, the path keeps its
case (GitHub ignores it, other hosts do not). A local remote (`/srv/git/r.git`, `file:///srv/git/r.git`) is its
path without `.git`. Anything else (a bare word, text with spaces, a redacted placeholder) is not a remote: None.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# `[user@]host:path` (git's scp-like syntax): no scheme, and no `/` before the first `:`.
_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[A-Za-z0-9._-]+):(?P<path>[^\s:@][^\s@]*)$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_SCHEMES = frozenset({"http", "https", "ssh", "git", "git+ssh", "ssh+git", "ftp", "ftps"})


def _path(path: str) -> str | None:
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    parts[-1] = parts[-1].removesuffix(".git")
    return "/".join(p for p in parts if p) or None


def _hosted(host: str | None, path: str) -> str | None:
    host = (host or "").lower().rstrip(".")
    tail = _path(path)
    if not host or not _HOST.match(host) or tail is None:
        return None
    return f"{host}/{tail}"


def repository(remote: object) -> str | None:
    """The normalised repository of a remote URL (see the module docstring), or None when it is not one."""
    if not isinstance(remote, str):
        return None
    value = remote.strip()
    if not value or len(value.split(None, 1)) > 1:  # empty, or whitespace inside (str.split's is str.isspace's)
        return None
    if _URL.match(value):
        try:
            url = urlsplit(value)
            host = url.hostname  # without userinfo and port; raises on a malformed port only when asked for it
        except ValueError:
            return None
        scheme = url.scheme.lower()
        if scheme == "file":
            local = _path(url.path)
            return None if local is None else "/" + local
        if scheme not in _SCHEMES:
            return None
        return _hosted(host, url.path)
    if value.startswith("/"):
        local = _path(value)
        return None if local is None else "/" + local
    if _WINDOWS_PATH.match(value):
        return value.rstrip("\\/").removesuffix(".git") or None
    match = _SCP.match(value)
    if match is not None and "/" not in match.group("host"):
        return _hosted(match.group("host"), match.group("path"))
    return None
