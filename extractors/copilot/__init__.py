"""GitHub Copilot CLI sessions (`$COPILOT_HOME/session-state/<session id>/events.jsonl`, default `~/.copilot`).

One unit = one events file: the current layout's `session-state/<id>/events.jsonl` (with its `workspace.yaml`
sidecar, counted in the unit's fingerprint) or the older flat `session-state/<id>.jsonl`. Resumes append to the
same file, so one file is one session however many process segments it holds. Sub-agents write their events into
the parent's file, marked by `agentId`: each becomes a session of its own, `copilot-<session id>-agent-<agentId>`,
linked to the parent (docs/agents/copilot.md "Sub-agents").

The event rules (person's turn, harness, tokens, tool calls) are in `parse` and `tables`. A stdout stream of
`copilot -p ... --output-format json` holds the same events plus ephemeral ones and ends with a `result` record
naming the session: given explicitly, it is read the same way (docs/agents/copilot.md "Stdout streams").
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from extractors.bounded import Limits, MiB, check_source_size, iter_jsonl_fields
from extractors.discovery import sidecar_stat, walk_files
from extractors.errors import RejectCode, RejectError
from extractors.gitremote import repository
from extractors.model import Agent, Loaded, Outcome, Source
from extractors.spec import AgentSpec, Claim

from .parse import Layout, Workspace, parse_events


def _claims(path: Path) -> Claim | None:
    if path.name == EVENTS and SESSION_STATE in path.parts:
        return Claim.NAME
    return Claim.FOLDER if ".copilot" in path.parts else None


SPEC = AgentSpec(
    name=Agent("copilot"),
    display="GitHub Copilot CLI",
    rank=80,
    parser_version="1",
    env=("COPILOT_HOME",),
    nightly=True,
    export=None,
    price_provider=None,  # it serves Anthropic, OpenAI and Google models; names are looked up without a hint
    reasoning_billed_separately=False,
    unknown_records="skip",  # an event type not in tables.EVENT_TYPES is counted as SKIPPED
    aliases=("copilot-cli", "github-copilot"),
    claims=_claims,
)

SESSION_STATE = "session-state"
EVENTS = "events.jsonl"
WORKSPACE = "workspace.yaml"
# A workspace.yaml is a dozen short lines; this bounds reading one.
_MAX_WORKSPACE_BYTES = 1 * MiB


def default_roots(home: Path, env: Mapping[str, str]) -> list[Path]:
    """The Copilot home: `COPILOT_HOME`, default `~/.copilot` (discovery looks for `session-state/` in it). No I/O."""
    value = env.get("COPILOT_HOME", "").strip()
    if not value:
        return [home / ".copilot"]
    if value == "~" or value.startswith("~/"):
        return [home / value[2:]]
    return [Path(value)]


def discover(root: Path) -> Iterator[Source]:
    """Events files under `<root>/session-state` (or `root` itself when it is a `session-state` folder): the
    folders' `events.jsonl` and the flat `<id>.jsonl`. Stats files only; never opens them."""
    state = root / SESSION_STATE if (root / SESSION_STATE).is_dir() else root if root.name == SESSION_STATE else None
    if state is None:
        return

    def is_unit(name: str, _folders: tuple[str, ...], depth: int) -> bool:
        return (depth == 1 and name == EVENTS) or (depth == 0 and name.endswith(".jsonl"))

    for path, st in walk_files(state, is_unit, max_depth=1, quiet=True):
        size, mtime = st.st_size, st.st_mtime_ns
        if os.path.basename(path) == EVENTS:
            sidecar = sidecar_stat(os.path.join(os.path.dirname(path), WORKSPACE))
            if sidecar is not None:
                size, mtime = size + sidecar.st_size, max(mtime, sidecar.st_mtime_ns)
        yield Source(SPEC.name, path, size, mtime, str(root))


def read(source: Source, limits: Limits) -> Iterator[Outcome]:
    """The main session of an events file, then its sub-agents' sessions. Raises RejectError: no_conversation (no
    turn and no tool call), missing_session_id, missing_timestamp, inconsistent_source (session.start names another
    session than the folder), bad_shape, invalid_utf8 (workspace.yaml), and every code of the bounded readers;
    DeferError."""
    sessions = parse_events(iter_jsonl_fields(source.path, limits), limits, layout(source.path, limits))
    main = sessions[0]
    if len(sessions) == 1 and not main.turns and not main.tool_calls:
        raise RejectError(
            RejectCode.NO_CONVERSATION,
            "no user or assistant turn and no tool call in the events",
            session_hint=main.session_id,
        )
    for session in sessions:
        yield Loaded(source, session)


