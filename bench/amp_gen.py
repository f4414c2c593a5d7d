"""Fake Amp threads, shaped like docs/agents/amp.md.

`~/.local/share/amp/threads/T-<uuidv7>.json`, one JSON document per thread (pretty-printed, as Amp rewrites it
whole): `v`, `id`, `created` (epoch ms), `title`, `env.initial.trees[0]` (the project), `messages` (user text with
`meta.sentAt`; assistant `thinking` + text + `tool_use` blocks with a per-inference `usage`; tool results sent back
as user messages, `tool_result` with `toolUseID` and `run{status, result}`), and `meta.traces`. One thread in three
runs an OpenAI model, whose usage puts the uncached prompt under `cacheCreationInputTokens` with `inputTokens` 0.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from bench.material import Material, Project, iso_ms, rand_hex, rand_uuid7
from bench.output import Written, write_json

ANTHROPIC = ("claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101")
OPENAI = ("gpt-5", "gpt-5-codex")
TOOLS = ("Read", "Bash", "edit_file", "Grep", "create_file")


class AmpThread:
    def __init__(
        self, material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
    ) -> None:
        self.m, self.rng, self.project, self.target = material, rng, project, target
        self.ms = start_ms
        self.id = "T-" + rand_uuid7(rng, start_ms)
        self.openai = rng.random() < 1 / 3
        self.model = rng.choice(OPENAI if self.openai else ANTHROPIC)
        self.path = home / ".local" / "share" / "amp" / "threads" / f"{self.id}.json"
        self.messages: list[dict[str, Any]] = []
        self.traces: list[dict[str, Any]] = []
        self.size = 0
        self.context = rng.randint(8_000, 20_000)

    def tick(self, low: float, high: float) -> int:
        self.ms += int(self.rng.uniform(low, high) * 1000)
        return self.ms

    def add(self, message: dict[str, Any]) -> None:
        message["messageId"] = len(self.messages)
        self.messages.append(message)
        self.size += len(json.dumps(message)) + 4 * len(message)  # about what the indentation adds

    def write(self) -> Written:
        rng, m = self.rng, self.m
        created = self.ms
        while self.size < self.target or len(self.messages) < 2:
            self.exchange()
        document = {
            "v": len(self.messages) * 3 + rng.randint(0, 9),
            "id": self.id,
            "created": created,
            "title": " ".join(rng.choices(m.sentences, k=1))[:60],
            "agentMode": "smart",
            "env": {"initial": {"trees": [{"displayName": self.project.cwd.rsplit("/", 1)[-1],
                                           "uri": "file://" + self.project.cwd}]}},
            "messages": self.messages,
            "meta": {"traces": self.traces},
        }  # fmt: skip
        written = Written("amp", self.id, self.path)
        written.bytes_sources = write_json(self.path, document, self.ms)
        written.files.append(self.path)
        return written

    def exchange(self) -> None:
        rng, m = self.rng, self.m
        self.tick(5, 300)
        prompt = " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 3))))
        self.add({"role": "user", "content": [{"type": "text", "text": prompt}], "meta": {"sentAt": self.ms}})
        remaining = max(self.target - self.size, 3_000)
        for _ in range(min(rng.choice((0, 1, 2, 4)), 1 + remaining // 8_000)):
            calls = [self.call(rng.choice(TOOLS)) for _ in range(rng.choice((1, 1, 2)))]
            text = [{"type": "text", "text": m.prose(rng, 2)}] if rng.random() < 0.4 else []
            self.assistant(text + calls)
            results = []
            for call in calls:
                self.tick(0.1, 4)
                failed = rng.random() < 0.05
                run: dict[str, Any] = (
                    {"status": "error", "error": {"message": m.shell_output(rng, 2)}}
                    if failed
                    else {
                        "status": "done",
                        "result": {"output": m.shell_output(rng, rng.randint(1, 60)), "exitCode": 0},
                    }
                )
                results.append({"type": "tool_result", "toolUseID": call["id"], "run": run})
            self.add({"role": "user", "content": results})
        self.assistant([{"type": "text", "text": m.markdown_answer(rng, rng.randint(200, 1500), self.project.lang)}])

    def call(self, name: str) -> dict[str, Any]:
        rng = self.rng
        arguments = {"path": self.project.path(rng)} if name != "Bash" else {"cmd": rng.choice(self.m.shell)[:60]}
        return {
            "type": "tool_use",
            "complete": True,
            "id": f"toolu_{rand_hex(rng, 24)}",
            "name": name,
            "input": arguments,
        }

    def assistant(self, blocks: list[dict[str, Any]]) -> None:
        rng = self.rng
        start = self.ms
        self.tick(1, 40)
        fresh, out = rng.randint(5, 3000), rng.randint(20, 2000)
        read = self.context
        self.context += fresh + out
        usage: dict[str, Any] = {"model": self.model, "outputTokens": out, "cacheReadInputTokens": read}
        if self.openai:  # the uncached prompt under cacheCreationInputTokens, inputTokens 0
            usage |= {"inputTokens": 0, "cacheCreationInputTokens": fresh}
        else:
            usage |= {"inputTokens": rng.randint(1, 20), "cacheCreationInputTokens": fresh}
        usage["totalInputTokens"] = usage["inputTokens"] + usage["cacheCreationInputTokens"] + read
        usage["timestamp"] = iso_ms(self.ms)
        thinking = [{"type": "thinking", "thinking": self.m.prose(rng, 2)}] if rng.random() < 0.6 else []
        self.add({"role": "assistant", "content": thinking + blocks, "usage": usage})
        self.traces.append({"name": "inference", "startTime": iso_ms(start), "endTime": iso_ms(self.ms)})


def amp_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One thread file."""
    return [AmpThread(material, rng, home, project, start_ms, target).write()]
