"""Fake OpenCode data, shaped like docs/agents/opencode.md: `opencode.db` and a small legacy `storage/` JSON tree.

`~/.local/share/opencode/opencode.db`: the canonical drizzle schema (tests/agents/opencode/schema.sql), one row per
project, session, message and part, `data` columns holding the message-v2 JSON minus its ids. Sessions have user
messages (a text part, sometimes a synthetic @-file part and a file part) and assistant messages of one to four model
steps (`step-start`, `reasoning`, `tool` parts with completed/error states, `text`, `step-finish` with tokens and cost);
4% of exchanges spawn a child session through the `task` tool (`parent_id`, `state.metadata.sessionId`), one in 15 is
archived. Written with rollback journal off and a fixed page size in one transaction, so the file is self-contained
(no `-wal`) and the same rows in the same order give the same bytes.

`~/.local/share/opencode/storage/`: sessions of the JSON era (before v1.2.0, February 2026): one in 6 of them is
written as JSON files only (a migration hole: the JSON is its only copy), one in 6 both as JSON and in the database
(the import leaves the JSON in place; the ETL reads the database copy and counts the JSON unit as a `duplicate`).
A third of the JSON sessions use the older layout (`session/info/`, `session/message/`, `session/part/`).
"""

from __future__ import annotations

import random
import sqlite3
import string
from pathlib import Path
from typing import Any

import orjson

from bench.material import Material, Project, rand_hex, rand_token
from bench.output import Written, set_mtime

# OpenCode's schema: the one copy, beside the agent's test fixtures.
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "tests" / "agents" / "opencode" / "schema.sql"
SCHEMA = SCHEMA_FILE.read_text(encoding="utf-8")
PAGE_SIZE = 4096
VERSIONS_JSON = ("0.15.8", "1.0.25", "1.1.3", "1.1.14")
VERSIONS_DB = ("1.2.1", "1.2.10", "1.2.21", "1.3.0")
DB_FROM_DAY = 95  # v1.2.0 (SQLite) from early February 2026; earlier sessions were written as JSON
PROVIDERS = (("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-opus-4-5"), ("openai", "gpt-5.1-codex"))
TOOLS = ("read", "bash", "edit", "grep", "glob", "list", "todowrite")
BASE62 = string.digits + string.ascii_letters
SYNTHETIC_READ = "Called the Read tool with the following input: "


