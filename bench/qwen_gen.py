"""Fake Qwen Code sessions, shaped like docs/agents/qwen.md.

`~/.qwen/projects/<cwd with / as ->/chats/<sessionId>.jsonl`: records `{uuid, parentUuid, sessionId, timestamp,
type, cwd, version, gitBranch}` chained by `parentUuid`: the person's `user` records (now and then with a
UserPromptSubmit hook's context as a final part, and `systemPayload.displayText`), `assistant` records with a
`thought` part, text and `functionCall` parts and per-call `usageMetadata`, `tool_result` records
(`functionResponse` + `toolCallResult`), `system` records (`ui_telemetry` after each response, an
`attribution_snapshot`, a `custom_title`), and in one session of eight a rewind: two exchanges the person rewound
away, left as a branch, then a `rewind` record and the conversation going on from the earlier point.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bench.material import Material, Project, iso_ms, rand_hex, rand_uuid4
from bench.output import JsonlOut, Written

MODELS = ("qwen3-coder-plus", "qwen3-coder-flash", "coder-model")
TOOLS = ("read_file", "run_shell_command", "edit", "write_file", "grep_search")
VERSIONS = ("0.14.3", "0.21.13", "0.24.4")
HOOK = "<qwen:user-prompt-submit-context>\n{}\n</qwen:user-prompt-submit-context>"


class QwenSession:
    def __init__(
        self, material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
    ):
        self.m, self.rng, self.project, self.target = material, rng, project, target
        self.ms = start_ms
        self.id = rand_uuid4(rng)
        self.model = rng.choice(MODELS)
        self.version = rng.choice(VERSIONS)
        folder = project.cwd.replace("/", "-")
        self.out = JsonlOut(home / ".qwen" / "projects" / folder / "chats" / f"{self.id}.jsonl")
        self.leaf: str | None = None
        self.prompts = 0

    def tick(self, low: float, high: float) -> int:
        self.ms += int(self.rng.uniform(low, high) * 1000)
        return self.ms

    def record(self, kind: str, **fields: Any) -> str:
        uuid = rand_uuid4(self.rng)
        self.out.add(
            {"uuid": uuid, "parentUuid": self.leaf, "sessionId": self.id, "timestamp": iso_ms(self.ms), "type": kind,
             "cwd": self.project.cwd, "version": self.version, "gitBranch": "main", **fields}
        )  # fmt: skip
        self.leaf = uuid
        return uuid

    def write(self) -> Written:
        rewind_at = 2 if self.rng.random() < 0.125 else -1
        while self.out.size < self.target or self.prompts == 0:
            if self.prompts == rewind_at and self.leaf is not None:
                self.rewind()
            self.turn()
            if self.prompts == 1:
                self.record(
                    "system", subtype="custom_title", systemPayload={"customTitle": self.m.prose(self.rng, 1)[:60]}
                )
        written = Written("qwen", self.id, self.out.path)
        written.bytes_sources = self.out.close(self.ms)
        written.files.append(self.out.path)
        return written

    def rewind(self) -> None:
        """Two exchanges, then the person rewinds to before them: they stay in the file as a branch."""
        start = self.leaf
        self.turn()
        self.turn()
        self.tick(10, 60)
        self.leaf = start
        self.record("system", subtype="rewind", systemPayload={"truncatedCount": 4})

    def turn(self) -> None:
        rng, m = self.rng, self.m
        self.tick(5, 300)
        typed = " ".join(rng.choices(m.sentences, k=2))
        parts: list[dict[str, Any]] = [{"text": typed}]
        payload: dict[str, Any] = {"displayText": typed}
        if rng.random() < 0.1:
            context = rng.choice(m.sentences)
            parts.append({"text": HOOK.format(context)})
            payload["hookContext"] = context
        self.record("user", provenance="real_user", message={"role": "user", "parts": parts}, systemPayload=payload)
        self.prompts += 1
        remaining = max(self.target - self.out.size, 3_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5)), 1 + remaining // 8_000)):
            calls = [self.call(rng.choice(TOOLS)) for _ in range(rng.choice((1, 1, 2)))]
            text = [{"text": m.prose(rng, 2)}] if rng.random() < 0.4 else []
            self.assistant(text + calls)
            for call in calls:
                self.tick(0.1, 4)
                out = m.shell_output(rng, rng.randint(1, 60))
                failed = rng.random() < 0.05
                response = {"error": out} if failed else {"output": out}
                function = call["functionCall"]
                self.record(
                    "tool_result", provenance="tool_result",
                    message={"role": "user", "parts": [
                        {"functionResponse": {"id": function["id"], "name": function["name"], "response": response}}]},
                    toolCallResult={"callId": function["id"], "status": "error" if failed else "success",
                                    "resultDisplay": out[:200]},
                )  # fmt: skip
        self.assistant([{"text": m.markdown_answer(rng, rng.randint(200, 1500), self.project.lang)}])
        if rng.random() < 0.05:
            self.record("system", subtype="attribution_snapshot", systemPayload={"snapshot": {"files": {}}})

    def call(self, name: str) -> dict[str, Any]:
        rng = self.rng
        args = (
            {"command": rng.choice(self.m.shell)[:60]}
            if name == "run_shell_command"
            else {"absolute_path": self.project.path(rng)}
        )
        return {"functionCall": {"id": f"call_{rand_hex(rng, 24)}", "name": name, "args": args}}

    def assistant(self, parts: list[dict[str, Any]]) -> None:
        rng = self.rng
        self.tick(1, 40)
        thought = [{"text": self.m.prose(rng, 2), "thought": True}] if rng.random() < 0.5 else []
        prompt, out = rng.randint(2_000, 150_000), rng.randint(20, 2000)
        cached, thoughts = rng.randint(0, prompt), rng.randint(0, 500) if thought else 0
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": out, "thoughtsTokenCount": thoughts,
                 "cachedContentTokenCount": cached, "totalTokenCount": prompt + out + thoughts}  # fmt: skip
        self.record(
            "assistant", provenance="assistant_output", model=self.model,
            message={"role": "model", "parts": thought + parts}, usageMetadata=usage, contextWindowSize=1_000_000,
        )  # fmt: skip
        self.record(
            "system", subtype="ui_telemetry",
            systemPayload={"uiEvent": {"event.name": "qwen-code.api_response", "model": self.model,
                                       "duration_ms": rng.randint(300, 30_000), "input_token_count": prompt,
                                       "output_token_count": out}},
        )  # fmt: skip


def qwen_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One chat file."""
    return [QwenSession(material, rng, home, project, start_ms, target).write()]
