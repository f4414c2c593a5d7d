"""Fake xAI Grok Build sessions, shaped like docs/agents/grok.md.

`$GROK_HOME/sessions/<percent-encoded cwd>/<session id (uuidv7)>/`:
- `chat_history.jsonl` (the transcript, no per-record times): a `system` prompt, synthetic `user` records
  (`synthetic_reason` environment_context / project_instructions / system_reminder), real prompts with
  `prompt_index`, `reasoning` records with opaque `encrypted_content`, `assistant` records with `tool_calls`
  (JSON-string arguments), `tool_result` records, and server-side `backend_tool_call` web searches;
- `summary.json` (the times and metadata): `info{id,cwd}`, `created_at`/`updated_at` with 6 fractional digits, titles,
  `current_model_id`, counts, git fields;
- in sessions of newer builds (most of them), `updates.jsonl`, the record the ETL reads there: the envelope of
  docs/agents/grok.md "updates.jsonl", prompts stamped with `_meta.promptIndex`, streamed message chunks, thought
  chunks, tool calls whose outputs are repeated (a progress update with part of the output, then the terminal one
  with all of it), an injected unmarked reminder now and then, `turn_completed` with the prompt's usage;
- a journal the ETL must not read: `events.jsonl`;
- a few subagents, written twice as in the CLI: a sibling session folder (`session_kind: "subagent"`) and
  `<parent>/subagents/<child id>/meta.json`.
"""

from __future__ import annotations

import random
import urllib.parse
from pathlib import Path
from typing import Any

import orjson

from bench.material import Material, Project, iso_us, rand_base64, rand_hex, rand_uuid4, rand_uuid7
from bench.output import JsonlOut, Written, write_json

MODELS = ("grok-4.5", "grok-code-fast-1", "grok-4")
TOOLS = ("read_file", "run_terminal_cmd", "grep_search", "edit_file", "list_dir")