def layout(path: str, limits: Limits) -> Layout:
    """The session id the path gives and the folder's workspace.yaml (docs/agents/copilot.md "Where the files
    are"). On the path's string: a pathlib.Path, its parent and name cost ~10 us a file, which counts for the many
    small files of a Copilot home."""
    folder, name = os.path.split(path)
    if name == EVENTS:
        sidecar = os.path.join(folder, WORKSPACE)
        workspace = read_workspace(sidecar, limits) if os.path.isfile(sidecar) else None
        return Layout(os.path.basename(folder), workspace)
    if os.path.basename(folder) == SESSION_STATE and name.endswith(".jsonl") and len(name) > len(".jsonl"):
        return Layout(name[: -len(".jsonl")])  # Path.stem: a name that is only ".jsonl" has no suffix
    return Layout(None)


def read_workspace(path: str | Path, limits: Limits) -> Workspace:
    """The flat top-level keys of a workspace.yaml, read without a YAML library: `key: value` lines at column 0,
    values plain or quoted (docs/agents/copilot.md "workspace.yaml"). Raises RejectError (limit_exceeded,
    source_unreadable, invalid_utf8)."""
    cap = min(_MAX_WORKSPACE_BYTES, limits.max_document_bytes)
    st = check_source_size(path, limits)
    if st.st_size > cap:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"{WORKSPACE} is {st.st_size} bytes, over the limit {cap}")
    try:
        with open(path, "rb") as handle:
            # The size stat gave, and one byte more to see it grow: a read of `cap + 1` would allocate that much
            # for each of these few-hundred-byte files (18 ms of 50 MB of sessions). What grew is read up to the cap.
            raw = handle.read(st.st_size + 1)
            if len(raw) > st.st_size:
                raw += handle.read(cap + 1 - len(raw))
    except OSError as exc:
        raise RejectError(RejectCode.SOURCE_UNREADABLE, f"cannot read {WORKSPACE}: {exc.strerror}") from exc
    if len(raw) > cap:
        raise RejectError(RejectCode.LIMIT_EXCEEDED, f"{WORKSPACE} grew past the limit {cap}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RejectError(RejectCode.INVALID_UTF8, f"{WORKSPACE} is not UTF-8") from exc
    keys = flat_yaml(text)
    return Workspace(
        cwd=keys.get("cwd"),
        repository=_repository(keys.get("repository")),
        branch=keys.get("branch"),
        title=keys.get("name") or keys.get("summary"),
    )


def flat_yaml(text: str) -> dict[str, str]:
    """`key: scalar` pairs of the top level of a YAML mapping; nested, block (`|`, `>`) and empty values are left
    out. The first occurrence of a key wins."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in " \t#-" or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not key or key in found or not value or value[0] in "|>&*!{[":
            continue
        if value[0] in "'\"":
            unquoted = _unquote(value)
            if unquoted is None:
                continue
            value = unquoted
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if value and value not in ("~", "null"):
            found[key] = value
    return found


def _unquote(value: str) -> str | None:
    """A quoted scalar, maybe followed by a comment; None when it does not close on its line."""
    if value[0] == "'":
        out, k = [], 1
        while k < len(value):
            if value[k] == "'":
                if value[k + 1 : k + 2] == "'":
                    out.append("'")
                    k += 2
                    continue
                return "".join(out) if _only_comment(value[k + 1 :]) else None
            out.append(value[k])
            k += 1
        return None  # spread over several lines: left out
    try:  # a double-quoted YAML scalar escapes as JSON does for the characters met here
        decoded, end = _JSON.raw_decode(value)
    except ValueError:
        return None
    return decoded if isinstance(decoded, str) and _only_comment(value[end:]) else None


_JSON = json.JSONDecoder()


def _only_comment(rest: str) -> bool:
    return not rest.strip() or (rest.lstrip().startswith("#") and rest[:1] in " \t")


@functools.lru_cache(maxsize=256)
def _repository(value: str | None) -> str | None:
    """Cached: every session of a repository names it again, and urlsplit is ~3 us a call."""
    if not value:
        return None
    return repository(value) or (repository(f"https://github.com/{value}") if value.count("/") == 1 else None)
