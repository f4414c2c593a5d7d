"""Fake GitHub Copilot CLI sessions, shaped like docs/agents/copilot.md.

`$COPILOT_HOME/session-state/<session id>/events.jsonl` (one event per line, envelope `{type, data, id, timestamp,
parentId}`) and its `workspace.yaml`, plus, for some sessions, a `checkpoints/` file the ETL must not read:
- `session.start` (context, copilotVersion), `system.message` prompts, `user.message` with `content` and the
  model's `transformedContent` (`<current_datetime>...`), some skill injections (`source: skill-*`);
- `assistant.turn_start`/`turn_end`, `assistant.message` with `toolRequests` (arguments as objects or JSON
  strings) and `outputTokens`, `tool.execution_start`/`_complete` (results as objects or strings);
- now and then a sub-agent (a `task` call whose events carry `agentId`, interleaved in the parent's file), a
  `session.shutdown` with `modelMetrics` closing a segment and a `session.resume` opening the next, and a
  compaction.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from bench.material import Material, Project, iso_ms, rand_hex, rand_uuid4
from bench.output import JsonlOut, Written, set_mtime

MODELS = ("claude-sonnet-4.6", "gpt-5.4", "claude-opus-4.6", "gpt-5-mini")
TOOLS = ("bash", "view", "edit", "grep", "glob")
VERSIONS = ("0.0.372", "0.0.420", "1.0.11", "1.0.63")


class CopilotSession:
    def __init__(
        self, material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
    ) -> None:
        self.m = material
        self.rng = rng
        self.project = project
        self.start_ms = start_ms
        self.now_ms = start_ms
        self.target = target
        self.id = rand_uuid4(rng)
        self.model = rng.choice(MODELS)
        self.folder = home / ".copilot" / "session-state" / self.id
        self.out = JsonlOut(self.folder / "events.jsonl")
        self.last: str | None = None
        self.turns = 0
        self.segment_output = 0
        self.segment_calls = 0

    def tick(self, low: float, high: float) -> None:
        self.now_ms += int(self.rng.uniform(low, high) * 1000)

    def add(self, kind: str, data: dict[str, Any], *, agent: str | None = None) -> None:
        event_id = rand_uuid4(self.rng)
        record: dict[str, Any] = {
            "type": kind,
            "data": data,
            "id": event_id,
            "timestamp": iso_ms(self.now_ms),
            "parentId": self.last,
        }
        if agent is not None:
            record["agentId"] = agent
        self.out.add(record)
        self.last = event_id

    def context(self) -> dict[str, Any]:
        p = self.project
        name = p.cwd.rsplit("/", 1)[-1]
        return {
            "cwd": p.cwd,
            "gitRoot": p.cwd,
            "repository": f"example/{name}",
            "hostType": "github",
            "branch": p.branch or "main",
            "headCommit": rand_hex(self.rng, 40),
        }

    def write(self) -> Written:
        rng, m = self.rng, self.m
        version = rng.choice(VERSIONS)
        self.add(
            "session.start",
            {
                "sessionId": self.id,
                "version": 1,
                "producer": "copilot-agent",
                "copilotVersion": version,
                "startTime": iso_ms(self.start_ms),
                "selectedModel": self.model,
                "context": self.context(),
                "alreadyInUse": False,
            },
        )
        self.tick(0.1, 2)
        self.add("session.info", {"infoType": "folder_trust", "message": f"Folder {self.project.cwd} is trusted."})
        while self.out.size < self.target or self.turns == 0:
            self.turn()
            if rng.random() < 0.1:
                self.shutdown()
                self.tick(600, 40_000)
                self.add(
                    "session.resume",
                    {"resumeTime": iso_ms(self.now_ms), "selectedModel": self.model, "context": self.context()},
                )
            if rng.random() < 0.04:
                self.tick(1, 5)
                self.add(
                    "session.compaction_complete",
                    {
                        "success": True,
                        "preCompactionTokens": rng.randint(80_000, 160_000),
                        "postCompactionTokens": rng.randint(2_000, 9_000),
                        "summaryContent": "<summary>" + m.prose(rng, rng.randint(3, 12)) + "</summary>",
                        "trigger": "threshold",
                    },
                )
        self.shutdown()
        title = rng.choice(m.sentences)[:60].rstrip(".?!: ")
        workspace = (
            f"id: {self.id}\ncwd: {self.project.cwd}\ngit_root: {self.project.cwd}\n"
            f"repository: example/{self.project.cwd.rsplit('/', 1)[-1]}\nhost_type: github\n"
            f"branch: {self.project.branch or 'main'}\nsummary: {orjson.dumps(title).decode()}\nsummary_count: 1\n"
            f"created_at: {iso_ms(self.start_ms)}\nupdated_at: {iso_ms(self.now_ms)}\n"
        )
        sidecar = self.folder / "workspace.yaml"
        sidecar.write_text(workspace, encoding="utf-8")
        set_mtime(sidecar, self.now_ms)
        written = Written("copilot", self.id, self.out.path)
        written.bytes_sources = self.out.close(self.now_ms) + len(workspace.encode())
        written.files += [self.out.path, sidecar]
        if rng.random() < 0.3:
            checkpoint = self.folder / "checkpoints" / ("001-checkpoint" + ".md")
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            text = "# Checkpoint\n\n" + m.prose(rng, 6) + "\n"
            checkpoint.write_text(text, encoding="utf-8")
            set_mtime(checkpoint, self.now_ms)
            written.bytes_other += len(text.encode())
        return written

    def shutdown(self) -> None:
        rng = self.rng
        self.tick(1, 30)
        total_in = max(1, self.segment_calls) * rng.randint(8_000, 40_000)
        cache_read = int(total_in * rng.uniform(0.4, 0.9))
        self.add(
            "session.shutdown",
            {
                "shutdownType": "routine",
                "totalPremiumRequests": self.segment_calls,
                "modelMetrics": {
                    self.model: {
                        "requests": {"count": self.segment_calls, "cost": 1},
                        "usage": {
                            "inputTokens": total_in,
                            "outputTokens": self.segment_output,
                            "cacheReadTokens": cache_read,
                            "cacheWriteTokens": rng.randint(0, total_in - cache_read),
                        },
                    }
                },
            },
        )
        self.segment_output = self.segment_calls = 0

    def turn(self) -> None:
        rng, m = self.rng, self.m
        self.tick(5, 300)
        interaction = rand_uuid4(rng)
        self.add("system.message", {"content": "You are the GitHub Copilot CLI. " + m.prose(rng, 4), "role": "system"})
        text = " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 4))))
        offset = rng.choice(("-07:00", "+01:00", "+00:00"))
        self.add(
            "user.message",
            {
                "content": text,
                "transformedContent": f"<current_datetime>{iso_ms(self.now_ms)[:-1]}{offset}</current_datetime>\n\n"
                f"{text}",
                "attachments": [],
                "delivery": rng.choice(("idle", "idle", "idle", "queued")),
                "interactionId": interaction,
            },
        )
        if rng.random() < 0.05:
            self.add(
                "user.message",
                {"content": "<skill-context name=\"review\">" + m.prose(rng, 5) + "</skill-context>",
                 "source": "skill-review"},
            )  # fmt: skip
        self.turns += 1
        self.add("assistant.turn_start", {"turnId": str(self.turns), "interactionId": interaction})
        remaining = max(self.target - self.out.size, 3_000)
        scale = min(1.0, remaining / 60_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5)), 1 + remaining // 8_000)):
            if rng.random() < 0.05:
                self.subagent()
                continue
            calls = []
            for _k in range(rng.choice((1, 1, 2))):
                name = rng.choice(TOOLS)
                args = (
                    {"path": self.project.path(rng)}
                    if name in ("view", "edit")
                    else {"command": rng.choice(m.shell)[:60]}
                )
                calls.append({"toolCallId": f"toolu_{rand_hex(rng, 24)}", "name": name, "type": "function",
                              "arguments": orjson.dumps(args).decode() if rng.random() < 0.3 else args})  # fmt: skip
            self.message(rng.choice(("", "", m.prose(rng, 2))), calls)
            for call in calls:
                self.tick(0.1, 1)
                self.add("tool.execution_start", {"toolCallId": call["toolCallId"], "toolName": call["name"]})
                if call["name"] == "view":
                    out = m.numbered(m.source_file(rng, self.project.lang, max(5, int(rng.randint(20, 300) * scale))))
                else:
                    out = m.shell_output(rng, max(1, int(rng.randint(1, 80) * scale)))
                self.tick(0.2, 20)
                ok = rng.random() > 0.08
                self.add(
                    "tool.execution_complete",
                    {
                        "toolCallId": call["toolCallId"],
                        "success": ok,
                        "result": {"content": out, "detailedContent": out[:400]} if rng.random() < 0.7 else out,
                        "model": self.model,
                    },
                )
        self.message(m.markdown_answer(rng, rng.choice((200, 800, 2500, 6000)), self.project.lang), [])
        self.add("assistant.turn_end", {"turnId": str(self.turns)})

    def message(self, text: str, calls: list[dict[str, Any]], *, agent: str | None = None) -> None:
        self.tick(1, 60)
        output = max(1, len(text) // 4) + 30 * len(calls)
        data: dict[str, Any] = {
            "messageId": rand_uuid4(self.rng),
            "model": self.model,
            "content": text,
            "toolRequests": calls,
            "outputTokens": output,
        }
        self.add("assistant.message", data, agent=agent)
        if agent is None:
            self.segment_output += output
            self.segment_calls += 1

    def subagent(self) -> None:
        rng, m = self.rng, self.m
        call = f"toolu_{rand_hex(rng, 24)}"
        agent = f"explore-{rand_hex(rng, 6)}"
        prompt = rng.choice(m.sentences)
        self.message("", [{"toolCallId": call, "name": "task", "type": "function",
                           "arguments": {"agent_type": "explore", "prompt": prompt}}])  # fmt: skip
        self.add("subagent.started", {"toolCallId": call, "agentName": "explore"})
        self.add("user.message", {"content": prompt, "parentToolCallId": call}, agent=agent)
        inner = f"toolu_{rand_hex(rng, 24)}"
        self.message("", [{"toolCallId": inner, "name": "grep", "type": "function",
                           "arguments": {"pattern": rng.choice(m.idents)}}], agent=agent)  # fmt: skip
        self.tick(0.2, 5)
        self.add(
            "tool.execution_complete",
            {"toolCallId": inner, "success": True, "result": m.shell_output(rng, rng.randint(1, 20))},
            agent=agent,
        )
        answer = m.prose(rng, 3)
        self.message(answer, [], agent=agent)
        self.add("subagent.completed", {"toolCallId": call, "agentName": "explore"})
        self.add("tool.execution_complete", {"toolCallId": call, "success": True, "result": {"content": answer}})


def copilot_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """One session folder: events.jsonl (sub-agents interleaved in it) and workspace.yaml."""
    return [CopilotSession(material, rng, home, project, start_ms, target).write()]
