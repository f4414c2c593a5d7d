"""Fake Pi coding agent sessions, shaped like docs/agents/pi.md.

`~/.pi/agent/sessions/--<cwd with / as ->--/<ISO time>_<uuid>.jsonl`, version 3: a `session` header, then entries
with 8-hex `id`/`parentId` forming a tree: `model_change` / `thinking_level_change`, `message` entries (user text,
assistant `thinking` + `text` + `toolCall` parts with per-call `usage` and `cost`, `toolResult`), now and then the
person's `!cmd` (`bashExecution`), an extension's `custom_message`, a `compaction`, and in one session of eight an
abandoned branch (the person went back with `/tree`) that the active branch leaves behind.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bench.material import Material, Project, iso_ms, rand_base64, rand_hex, rand_uuid4
from bench.output import JsonlOut, Written

MODELS = (("anthropic", "claude-sonnet-4-5", "anthropic-messages"), ("openai", "gpt-5.1-codex", "openai-responses"))
TOOLS = ("read", "bash", "edit", "write")


class PiSession:
    def __init__(
        self, material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
    ):
        self.m, self.rng, self.project, self.target = material, rng, project, target
        self.ms = start_ms
        self.id = rand_uuid4(rng)
        self.provider, self.model, self.api = rng.choice(MODELS)
        folder = "--" + project.cwd.lstrip("/").replace("/", "-") + "--"
        stamp = iso_ms(start_ms).replace(":", "-").replace(".", "-")
        self.out = JsonlOut(home / ".pi" / "agent" / "sessions" / folder / f"{stamp}_{self.id}.jsonl")
        self.leaf: str | None = None
        self.ids: set[str] = set()
        self.prompts = 0

    def tick(self, low: float, high: float) -> int:
        self.ms += int(self.rng.uniform(low, high) * 1000)
        return self.ms

    def entry(self, kind: str, **fields: Any) -> str:
        native = rand_hex(self.rng, 8)
        while native in self.ids:
            native = rand_hex(self.rng, 8)
        self.ids.add(native)
        self.out.add({"type": kind, "id": native, "parentId": self.leaf, "timestamp": iso_ms(self.ms), **fields})
        self.leaf = native
        return native

    def message(self, message: dict[str, Any]) -> str:
        return self.entry("message", message={**message, "timestamp": self.ms - self.rng.randint(0, 900)})

    def write(self) -> Written:
        rng = self.rng
        self.out.add(
            {"type": "session", "version": 3, "id": self.id, "timestamp": iso_ms(self.ms), "cwd": self.project.cwd}
        )
        self.entry("model_change", provider=self.provider, modelId=self.model)
        self.entry("thinking_level_change", thinkingLevel=rng.choice(("off", "medium", "high")))
        branch_at = 2 if rng.random() < 0.125 else -1
        while self.out.size < self.target or self.prompts == 0:
            if self.prompts == branch_at and self.leaf is not None:
                self.branch()
            self.turn()
        written = Written("pi", self.id, self.out.path)
        written.bytes_sources = self.out.close(self.ms)
        written.files.append(self.out.path)
        return written

    def branch(self) -> None:
        """Two abandoned exchanges, then back to where they started, with a summary of them (`/tree`)."""
        start = self.leaf
        self.turn()
        self.tick(10, 60)
        summary = " ".join(self.rng.choices(self.m.sentences, k=3))
        self.leaf = start
        self.entry("branch_summary", fromId=start, summary=summary)

    def turn(self) -> None:
        rng, m = self.rng, self.m
        self.tick(5, 300)
        if rng.random() < 0.05:
            command = rng.choice(m.shell)[:60]
            self.message(
                {"role": "bashExecution", "command": command, "output": m.shell_output(rng, rng.randint(1, 20)),
                 "exitCode": rng.choice((0, 0, 0, 1)), "cancelled": False, "truncated": False}
            )  # fmt: skip
        content: list[dict[str, Any]] = [{"type": "text", "text": " ".join(rng.choices(m.sentences, k=2))}]
        if rng.random() < 0.02:
            content.append(
                {"type": "image", "data": rand_base64(rng, rng.randint(20_000, 90_000)), "mimeType": "image/png"}
            )
        self.message({"role": "user", "content": content})
        self.prompts += 1
        if rng.random() < 0.1:
            self.entry("custom_message", customType="reminder", content=rng.choice(m.sentences), display=False)
        remaining = max(self.target - self.out.size, 3_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5)), 1 + remaining // 8_000)):
            calls = [self.call(rng.choice(TOOLS)) for _ in range(rng.choice((1, 1, 2)))]
            self.assistant([{"type": "text", "text": m.prose(rng, 2)}] if rng.random() < 0.4 else [], calls, "toolUse")
            for call in calls:
                self.tick(0.1, 4)
                out = m.shell_output(rng, rng.randint(1, 60))
                self.message(
                    {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                     "content": [{"type": "text", "text": out}], "isError": rng.random() < 0.05}
                )  # fmt: skip
        self.assistant(
            [{"type": "text", "text": m.markdown_answer(rng, rng.randint(200, 1500), self.project.lang)}], [], "stop"
        )
        if rng.random() < 0.03:
            self.entry(
                "compaction",
                summary="## Goal\n" + m.prose(rng, 6),
                firstKeptEntryId=self.leaf,
                tokensBefore=rng.randint(80_000, 180_000),
            )

    def call(self, name: str) -> dict[str, Any]:
        rng = self.rng
        arguments = {"path": self.project.path(rng)} if name != "bash" else {"command": rng.choice(self.m.shell)[:60]}
        return {"type": "toolCall", "id": f"toolu_{rand_hex(rng, 24)}", "name": name, "arguments": arguments}

    def assistant(self, text: list[dict[str, Any]], calls: list[dict[str, Any]], stop: str) -> None:
        rng = self.rng
        self.tick(1, 40)
        thinking = [{"type": "thinking", "thinking": self.m.prose(rng, 2), "thinkingSignature": rand_base64(rng, 48)}]
        tokens_in, tokens_out, read = rng.randint(5, 3000), rng.randint(20, 2000), rng.randint(0, 150_000)
        cost = round(tokens_in * 3e-6 + tokens_out * 15e-6 + read * 0.3e-6, 8)
        usage = {"input": tokens_in, "output": tokens_out, "cacheRead": read, "cacheWrite": 0,
                 "totalTokens": tokens_in + tokens_out + read,
                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}}  # fmt: skip
        self.message(
            {"role": "assistant", "content": thinking + text + calls, "api": self.api, "provider": self.provider,
             "model": self.model, "usage": usage, "stopReason": stop}
        )  # fmt: skip


def pi_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One session file."""
    return [PiSession(material, rng, home, project, start_ms, target).write()]