class Ids:
    """OpenCode's time-sortable ids: `<prefix>_` + 12 hex of (ms * 4096 + counter) + 14 random base62 characters."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ms = 0
        self.counter = 0

    def make(self, prefix: str, ms: int) -> str:
        """Ids made later sort after earlier ones (the counter restarts each millisecond, as OpenCode's does)."""
        self.counter = self.counter + 1 if ms == self.ms else 0
        self.ms = ms
        value = (ms * 0x1000 + min(self.counter, 0xFFF)) & 0xFFFFFFFFFFFF
        return f"{prefix}_{value:012x}{rand_token(self.rng, 14, BASE62)}"


class OpenCodeStore:
    """The data directory being written: one open database for the whole corpus, plus the legacy JSON tree."""

    def __init__(self, home: Path) -> None:
        self.dir = home / ".local" / "share" / "opencode"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.dir / "opencode.db"
        self.conn = sqlite3.connect(self.db_path, isolation_level=None)
        self.conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        self.conn.execute("PRAGMA journal_mode = OFF")
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.executescript(SCHEMA)
        self.conn.execute("BEGIN")
        self.projects: set[str] = set()
        self.last_ms = 0
        self.duplicates = 0  # legacy units whose session is also in the database
        self.legacy_files = 0
        self.legacy_bytes = 0

    def db_size(self) -> int:
        (pages,) = self.conn.execute("PRAGMA page_count").fetchone()
        return int(pages) * PAGE_SIZE

    def project_id(self, rng: random.Random, project: Project, ms: int) -> str:
        pid = "global" if project.branch == "" else rand_hex(random.Random(project.cwd), 40)  # root commit SHA
        if pid not in self.projects:
            self.projects.add(pid)
            self.conn.execute(
                "INSERT INTO project (id, worktree, vcs, name, time_created, time_updated, time_initialized, sandboxes)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, '[]')",
                (pid, "/" if pid == "global" else project.cwd, None if pid == "global" else "git", None, ms, ms, ms),
            )
        return pid

    def close(self) -> int:
        """Commit and close; returns the database size. Its mtime is the last session's end."""
        self.conn.execute("COMMIT")
        self.conn.close()
        set_mtime(self.db_path, self.last_ms)
        return self.db_path.stat().st_size


class OpenCodeSession:
    def __init__(
        self,
        store: OpenCodeStore,
        material: Material,
        rng: random.Random,
        project: Project,
        start_ms: int,
        target: int,
        *,
        parent: OpenCodeSession | None = None,
        archived: bool = False,
    ) -> None:
        self.store, self.m, self.rng, self.project = store, material, rng, project
        self.ids = Ids(rng)
        self.ms = start_ms
        self.start_ms = start_ms
        self.target = target
        self.parent = parent
        self.archived = archived
        self.id = self.ids.make("ses", start_ms)
        self.provider, self.model = rng.choice(PROVIDERS)
        self.messages: list[tuple[str, int, dict[str, Any], list[tuple[str, dict[str, Any]]]]] = []
        self.size = 0
        self.totals = {"cost": 0.0, "input": 0, "output": 0, "reasoning": 0, "read": 0, "write": 0}
        self.children: list[OpenCodeSession] = []

    def tick(self, low: float, high: float) -> int:
        self.ms += int(self.rng.uniform(low, high) * 1000)
        return self.ms

    def add(self, role_data: dict[str, Any], parts: list[dict[str, Any]], created: int) -> None:
        mid = self.ids.make("msg", created)
        with_ids = [(self.ids.make("prt", created), p) for p in parts]
        self.messages.append((mid, created, role_data, with_ids))
        self.size += len(orjson.dumps(role_data)) + sum(len(orjson.dumps(p)) for p in parts) + 120 * (1 + len(parts))

    def build(self) -> None:
        """Make the messages (not yet stored)."""
        exchanges = 0
        while self.size < self.target or exchanges == 0:
            self.exchange()
            exchanges += 1

    def exchange(self) -> None:
        rng, m = self.rng, self.m
        created = self.tick(5, 300)
        user: dict[str, Any] = {
            "role": "user",
            "time": {"created": created},
            "agent": "build",
            "model": {"providerID": self.provider, "modelID": self.model},
        }
        prompt = " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 4))))
        if self.parent is not None and not self.messages:
            prompt = "Subtask: " + prompt
        parts: list[dict[str, Any]] = [{"type": "text", "text": prompt, "time": {"start": created, "end": created}}]
        if rng.random() < 0.08:
            path = self.project.path(rng)
            body = "\n".join(m.source_file(rng, self.project.lang, rng.randint(10, 150)))
            parts.append(
                {"type": "text", "synthetic": True, "text": SYNTHETIC_READ + orjson.dumps({"filePath": path}).decode()}
            )
            parts.append({"type": "text", "synthetic": True, "text": body})
            parts.append(
                {"type": "file", "mime": "text/plain", "filename": path.rsplit("/", 1)[-1], "url": f"file://{path}"}
            )
        self.add(user, parts, created)
        remaining = max(self.target - self.size, 3_000)
        scale = min(1.0, remaining / 60_000)
        steps = min(rng.choice((1, 1, 2, 3, 4)), 1 + remaining // 8_000)
        self.assistant(steps, scale)

    def assistant(self, steps: int, scale: float) -> None:
        rng, m = self.rng, self.m
        created = self.tick(1, 5)
        parts: list[dict[str, Any]] = []
        sums = {"input": 0, "output": 0, "reasoning": 0, "read": 0, "write": 0}
        cost_sum = 0.0
        for step in range(steps):
            last = step == steps - 1
            parts.append({"type": "step-start", "snapshot": rand_hex(rng, 40)})
            if rng.random() < 0.6:
                start = self.tick(0.5, 5)
                parts.append(
                    {
                        "type": "reasoning",
                        "text": m.prose(rng, rng.randint(1, 8)),
                        "time": {"start": start, "end": self.tick(1, 20)},
                        "metadata": {"anthropic": {"signature": rand_hex(rng, 64)}},
                    }
                )
            if not last:
                for _ in range(rng.choice((1, 1, 2))):
                    parts.append(self.tool(rng.choice(TOOLS), scale))
                if rng.random() < 0.3:
                    parts.append({"type": "text", "text": m.prose(rng, 3), "time": {"start": self.ms, "end": self.ms}})
            else:
                if self.parent is None and rng.random() < 0.04:
                    parts.append(self.task())
                answer = m.markdown_answer(rng, rng.choice((200, 800, 2500, 6000)), self.project.lang)
                parts.append({"type": "text", "text": answer, "time": {"start": self.tick(1, 30), "end": self.ms}})
            step_tokens = {
                "input": rng.randint(200, 30_000),
                "output": rng.randint(20, 3_000),
                "reasoning": rng.randint(0, 2_000),
                "read": rng.randint(0, 80_000),
                "write": rng.randint(0, 8_000),
            }
            cost = round((step_tokens["input"] * 3 + step_tokens["output"] * 15 + step_tokens["read"] * 0.3) / 1e6, 6)
            parts.append(
                {
                    "type": "step-finish",
                    "reason": "stop" if last else "tool-calls",
                    "snapshot": rand_hex(rng, 40),
                    "cost": cost,
                    "tokens": _tokens(step_tokens),
                }
            )
            cost_sum += cost
            for key, value in step_tokens.items():
                sums[key] += value
                self.totals[key] += value
        self.totals["cost"] += cost_sum
        data = {
            "role": "assistant",
            "time": {"created": created, "completed": self.tick(0.5, 3)},
            "parentID": self.messages[-1][0],
            "modelID": self.model,
            "providerID": self.provider,
            "mode": "build",
            "agent": "build",
            "path": {"cwd": self.project.cwd, "root": self.project.cwd},
            "cost": round(cost_sum, 6),
            "tokens": _tokens(sums),
            "finish": "stop",
        }
        self.add(data, parts, created)

    def tool(self, name: str, scale: float) -> dict[str, Any]:
        rng, m = self.rng, self.m
        start = self.tick(0.5, 10)
        state: dict[str, Any]
        if name in ("read", "edit"):
            args: dict[str, Any] = {"filePath": self.project.path(rng)}
            if name == "edit":
                args |= {
                    "oldString": rng.choice(m.code[self.project.lang]),
                    "newString": rng.choice(m.code[self.project.lang]),
                }
        elif name == "bash":
            args = {"command": rng.choice(m.shell)[:60], "description": rng.choice(m.sentences)[:60]}
        elif name == "todowrite":
            args = {
                "todos": [
                    {"content": s, "status": "pending", "id": str(i)}
                    for i, s in enumerate(rng.choices(m.sentences, k=3))
                ]
            }
        else:
            args = {"pattern": rng.choice(m.idents), "path": self.project.cwd}
        end = self.tick(0.2, 20)
        if rng.random() < 0.04:
            state = {
                "status": "error",
                "input": args,
                "error": f"Error: {rng.choice(m.sentences)}",
                "time": {"start": start, "end": end},
            }
        else:
            if name == "read":
                lines = m.source_file(rng, self.project.lang, max(5, int(rng.randint(20, 300) * scale)))
                output = "<file>\n" + "\n".join(f"{i:05d}| {line}" for i, line in enumerate(lines, 1)) + "\n</file>"
            elif name == "bash":
                output = m.shell_output(rng, max(1, int(rng.randint(1, 80) * scale)))
            elif name == "edit":
                output = ""
            else:
                output = "\n".join(self.project.path(rng) for _ in range(rng.randint(1, 30)))
            state = {
                "status": "completed",
                "input": args,
                "output": output,
                "title": str(args.get("filePath") or args.get("command") or args.get("pattern") or name),
                "metadata": {"truncated": False}
                if name != "edit"
                else {"diff": m.diff(rng, str(args["filePath"]), self.project.lang, 6)},
                "time": {"start": start, "end": end},
            }
        return {"type": "tool", "callID": f"toolu_{rand_token(rng, 24)}", "tool": name, "state": state}

    def task(self) -> dict[str, Any]:
        """A `task` tool part that ran a subagent: a child session (parent_id = this one)."""
        rng = self.rng
        start = self.tick(0.5, 3)
        child = OpenCodeSession(
            self.store, self.m, rng, self.project, start + 500, max(self.target // 4, 8_000), parent=self
        )
        child.build()
        self.children.append(child)
        self.ms = max(self.ms, child.ms) + 1000
        description = rng.choice(self.m.sentences)[:60]
        return {
            "type": "tool",
            "callID": f"toolu_{rand_token(rng, 24)}",
            "tool": "task",
            "state": {
                "status": "completed",
                "input": {
                    "description": description,
                    "prompt": rng.choice(self.m.sentences),
                    "subagent_type": "general",
                },
                "output": self.m.prose(rng, 4),
                "title": description,
                "metadata": {"sessionId": child.id, "summary": []},
                "time": {"start": start, "end": self.ms},
            },
        }

    # --- writing ---------------------------------------------------------------------------------------------------
    def session_info(self, version: str) -> dict[str, Any]:
        rng = self.rng
        info: dict[str, Any] = {
            "slug": "-".join(rng.sample(self.m.idents, 2)).replace("_", "-").lower(),
            "directory": self.project.cwd,
            "title": rng.choice(self.m.sentences)[:60].rstrip(".?!: "),
            "version": version,
        }
        return info

    def store_db(self, version: str) -> None:
        conn, rng = self.store.conn, self.rng
        info = self.session_info(version)
        pid = self.store.project_id(rng, self.project, self.start_ms)
        conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, summary_additions,"
            " summary_deletions, summary_files, cost, tokens_input, tokens_output, tokens_reasoning, tokens_cache_read,"
            " tokens_cache_write, time_created, time_updated, time_archived) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.id,
                pid,
                self.parent.id if self.parent else None,
                info["slug"],
                info["directory"],
                info["title"],
                version,
                rng.randint(0, 400),
                rng.randint(0, 200),
                rng.randint(0, 12),
                round(self.totals["cost"], 6),
                self.totals["input"],
                self.totals["output"],
                self.totals["reasoning"],
                self.totals["read"],
                self.totals["write"],
                self.start_ms,
                self.ms,
                self.ms + 86_400_000 if self.archived else None,
            ),
        )
        for mid, created, data, parts in self.messages:
            updated = int(data["time"].get("completed", created))
            conn.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
                (mid, self.id, created, updated, orjson.dumps(data).decode()),
            )
            conn.executemany(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(prt, mid, self.id, created, updated, orjson.dumps(p).decode()) for prt, p in parts],
            )
        self.store.last_ms = max(self.store.last_ms, self.ms)
        for child in self.children:
            child.store_db(version)

    def store_json(self, version: str, *, older: bool) -> tuple[int, int]:
        """The legacy JSON files of this session (and its children); returns (bytes, files)."""
        storage = self.store.dir / "storage"
        info = self.session_info(version)
        pid = "global" if self.project.branch == "" else rand_hex(random.Random(self.project.cwd), 40)
        times: dict[str, Any] = {"created": self.start_ms, "updated": self.ms}
        if self.archived:
            times["archived"] = self.ms + 86_400_000
        doc = {"id": self.id, "projectID": pid, **info, "time": times}
        if self.parent is not None:
            doc["parentID"] = self.parent.id
        folder = "info" if older else pid
        total, files = _json(storage / "session" / folder / f"{self.id}.json", doc, self.ms), 1
        for mid, _, data, parts in self.messages:
            mfolder = storage / "session" / "message" / self.id if older else storage / "message" / self.id
            total += _json(mfolder / f"{mid}.json", {"id": mid, "sessionID": self.id, **data}, self.ms)
            files += 1
            for prt, part in parts:
                pfolder = storage / "session" / "part" / self.id / mid if older else storage / "part" / mid
                total += _json(
                    pfolder / f"{prt}.json", {"id": prt, "messageID": mid, "sessionID": self.id, **part}, self.ms
                )
                files += 1
        for child in self.children:
            b, f = child.store_json(version, older=older)
            total, files = total + b, files + f
        return total, files


