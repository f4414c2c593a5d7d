"""Fake Gemini CLI chat recordings, shaped like docs/agents/gemini.md.

`~/.gemini/tmp/<sha256 of the project path>/chats/`:
- older sessions (before mid-January 2026): `session-<YYYY-MM-DDTHH-MM>-<first 8 of the id>.json`, one
  ConversationRecord `{sessionId, projectHash, startTime, lastUpdated, messages[], summary?, kind}` written with
  2-space indents, as GEM's `JSON.stringify(conversation, null, 2)`;
- newer ones: the same name ending `.jsonl`, a record stream: a metadata line, message records, a message id written
  again as its tool calls complete (status `executing`, then `success`/`error` with `result`), `{"$set": {...}}`
  patches (`lastUpdated` after each exchange, `summary` at the end) and, in a few sessions of three exchanges or more,
  a `{"$rewindTo": id}` that drops the last exchanges before the session goes on.
Messages: `user` (Part[] content, sometimes a `displayContent` when @-files were expanded), `gemini` (text, `thoughts`,
`toolCalls` with `functionResponse` results, `tokens`, `model`) and `info` notices.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from bench.material import EPOCH, Clock, Material, Project, rand_hex, rand_uuid4
from bench.output import JsonlOut, Written, set_mtime

MODELS = ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview")
# name -> displayName
TOOLS = {
    "read_file": "ReadFile",
    "run_shell_command": "Shell",
    "search_file_content": "SearchText",
    "replace": "Edit",
    "list_directory": "ReadFolder",
    "glob": "FindFiles",
}
INFO = ("Request cancelled.", "Switched to fallback model.", "Memory refreshed from GEMINI.md.", "Checkpoint saved.")
JSONL_FROM_DAY = 75  # sessions started 75 days or more after Nov 1 2025 are JSONL recordings (GEM ~v0.40+)


def project_hash(cwd: str) -> str:
    return hashlib.sha256(cwd.encode("utf-8")).hexdigest()


class GeminiSession:
    def __init__(
        self, material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
    ) -> None:
        self.m = material
        self.rng = rng
        self.project = project
        self.clock = Clock(rng, start_ms)
        self.start = self.clock.now()
        self.target = target
        self.id = rand_uuid4(rng)
        self.model = rng.choice(MODELS)
        self.hash = project_hash(project.cwd)
        when = datetime.fromtimestamp(EPOCH.timestamp() + start_ms / 1000, tz=UTC)
        self.jsonl = (start_ms - datetime(2025, 11, 1, tzinfo=UTC).timestamp() * 1000) / 86_400_000 >= JSONL_FROM_DAY
        name = f"session-{when:%Y-%m-%dT%H-%M}-{self.id[:8]}.{'jsonl' if self.jsonl else 'json'}"
        self.path = home / ".gemini" / "tmp" / self.hash / "chats" / name
        self.messages: list[dict[str, Any]] = []  # the legacy record's history
        self.out = JsonlOut(self.path) if self.jsonl else None
        self.size = 0  # bytes written (JSONL) or estimated (JSON, indented)

    def emit(self, record: dict[str, Any]) -> None:
        """A JSONL line, or (legacy) a message of the final document; the size is counted either way."""
        if self.out is not None:
            self.out.add(record)
            self.size = self.out.size
        else:
            self.size += int(len(orjson.dumps(record)) * 1.25)  # indentation adds about a quarter

    def message(self, record: dict[str, Any]) -> None:
        self.emit(record)
        if self.out is None:
            self.messages.append(record)

    def write(self) -> Written:
        rng = self.rng
        meta = {"sessionId": self.id, "projectHash": self.hash, "startTime": self.start, "lastUpdated": self.start}
        if self.out is not None:
            self.emit({**meta, "kind": "main"})
        exchanges = 0
        user_ids: list[str] = []
        rewind = self.out is not None and rng.random() < 1 / 12
        while self.size < self.target or exchanges == 0:
            user_ids.append(self.exchange())
            exchanges += 1
            if rewind and exchanges >= 3 and rng.random() < 0.3:
                self.emit({"$rewindTo": user_ids[-2]})  # the person went back two prompts and tried again
                rewind = False
        summary = rng.choice(self.m.sentences)[:80].rstrip(".?!: ")
        if self.out is not None:
            self.emit({"$set": {"summary": summary, "lastUpdated": self.clock.now()}})
            size = self.out.close(self.clock.ms)
        else:
            doc = {**meta, "lastUpdated": self.clock.now(), "messages": self.messages, "summary": summary}
            if rng.random() < 0.5:
                doc["kind"] = "main"
            raw = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(raw)
            set_mtime(self.path, self.clock.ms)
            size = len(raw)
        written = Written("gemini", self.id, self.path, bytes_sources=size)
        written.files.append(self.path)
        return written

    def exchange(self) -> str:
        """One prompt and the model's work on it; returns the user message id."""
        rng, m = self.rng, self.m
        self.clock.tick(5, 300)
        prompt = " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 4))))
        user: dict[str, Any] = {"id": rand_uuid4(rng), "timestamp": self.clock.now(), "type": "user"}
        if rng.random() < 0.1:
            path = self.project.path(rng)
            body = "\n".join(m.source_file(rng, self.project.lang, rng.randint(10, 120)))
            user["content"] = [
                {"text": f"@{path} {prompt}"},
                {"text": "\n--- Content from referenced files ---"},
                {"text": f"\nContent from @{path}:\n{body}"},
                {"text": "\n--- End of content ---"},
            ]
            user["displayContent"] = [{"text": f"@{path} {prompt}"}]
        else:
            user["content"] = [{"text": prompt}]
        self.message(user)
        if rng.random() < 0.03:
            self.message(
                {"id": rand_uuid4(rng), "timestamp": self.clock.tick(), "type": "info", "content": rng.choice(INFO)}
            )
        remaining = max(self.target - self.size, 3_000)
        scale = min(1.0, remaining / 60_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5, 8)), 1 + remaining // 8_000)):
            self.model_step(rng.choice(("", "", m.prose(rng, 3))), rng.choice((1, 1, 1, 2)), scale)
        self.model_step(m.markdown_answer(rng, rng.choice((200, 800, 2500, 6000)), self.project.lang), 0, scale)
        if self.out is not None:
            self.emit({"$set": {"lastUpdated": self.clock.now()}})
        return str(user["id"])

    def model_step(self, text: str, n_calls: int, scale: float) -> None:
        rng, m = self.rng, self.m
        self.clock.tick(1, 40)
        message: dict[str, Any] = {
            "id": rand_uuid4(rng),
            "timestamp": self.clock.now(),
            "type": "gemini",
            "content": text,
            "thoughts": [
                {
                    "subject": rng.choice(m.sentences)[:50].rstrip(".?!: "),
                    "description": m.prose(rng, rng.randint(1, 6)),
                    "timestamp": self.clock.now(),
                }
                for _ in range(rng.choice((0, 1, 1, 2)))
            ],
        }
        cached = rng.randint(0, 60_000)
        tokens = {
            "input": cached + rng.randint(2_000, 40_000),
            "output": rng.randint(20, 3_000),
            "cached": cached,
            "thoughts": rng.randint(0, 2_000),
            "tool": 0,
        }
        tokens["total"] = tokens["input"] + tokens["output"] + tokens["thoughts"] + tokens["tool"]
        message["tokens"] = tokens
        message["model"] = self.model
        if not n_calls:
            self.message(message)
            return
        calls = [self.call(rng.choice(list(TOOLS))) for _ in range(n_calls)]
        if self.out is not None:
            # First written while the calls run, then again (same id) with their results: the loader keeps the last.
            pending = [{k: v for k, v in c.items() if k not in ("result", "resultDisplay")} for c in calls]
            self.emit({**message, "toolCalls": [{**c, "status": "executing"} for c in pending]})
        for call in calls:
            self.finish(call, scale)
        self.message({**message, "toolCalls": calls})

    def call(self, name: str) -> dict[str, Any]:
        rng, m = self.rng, self.m
        args: dict[str, Any]
        if name in ("read_file", "replace"):
            args = {"absolute_path" if name == "read_file" else "file_path": self.project.path(rng)}
            if name == "replace":
                args["old_string"] = rng.choice(m.code[self.project.lang]).strip()
                args["new_string"] = rng.choice(m.code[self.project.lang]).strip()
        elif name == "run_shell_command":
            args = {"command": rng.choice(m.shell)[:60], "description": rng.choice(m.sentences)[:60]}
        elif name == "search_file_content":
            args = {"pattern": rng.choice(m.idents)}
        elif name == "glob":
            args = {"pattern": f"**/*.{self.project.files[0].rsplit('.', 1)[-1]}"}
        else:
            args = {"path": self.project.cwd}
        return {
            "id": f"{name}-{self.clock.ms}-{rand_hex(rng, 12)}",
            "name": name,
            "args": args,
            "timestamp": self.clock.now(),
            "displayName": TOOLS[name],
            "description": rng.choice(m.sentences)[:80],
            "renderOutputAsMarkdown": name != "run_shell_command",
        }

    def finish(self, call: dict[str, Any], scale: float) -> None:
        rng, m = self.rng, self.m
        self.clock.tick(0.2, 20)
        name = call["name"]
        failed = rng.random() < 0.05
        if failed:
            output = f"Error: {rng.choice(m.sentences)}"
            response: dict[str, Any] = {"error": output}
        elif name == "read_file":
            output = "\n".join(m.source_file(rng, self.project.lang, max(5, int(rng.randint(20, 300) * scale))))
            response = {"output": output}
        elif name == "run_shell_command":
            output = m.shell_output(rng, max(1, int(rng.randint(1, 80) * scale)))
            response = {"output": f"Command: {call['args']['command']}\nOutput: {output}\nExit Code: 0"}
        elif name == "replace":
            output = f"Successfully modified file: {call['args']['file_path']} (1 replacements)."
            response = {"output": output}
        else:
            output = "\n".join(self.project.path(rng) for _ in range(rng.randint(1, 30)))
            response = {"output": output}
        call["result"] = [{"functionResponse": {"id": call["id"], "name": name, "response": response}}]
        call["status"] = "error" if failed else "success"
        call["resultDisplay"] = output[:4000]


def gemini_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One chat recording (legacy JSON or JSONL by its date)."""
    return [GeminiSession(material, rng, home, project, start_ms, target).write()]
