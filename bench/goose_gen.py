"""Fake Goose data, shaped like docs/agents/goose.md: one `sessions.db` per home.

`~/.local/share/goose/sessions/sessions.db`: the newest schema (tests/agents/goose/schema.sql), one row per session,
message and usage_ledger entry. Sessions have user messages (text; Goose's hidden `<turn-context>` message with
`userVisible: false` before one prompt in four), assistant messages of one to four model calls (`thinking` now and
then, `toolRequest` blocks answered by `toolResponse` blocks on the next user row, one in 12 failing, then `text`),
and one usage_ledger row per model call (cache-inclusive input, as Goose counts it) beside the session's running
`accumulated_*` totals, which the reader must not add again. One session in 20 is a `sub_agent` with a
`parent_session_id`. Written with rollback journal off and a fixed page size in one transaction, so the file is
self-contained (no `-wal`) and the same rows in the same order give the same bytes.
"""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.material import Material, Project
from bench.output import Written, set_mtime

SCHEMA = (Path(__file__).resolve().parent.parent / "tests" / "agents" / "goose" / "schema.sql").read_text("utf-8")
PAGE_SIZE = 4096
MODELS = (("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-5.1"), ("ollama", "qwen3-coder:30b"))
TOOLS = ("developer__shell", "developer__text_editor", "todo__todo_write", "developer__analyze")


class GooseStore:
    """The database being written: one open connection for the whole corpus."""

    def __init__(self, home: Path) -> None:
        self.dir = home / ".local" / "share" / "goose" / "sessions"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.dir / "sessions.db"
        self.conn = sqlite3.connect(self.db_path, isolation_level=None)
        self.conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        self.conn.execute("PRAGMA journal_mode = OFF")
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.executescript(SCHEMA)
        self.conn.execute("BEGIN")
        self.conn.execute("INSERT INTO schema_version (version) VALUES (16)")
        self.last_ms = 0
        self.per_day: dict[str, int] = {}
        self.parents: list[str] = []

    def db_size(self) -> int:
        (pages,) = self.conn.execute("PRAGMA page_count").fetchone()
        return int(pages) * PAGE_SIZE

    def next_id(self, start_ms: int) -> str:
        """Goose's ids: `<YYYYMMDD>_<n>`, n counting the day's sessions from 1."""
        day = datetime.fromtimestamp(start_ms / 1000, tz=UTC).strftime("%Y%m%d")
        self.per_day[day] = self.per_day.get(day, 0) + 1
        return f"{day}_{self.per_day[day]}"

    def close(self) -> int:
        """Commit and close; returns the database size. Its mtime is the last session's end."""
        self.conn.execute("COMMIT")
        self.conn.close()
        set_mtime(self.db_path, self.last_ms or 1)
        return self.db_path.stat().st_size


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def goose_session(
    store: GooseStore, material: Material, rng: random.Random, project: Project, start_ms: int, target: int, index: int
) -> list[Written]:
    """One session into the database; `bytes_sources` is what the database grew by."""
    before = store.db_size()
    sid = store.next_id(start_ms)
    provider, model = rng.choice(MODELS)
    parent = store.parents[-1] if store.parents and index % 20 == 7 else None
    conn = store.conn
    ms = start_ms
    size = 0
    totals = [0, 0, 0, 0]  # input, output, cache read, cache write: the running accumulated_* columns
    rows: list[tuple[str, str, int, dict[str, Any]]] = []
    ledger: list[tuple[int, int, int, int, int]] = []
    context = 2_000
    while size < target or not rows:
        ms += rng.randint(5_000, 90_000)
        prompt = material.prose(rng, rng.randint(1, 4))
        if rng.random() < 0.25:
            hidden = f"<turn-context>Working directory: {project.cwd}</turn-context>"
            rows.append(("user", json.dumps([{"type": "text", "text": hidden}]), ms // 1000, {"userVisible": False}))
        rows.append(("user", json.dumps([{"type": "text", "text": prompt}]), ms // 1000, {"userVisible": True}))
        size += len(prompt)
        for step in range(rng.randint(1, 4)):
            ms += rng.randint(1_000, 20_000)
            blocks: list[dict[str, Any]] = []
            if rng.random() < 0.3:
                blocks.append({"type": "thinking", "thinking": material.prose(rng, 2), "signature": "sig"})
            last = step == 3 or rng.random() < 0.4
            call_id = f"call_{rng.getrandbits(40):010x}"
            if not last:
                args = {"command": rng.choice(material.shell)}
                blocks.append(
                    {
                        "type": "toolRequest",
                        "id": call_id,
                        "toolCall": {"status": "success", "value": {"name": rng.choice(TOOLS), "arguments": args}},
                    }
                )
            else:
                blocks.append({"type": "text", "text": material.prose(rng, rng.randint(1, 6))})
            content = json.dumps(blocks)
            rows.append(("assistant", content, ms // 1000, {"userVisible": True, "agentVisible": True}))
            size += len(content)
            context += rng.randint(200, 3_000)
            cached = context * 8 // 10 if provider == "anthropic" else 0
            out = rng.randint(20, 900)
            ledger.append((ms // 1000, context, out, cached, 0))
            for i, v in enumerate((context, out, cached, 0)):
                totals[i] += v
            if last:
                break
            failed = rng.random() < 1 / 12
            result: dict[str, Any] = (
                {"status": "error", "error": "Command failed with exit code 1"}
                if failed
                else {
                    "status": "success",
                    "value": {"content": [{"type": "text", "text": material.shell_output(rng, rng.randint(1, 30))}]},
                }
            )
            response = json.dumps([{"type": "toolResponse", "id": call_id, "toolResult": result}])
            rows.append(("user", response, ms // 1000 + 1, {"userVisible": True}))
            size += len(response)
    conn.execute(
        "INSERT INTO sessions (id, name, session_type, working_dir, created_at, updated_at, accumulated_input_tokens,"
        " accumulated_output_tokens, accumulated_total_tokens, accumulated_cache_read_tokens,"
        " accumulated_cache_write_tokens, provider_name, model_config_json, parent_session_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sid, material.prose(rng, 1)[:60], "sub_agent" if parent else "user", project.cwd, _stamp(start_ms),
            _stamp(ms), totals[0], totals[1], totals[0] + totals[1], totals[2], totals[3], provider,
            json.dumps({"model_name": model, "context_limit": None}), parent,
        ),
    )  # fmt: skip
    for role, content, created, meta in rows:
        conn.execute(
            "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (f"msg_{rng.getrandbits(64):016x}", sid, role, content, created, json.dumps(meta)),
        )
    for created, inp, out, read, write in ledger:
        conn.execute(
            "INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens, output_tokens, total_tokens,"
            " cache_read_tokens, cache_write_tokens, cost, cost_source, is_compaction) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
            " NULL, NULL, 0)",
            (sid, created, model, inp, out, inp + out, read, write),
        )
    if parent is None:
        store.parents.append(sid)
    store.last_ms = max(store.last_ms, ms)
    written = Written("goose", sid, store.db_path)
    written.bytes_sources = store.db_size() - before
    return [written]
