"""Fake Factory Droid sessions, shaped like docs/agents/droid.md.

`~/.factory/sessions/<cwd with / as ->/<uuid>.jsonl`: a `session_start` header, then `message` lines whose content
is Anthropic-shaped blocks (user text with a `<system-reminder>` context block on the first prompt, assistant
`thinking` + `text` + `tool_use`, user `tool_result`), now and then a `todo_state` line; beside it
`<uuid>.settings.json` with the model and the session's `tokenUsage` totals (read with the session).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from bench.material import Material, Project, iso_ms, rand_base64, rand_hex, rand_uuid4
from bench.output import JsonlOut, Written, set_mtime

MODELS = ("claude-sonnet-4-5-20250929", "gpt-5-codex", "gemini-2.5-pro")
TOOLS = ("Read", "Execute", "Edit", "Grep", "Create")


class DroidSession:
    def __init__(
        self, material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
    ):
        self.m, self.rng, self.project, self.target = material, rng, project, target
        self.ms = start_ms
        self.id = rand_uuid4(rng)
        self.model = rng.choice(MODELS)
        folder = home / ".factory" / "sessions" / project.cwd.replace("/", "-")
        self.out = JsonlOut(folder / f"{self.id}.jsonl")
        self.settings = folder / f"{self.id}.settings.json"
        self.parent: str | None = None
        self.prompts = 0
        self.tokens = {"inputTokens": 0, "outputTokens": 0, "cacheCreationTokens": 0, "cacheReadTokens": 0,
                       "thinkingTokens": 0}  # fmt: skip

    def tick(self, low: float, high: float) -> None:
        self.ms += int(self.rng.uniform(low, high) * 1000)

    def message(self, role: str, content: list[dict[str, Any]] | str) -> None:
        native = rand_uuid4(self.rng)
        self.out.add(
            {"type": "message", "id": native, "parentId": self.parent, "timestamp": iso_ms(self.ms),
             "message": {"role": role, "content": content}}
        )  # fmt: skip
        self.parent = native

    def write(self) -> Written:
        rng, m = self.rng, self.m
        first = " ".join(rng.choices(m.sentences, k=2))
        self.out.add(
            {"type": "session_start", "id": self.id, "title": first[:80], "sessionTitle": first[:40], "owner": "u",
             "version": 2, "cwd": self.project.cwd}
        )  # fmt: skip
        while self.out.size < self.target or self.prompts == 0:
            self.turn()
        written = Written("droid", self.id, self.out.path)
        settings = json.dumps(
            {"assistantActiveTimeMs": rng.randint(1_000, 900_000), "model": self.model, "reasoningEffort": "medium",
             "autonomyMode": "auto-low", "tokenUsage": self.tokens}
        ).encode()  # fmt: skip
        self.settings.write_bytes(settings)
        set_mtime(self.settings, self.ms)
        written.bytes_sources = self.out.close(self.ms) + len(settings)
        written.files += [self.out.path, self.settings]
        return written

    def turn(self) -> None:
        rng, m = self.rng, self.m
        self.tick(5, 300)
        content: list[dict[str, Any]] = []
        if self.prompts == 0:
            reminder = "<system-reminder>" + m.prose(rng, 3) + "</system-reminder>"
            content.append({"type": "text", "text": reminder})
        content.append({"type": "text", "text": " ".join(rng.choices(m.sentences, k=2))})
        if rng.random() < 0.02:
            data = rand_base64(rng, rng.randint(20_000, 90_000))
            content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
        self.message("user", content)
        self.prompts += 1
        remaining = max(self.target - self.out.size, 3_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5)), 1 + remaining // 8_000)):
            calls = [self.call(rng.choice(TOOLS)) for _ in range(rng.choice((1, 1, 2)))]
            self.assistant([{"type": "text", "text": m.prose(rng, 2)}] if rng.random() < 0.4 else [], calls)
            self.tick(0.1, 4)
            results = [
                {"type": "tool_result", "tool_use_id": call["id"],
                 "content": m.shell_output(rng, rng.randint(1, 60)), "is_error": rng.random() < 0.05}
                for call in calls
            ]  # fmt: skip
            self.message("user", results)
        self.assistant([{"type": "text", "text": m.markdown_answer(rng, rng.randint(200, 1500), self.project.lang)}])
        if rng.random() < 0.1:
            todos = [{"id": str(n), "content": rng.choice(m.sentences)[:60], "status": "pending"} for n in range(3)]
            self.out.add({"type": "todo_state", "id": rand_uuid4(rng), "timestamp": iso_ms(self.ms), "todos": todos})

    def call(self, name: str) -> dict[str, Any]:
        rng = self.rng
        arguments = (
            {"file_path": self.project.path(rng)} if name != "Execute" else {"command": rng.choice(self.m.shell)[:60]}
        )
        return {"type": "tool_use", "id": f"toolu_{rand_hex(rng, 24)}", "name": name, "input": arguments}

    def assistant(self, text: list[dict[str, Any]], calls: list[dict[str, Any]] | None = None) -> None:
        rng = self.rng
        self.tick(1, 40)
        thinking = [{"type": "thinking", "thinking": self.m.prose(rng, 2), "signature": rand_base64(rng, 48)}]
        self.message("assistant", thinking + text + (calls or []))
        self.tokens["inputTokens"] += rng.randint(5, 3000)
        self.tokens["outputTokens"] += rng.randint(20, 2000)
        self.tokens["cacheReadTokens"] += rng.randint(0, 150_000)
        self.tokens["cacheCreationTokens"] += rng.randint(0, 4_000)
        self.tokens["thinkingTokens"] += rng.randint(0, 500)


def droid_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One session file and its settings file."""
    return [DroidSession(material, rng, home, project, start_ms, target).write()]