def _tokens(counts: dict[str, int]) -> dict[str, Any]:
    """message-v2's token shape: `{input, output, reasoning, cache: {read, write}}`."""
    return {
        "input": counts["input"],
        "output": counts["output"],
        "reasoning": counts["reasoning"],
        "cache": {"read": counts["read"], "write": counts["write"]},
    }


def _json(path: Path, value: Any, mtime_ms: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    path.write_bytes(raw)
    set_mtime(path, mtime_ms)
    return len(raw)


def opencode_session(
    store: OpenCodeStore,
    material: Material,
    rng: random.Random,
    project: Project,
    start_ms: int,
    target: int,
    index: int,
    era_start_ms: int,
) -> list[Written]:
    """One session (with its task children) into the database, the legacy JSON tree, or both (see the module doc).

    `bytes_sources` is what the database grew by plus the JSON files written.
    """
    session = OpenCodeSession(store, material, rng, project, start_ms, target, archived=index % 15 == 9)
    session.build()
    json_era = (start_ms - era_start_ms) / 86_400_000 < DB_FROM_DAY
    as_json = json_era and index % 6 in (1, 4)
    in_db = not (json_era and index % 6 == 1)
    before = store.db_size()
    written = Written("opencode", session.id, store.db_path)
    if as_json:
        size, files = session.store_json(rng.choice(VERSIONS_JSON), older=index % 3 == 0)
        written.bytes_sources += size
        store.legacy_files += files
        store.legacy_bytes += size
    if in_db:
        session.store_db(rng.choice(VERSIONS_JSON) if json_era else rng.choice(VERSIONS_DB))
        if as_json:
            store.duplicates += 1 + _descendants(session)
    written.bytes_sources += store.db_size() - before
    return [written]


def _descendants(session: OpenCodeSession) -> int:
    return sum(1 + _descendants(c) for c in session.children)