class GrokSession:
    def __init__(
        self,
        material: Material,
        rng: random.Random,
        home: Path,
        project: Project,
        start_ms: int,
        target: int,
        *,
        subagent: bool = False,
    ) -> None:
        self.m = material
        self.rng = rng
        self.project = project
        self.start_us = start_ms * 1000 + rng.randint(0, 999)
        self.now_us = self.start_us
        self.target = target
        self.id = rand_uuid7(rng, start_ms)
        self.model = rng.choice(MODELS)
        self.subagent = subagent
        self.folder = home / ".grok" / "sessions" / urllib.parse.quote(project.cwd, safe="") / self.id
        self.chat = JsonlOut(self.folder / "chat_history.jsonl")
        self.events = JsonlOut(self.folder / "events.jsonl")
        # Newer builds keep updates.jsonl (read instead of chat_history.jsonl); older ones have none.
        self.newer = rng.random() < 0.7
        self.updates = JsonlOut(self.folder / "updates.jsonl") if self.newer else None
        self.events_written = 0
        self.records = 0
        self.prompts = 0

    def tick(self, low: float, high: float) -> None:
        self.now_us += int(self.rng.uniform(low, high) * 1_000_000)

    def add(self, record: dict[str, Any]) -> None:
        self.chat.add(record)
        self.records += 1

    def update(self, update: dict[str, Any], *, xai: bool = False) -> None:
        """One updates.jsonl line (newer builds only), stamped now."""
        if self.updates is None:
            return
        self.events_written += 1
        ms = self.now_us // 1000
        self.updates.add(
            {
                "timestamp": ms // 1000,
                "method": "_x.ai/session/update" if xai else "session/update",
                "params": {
                    "sessionId": self.id,
                    "update": update,
                    "_meta": {"eventId": f"{self.id}-{self.events_written}", "agentTimestampMs": ms},
                },
            }
        )

    def chunks(self, kind: str, text: str) -> None:
        """`text` streamed as `kind` chunks of a few hundred characters."""
        step = self.rng.randint(80, 400)
        for at in range(0, len(text), step):
            self.update({"sessionUpdate": kind, "content": {"type": "text", "text": text[at : at + step]}})

    def write(self) -> Written:
        rng, m, p = self.rng, self.m, self.project
        self.add({"type": "system", "content": "You are Grok, released by xAI. " + m.prose(rng, rng.randint(60, 180))})
        self.add(
            {
                "type": "user",
                "content": [
                    {
                        "type": "text",
                        "text": f"<user_info>\nOS Version: {rng.choice(('macos', 'linux'))}\n"
                        f"Workspace Path: {p.cwd}\n</user_info>",
                    }
                ],
                "synthetic_reason": "environment_context",
            }
        )
        if rng.random() < 0.5:
            self.add(
                {
                    "type": "user",
                    "content": [{"type": "text", "text": "# AGENTS.md\n\n" + m.prose(rng, rng.randint(8, 40))}],
                    "synthetic_reason": "project_instructions",
                }
            )
        while self.chat.size < self.target or self.prompts == 0:
            self.turn()
        title = rng.choice(m.sentences)[:60].rstrip(".?!: ")
        summary: dict[str, Any] = {
            "info": {"id": self.id, "cwd": p.cwd},
            "session_summary": title,
            "created_at": iso_us(self.start_us),
            "updated_at": iso_us(self.now_us),
            "num_messages": self.records + rng.randint(5, 50),
            "num_chat_messages": self.records,
            "current_model_id": self.model,
            "next_trace_turn": self.prompts,
            "chat_format_version": 1,
            "git_root_dir": p.cwd + "/",
            "git_remotes": [f"git@github.com:example/{p.cwd.rsplit('/', 1)[-1]}.git"],
            "head_commit": rand_hex(rng, 40),
            "head_branch": p.branch or "main",
            "request_id": rand_uuid4(rng),
            "grok_home": f"{p.home}/.grok",
            "last_active_at": iso_us(self.now_us),
            "generated_title": title,
            "agent_name": "grok",
            "sandbox_profile": "off",
            "reasoning_effort": rng.choice(("low", "medium", "high")),
            "last_turn_summary": rng.choice(m.sentences),
            "last_turn_summary_prompt_id": rand_uuid4(rng),
        }
        if self.subagent:
            summary["session_kind"] = "subagent"
        mtime = self.now_us // 1000
        summary_bytes = write_json(self.folder / "summary.json", summary, mtime)
        chat_bytes, events_bytes = self.chat.close(mtime), self.events.close(mtime)
        if self.updates is None:
            written = Written("grok", self.id, self.chat.path)
            written.bytes_sources = chat_bytes + summary_bytes
            written.bytes_other = events_bytes
            written.files += [self.chat.path, self.folder / "summary.json"]
        else:  # updates.jsonl is the unit and the record; chat_history.jsonl is only fingerprinted
            written = Written("grok", self.id, self.updates.path)
            written.bytes_sources = self.updates.close(mtime) + summary_bytes
            written.bytes_other = events_bytes + chat_bytes
            written.files += [self.updates.path, self.folder / "summary.json"]
        return written

    def turn(self) -> None:
        rng, m = self.rng, self.m
        self.tick(5, 300)
        self.events.add({"type": "turn_started", "session_id": self.id, "ts": iso_us(self.now_us)})
        content: list[dict[str, Any]] = []
        if rng.random() < 0.03:
            content.append(
                {"type": "image", "url": "data:image/png;base64," + rand_base64(rng, rng.randint(20_000, 150_000))}
            )
        content.append({"type": "text", "text": " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 4))))})
        record: dict[str, Any] = {"type": "user", "content": content, "prompt_index": self.prompts}
        if self.prompts and rng.random() < 0.05:
            record["prior_turn_interrupt"] = "mid_turn_abort"
        self.add(record)
        chunk_meta = {"modelId": self.model, "promptIndex": self.prompts}
        for part in content:
            block = (
                {"type": "text", "text": part["text"]}
                if part["type"] == "text"
                else {"type": "image", "mimeType": "image/png", "data": part["url"].split(",", 1)[1]}
            )
            self.update({"sessionUpdate": "user_message_chunk", "content": block, "_meta": chunk_meta})
        prompt_id = rand_uuid4(rng)
        self.prompts += 1
        remaining = max(self.target - self.chat.size, 3_000)
        scale = min(1.0, remaining / 60_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5, 8)), 1 + remaining // 8_000)):
            self.reasoning()
            calls = []
            for k in range(rng.choice((1, 1, 2))):
                name = rng.choice(TOOLS)
                args = (
                    {"target_file": self.project.path(rng)}
                    if name in ("read_file", "edit_file")
                    else {"command": rng.choice(m.shell)[:60]}
                )
                calls.append(
                    {"id": f"call-{rand_uuid4(rng)}-{k}", "name": name, "arguments": orjson.dumps(args).decode()}
                )
            self.assistant(rng.choice(("", "", m.prose(rng, 3))), calls)
            for call in calls:
                self.update(
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": call["id"],
                        "title": call["name"],
                        "kind": "other",
                        "status": "pending",
                        "rawInput": orjson.loads(call["arguments"]),
                    }
                )
                if call["name"] == "read_file":
                    out = m.numbered(m.source_file(rng, self.project.lang, max(5, int(rng.randint(20, 300) * scale))))
                else:
                    out = m.shell_output(rng, max(1, int(rng.randint(1, 80) * scale)))
                self.add({"type": "tool_result", "tool_call_id": call["id"], "content": out})
                # The output is repeated in the stream: a progress update with part of it, then the whole.
                for status, shown in (("in_progress", out[: len(out) // 2]), ("completed", out)):
                    self.update(
                        {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": call["id"],
                            "status": status,
                            "content": [{"type": "content", "content": {"type": "text", "text": shown}}],
                        }
                    )
                self.tick(0.2, 20)
            if rng.random() < 0.05:
                self.add(
                    {
                        "type": "backend_tool_call",
                        "kind": {
                            "tool_type": "web_search",
                            "action": {"type": "search", "query": " ".join(rng.sample(m.idents, 3)), "sources": []},
                            "id": f"ws_{rand_uuid4(rng)}",
                            "status": "completed",
                        },
                    }
                )
                self.update(
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": f"ws_{rand_uuid4(rng)}",
                        "title": "web_search",
                        "kind": "fetch",
                        "status": "completed",
                        "_meta": {"backend": True},
                    }
                )
            if rng.random() < 0.03:
                self.add(
                    {
                        "type": "user",
                        "content": [
                            {"type": "text", "text": f"<system-reminder>{rng.choice(m.sentences)}</system-reminder>"}
                        ],
                        "synthetic_reason": "system_reminder",
                    }
                )
                self.update(  # injected mid-turn: no promptIndex
                    {
                        "sessionUpdate": "user_message_chunk",
                        "content": {
                            "type": "text",
                            "text": f"<system-reminder>{rng.choice(m.sentences)}</system-reminder>",
                        },
                        "_meta": {"modelId": self.model},
                    }
                )
        self.reasoning()
        self.assistant(m.markdown_answer(rng, rng.choice((200, 800, 2500, 6000)), self.project.lang), [])
        cached = rng.randint(0, 60_000)
        usage = {
            "inputTokens": cached + rng.randint(200, 20_000),
            "outputTokens": rng.randint(20, 4_000),
            "cachedReadTokens": cached,
            "reasoningTokens": rng.randint(0, 800),
            "modelCalls": rng.randint(1, 8),
            "costUsdTicks": rng.randint(10**6, 10**9),
        }
        self.update(
            {"sessionUpdate": "turn_completed", "prompt_id": prompt_id, "stop_reason": "end_turn", "usage": usage},
            xai=True,
        )
        self.events.add({"type": "turn_ended", "session_id": self.id, "ts": iso_us(self.now_us)})

    def reasoning(self) -> None:
        rng = self.rng
        thought = self.m.prose(rng, rng.randint(1, 6))
        self.chunks("agent_thought_chunk", thought)
        self.add(
            {
                "type": "reasoning",
                "id": f"rs_{rand_uuid4(rng)}",
                "summary": [{"type": "summary_text", "text": thought}],
                "encrypted_content": rand_base64(rng, rng.randint(400, 2000)),
                "status": "completed",
            }
        )

    def assistant(self, text: str, calls: list[dict[str, str]]) -> None:
        self.tick(1, 60)
        self.chunks("agent_message_chunk", text)
        self.add(
            {
                "type": "assistant",
                "content": text,
                "tool_calls": calls,
                "model_id": self.model,
                "model_fingerprint": "fp_" + rand_hex(self.rng, 16),
                "reasoning_effort": "high",
            }
        )


def grok_session(
    material: Material,
    rng: random.Random,
    home: Path,
    project: Project,
    start_ms: int,
    target: int,
    *,
    with_child: bool = False,
) -> list[Written]:
    """One session folder (and, with `with_child`, a subagent written both ways)."""
    session = GrokSession(material, rng, home, project, start_ms, target)
    out = [session.write()]
    if with_child:
        child = GrokSession(
            material, rng, home, project, session.now_us // 1000 + 1_000, max(target // 3, 10_000), subagent=True
        )
        out.append(child.write())
        meta = {
            "parent_session_id": session.id,
            "subagent_type": "general-purpose",
            "description": rng.choice(material.sentences),
        }
        out[0].bytes_other += write_json(
            session.folder / "subagents" / child.id / "meta.json", meta, child.now_us // 1000
        )
    return out
