"""Fake Kiro CLI data, shaped like docs/agents/kiro.md: `~/.local/share/kiro-cli/data.sqlite3`.

The schema is the one beside the agent's test fixtures (tests/agents/kiro/schema.sql). One `conversations_v2` row
per conversation, keyed by its project folder, whose `value` is a ConversationState: history entries of a user
message (`Prompt` with the CLI's `additional_context` beside it, or the `ToolUseResults` of the previous answer) and
an assistant message (`Response`, or `ToolUse` with `execute_bash` / `fs_read` / `fs_write` calls), each with its
`request_metadata`; the human-readable `transcript` beside them. One conversation in ten was resumed in a
subfolder, so it has a second, older row under the parent folder (the reader keeps the newest and counts the other).
Each session is committed on its own (rollback journal off: no `-wal`), so the file grows as Kiro's does.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from bench.material import Material, Project, iso_ms, rand_uuid4
from bench.output import Written, set_mtime

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "tests" / "agents" / "kiro" / "schema.sql"
SCHEMA = SCHEMA_FILE.read_text(encoding="utf-8")
MODELS = ("claude-sonnet-4", "claude-sonnet-4.5", "claude-haiku-4.5")
TOOLS = ("execute_bash", "fs_read", "fs_write")
CONTEXT = "--- CONTEXT ENTRY BEGIN ---\n{}\n--- CONTEXT ENTRY END ---\n\n"


def _connect(home: Path) -> tuple[sqlite3.Connection, Path, bool]:
    folder = home / ".local" / "share" / "kiro-cli"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.sqlite3"
    new = not path.exists()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    if new:
        conn.executescript(SCHEMA)
    return conn, path, new


class KiroConversation:
    def __init__(self, material: Material, rng: random.Random, project: Project, start_ms: int, target: int):
        self.m, self.rng, self.project, self.target = material, rng, project, target
        self.ms = start_ms
        self.id = rand_uuid4(rng)
        self.model = rng.choice(MODELS)
        self.history: list[dict[str, Any]] = []
        self.transcript: list[str] = []
        self.size = 0

    def tick(self, low: float, high: float) -> int:
        self.ms += int(self.rng.uniform(low, high) * 1000)
        return self.ms

    def user(self, content: dict[str, Any], context: str = "") -> dict[str, Any]:
        env = {"operating_system": "linux", "current_working_directory": self.project.cwd, "environment_variables": []}
        return {"additional_context": context, "env_context": {"env_state": env}, "content": content,
                "timestamp": iso_ms(self.ms).replace("Z", "+00:00"), "images": None}  # fmt: skip

    def meta(self, started: int, uses: list[dict[str, Any]]) -> dict[str, Any]:
        return {"request_id": rand_uuid4(self.rng), "message_id": rand_uuid4(self.rng),
                "request_start_timestamp_ms": started, "stream_end_timestamp_ms": self.ms,
                "time_to_first_chunk": None, "time_between_chunks": [], "user_prompt_length": 0, "response_size": 0,
                "chat_conversation_type": "ToolUse" if uses else "NotToolUse",
                "tool_use_ids_and_names": [[u["id"], u["name"]] for u in uses], "model_id": self.model,
                "message_meta_tags": []}  # fmt: skip

    def entry(self, user: dict[str, Any], text: str, uses: list[dict[str, Any]]) -> None:
        started = self.ms
        self.tick(2, 40)
        message_id = rand_uuid4(self.rng)
        if uses:
            assistant = {"ToolUse": {"message_id": message_id, "content": text, "tool_uses": uses}}
        else:
            assistant = {"Response": {"message_id": message_id, "content": text}}
        item = {"user": user, "assistant": assistant, "request_metadata": self.meta(started, uses)}
        self.history.append(item)
        names = ", ".join(u["name"] for u in uses) or "none"
        self.transcript.append(f"{text}\n[Tool uses: {names}]")
        self.size += len(orjson.dumps(item)) + len(text) + 40

    def use(self, name: str) -> dict[str, Any]:
        rng, m = self.rng, self.m
        if name == "execute_bash":
            args: dict[str, Any] = {"command": rng.choice(m.shell)[:80], "summary": m.prose(rng, 1)}
        elif name == "fs_read":
            args = {"operations": [{"mode": "Line", "path": f"{self.project.cwd}/src/main.py"}]}
        else:
            args = {"command": "create", "path": f"{self.project.cwd}/src/new.py",
                    "file_text": "\n".join(m.source_file(rng, self.project.lang, rng.randint(5, 60)))}  # fmt: skip
        return {"id": f"tooluse_{rand_uuid4(rng).replace('-', '')[:22]}", "name": name, "orig_name": name,
                "args": args, "orig_args": args}  # fmt: skip

    def build(self) -> None:
        rng, m = self.rng, self.m
        while self.size < self.target or not self.history:
            self.tick(5, 300)
            prompt = " ".join(rng.choices(m.sentences, k=2))
            self.transcript.append(f"> {prompt}")
            context = CONTEXT.format(m.prose(rng, 3)) if rng.random() < 0.3 else ""
            user = self.user({"Prompt": {"prompt": prompt}}, context)
            for _ in range(rng.choice((0, 1, 2, 3))):
                uses = [self.use(rng.choice(TOOLS)) for _ in range(rng.choice((1, 1, 2)))]
                self.entry(user, m.prose(rng, 1) if rng.random() < 0.5 else "", uses)
                self.tick(0.2, 5)
                results = [
                    {"tool_use_id": u["id"], "content": [{"Text": m.shell_output(rng, rng.randint(1, 40))}],
                     "status": "Error" if rng.random() < 0.05 else "Success"}
                    for u in uses
                ]  # fmt: skip
                user = self.user({"ToolUseResults": {"tool_use_results": results}})
            self.entry(user, m.markdown_answer(rng, rng.randint(200, 1500), self.project.lang), [])

    def state(self, history: list[dict[str, Any]], transcript: list[str]) -> bytes:
        return orjson.dumps(
            {
                "conversation_id": self.id,
                "next_message": None,
                "history": history,
                "valid_history_range": [0, len(history)],
                "transcript": transcript,
                "tools": {},
                "context_manager": None,
                "context_message_length": None,
                "latest_summary": None,
                "model_info": {"model_id": self.model, "model_name": self.model},
                "file_line_tracker": {},
                "checkpoint_manager": None,
                "mcp_enabled": True,
            }
        )


def kiro_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One conversation committed into the data directory's database; `bytes_sources` is what the file grew by."""
    conversation = KiroConversation(material, rng, project, start_ms, target)
    conversation.build()
    conn, path, new = _connect(home)
    before = path.stat().st_size
    try:
        conn.execute("BEGIN")
        if rng.random() < 0.1 and len(conversation.history) > 1:  # resumed in a subfolder: an older copy stays
            older = conversation.state(conversation.history[:1], conversation.transcript[:2])
            conn.execute(
                "INSERT INTO conversations_v2 VALUES (?, ?, ?, ?, ?)",
                (project.cwd, conversation.id, older, start_ms, start_ms + 1000),
            )
            key = f"{project.cwd}/sub"
        else:
            key = project.cwd
        conn.execute(
            "INSERT INTO conversations_v2 VALUES (?, ?, ?, ?, ?)",
            (key, conversation.id, conversation.state(conversation.history, conversation.transcript), start_ms,
             conversation.ms),
        )  # fmt: skip
        conn.execute("COMMIT")
    finally:
        conn.close()
    set_mtime(path, conversation.ms)
    written = Written("kiro", conversation.id, path)
    written.bytes_sources = path.stat().st_size - before
    if new:
        written.files.append(path)  # the one file, counted once for the corpus
    return [written]
