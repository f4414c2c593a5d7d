"""Fake Codex CLI rollouts, shaped like docs/agents/codex.md (the current envelope, Sept 2025+).

`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<YYYY-MM-DDThh-mm-ss>-<uuidv7>.jsonl` (a few under `archived_sessions/`):
- line 1 `session_meta` (id, timestamp, cwd, originator, cli_version, source, base_instructions of ~10-20 KB, git);
- per turn: `event_msg/task_started`, the injected context on the first turn (a `developer` message with permission
  instructions, a `user` message whose parts are AGENTS.md and `<environment_context>`), `turn_context` (the model),
  the prompt twice (`response_item` user message and `event_msg/user_message`), then model steps: `reasoning` with
  opaque `encrypted_content` (and sometimes a summary + `event_msg/agent_reasoning`), `function_call` exec_command
  with JSON-string arguments and its `function_call_output`, `custom_tool_call` apply_patch with
  `event_msg/patch_apply_end`, a `token_count` after every model call (cumulative `total_token_usage` and
  `last_token_usage`), the answer twice (`event_msg/agent_message` and a `response_item` assistant message), and
  `event_msg/task_complete`;
- a few subagent rollouts: their own `session_meta` (thread_source subagent, parent_thread_id), then the parent's
  `session_meta` and a replay of the parent's history with re-stamped times, then their own turns
  (docs/agents/codex.md "Session id, forks and subagents").
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from bench.material import EPOCH, Clock, Material, Project, ms_of, rand_base64, rand_hex, rand_token, rand_uuid7
from bench.output import JsonlOut, Written
from extractors.timeutil import parse_iso

CLI_VERSIONS = ("0.46.0", "0.63.0", "0.98.0", "0.125.0", "0.128.0-alpha.1")
ORIGINATORS = ("codex_cli_rs", "codex-tui", "codex_exec", "codex_vscode", "Codex Desktop")
MODELS = ("gpt-5-codex", "gpt-5.1-codex-max", "gpt-5.2", "o4-mini")
RATE_LIMITS = {
    "limit_id": "codex",
    "limit_name": None,
    "primary": {"used_percent": 10.0, "window_minutes": 300, "resets_at": 1767200000},
    "secondary": {"used_percent": 5.0, "window_minutes": 10080, "resets_at": 1767800000},
    "credits": None,
    "plan_type": "plus",
    "rate_limit_reached_type": None,
}


class CodexSession:
    def __init__(
        self,
        material: Material,
        rng: random.Random,
        home: Path,
        project: Project,
        start_ms: int,
        target: int,
        *,
        archived: bool = False,
        parent: CodexSession | None = None,
    ) -> None:
        self.m = material
        self.rng = rng
        self.project = project
        self.clock = Clock(rng, start_ms)
        self.target = target
        self.id = rand_uuid7(rng, start_ms)
        self.cli = rng.choice(CLI_VERSIONS)
        self.model = rng.choice(MODELS)
        self.parent = parent
        self.totals = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0}
        moment = EPOCH.timestamp() + start_ms / 1000
        from datetime import UTC, datetime

        when = datetime.fromtimestamp(moment, tz=UTC)
        folder = home / ".codex" / ("archived_sessions" if archived else "sessions") / f"{when:%Y/%m/%d}"
        self.out = JsonlOut(folder / f"rollout-{when:%Y-%m-%dT%H-%M-%S}-{self.id}.jsonl")
        self.history: list[bytes] = []  # this session's lines, for a child's replay

    def line(self, rtype: str, payload: dict[str, Any], *, timestamp: str | None = None) -> None:
        raw = orjson.dumps({"timestamp": timestamp or self.clock.tick(0.01, 0.5), "type": rtype, "payload": payload})
        self.out.add_raw(raw)
        if len(self.history) < 400:
            self.history.append(raw)

    def meta(self, *, child_of: CodexSession | None = None) -> dict[str, Any]:
        rng = self.rng
        payload: dict[str, Any] = {
            "id": self.id,
            "timestamp": self.clock.now(),
            "cwd": self.project.cwd,
            "originator": rng.choice(ORIGINATORS),
            "cli_version": self.cli,
            "source": rng.choice(("cli", "vscode", "exec")),
            "model_provider": "openai",
        }
        if child_of is not None:
            payload["source"] = {
                "subagent": {"thread_spawn": {"parent_thread_id": child_of.id, "depth": 1, "agent_role": "worker"}}
            }
            payload["thread_source"] = "subagent"
            payload["parent_thread_id"] = child_of.id
        payload["base_instructions"] = {
            "text": "You are Codex, a coding agent based on GPT-5. " + self.m.prose(rng, rng.randint(60, 200))
        }
        payload["git"] = {
            "commit_hash": rand_hex(rng, 40),
            "branch": self.project.branch or "main",
            "repository_url": f"https://github.com/example/{self.project.cwd.rsplit('/', 1)[-1]}",
        }
        return payload

    def write(self) -> Written:
        rng = self.rng
        self.line("session_meta", self.meta(child_of=self.parent), timestamp=self.clock.now())
        if self.parent is not None:
            # The parent's session_meta and history, replayed with re-stamped times
            # (docs/agents/codex.md "Session id, forks and subagents").
            for raw in self.parent.history[: rng.randint(10, 120)]:
                record = orjson.loads(raw)
                record["timestamp"] = self.clock.tick(0, 0.01)
                self.out.add_raw(orjson.dumps(record))
            self.clock.tick(1, 5)
        turn = 0
        while self.out.size < self.target or turn == 0:
            self.turn(turn)
            turn += 1
        written = Written("codex", self.id, self.out.path)
        written.bytes_sources = self.out.close(self.clock.ms)
        written.files.append(self.out.path)
        return written

    def token_count(self, *, empty: bool = False) -> None:
        rng = self.rng
        if empty:
            self.line("event_msg", {"type": "token_count", "info": None, "rate_limits": RATE_LIMITS})
            return
        last = {
            "input_tokens": rng.randint(5_000, 120_000),
            "cached_input_tokens": 0,
            "output_tokens": rng.randint(20, 3_000),
            "reasoning_output_tokens": rng.randint(0, 2_000),
        }
        last["cached_input_tokens"] = int(last["input_tokens"] * rng.uniform(0.3, 0.95))
        for key, value in last.items():
            self.totals[key] += value
        info = {
            "total_token_usage": {
                **self.totals,
                "total_tokens": self.totals["input_tokens"] + self.totals["output_tokens"],
            },
            "last_token_usage": {**last, "total_tokens": last["input_tokens"] + last["output_tokens"]},
            "model_context_window": 258400,
        }
        self.line("event_msg", {"type": "token_count", "info": info, "rate_limits": RATE_LIMITS})

    def turn(self, index: int) -> None:
        rng, m, p = self.rng, self.m, self.project
        self.clock.tick(5, 300)
        turn_id = rand_uuid7(rng, self.clock.ms)
        self.line(
            "event_msg",
            {
                "type": "task_started",
                "turn_id": turn_id,
                "started_at": self.clock.ms // 1000,
                "model_context_window": 258400,
                "collaboration_mode_kind": "default",
            },
        )
        if index == 0:
            self.line(
                "response_item",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [
                        {
                            "type": "input_text",
                            "text": "<permissions instructions>\nFilesystem sandboxing: workspace-write mode.\n"
                            + m.prose(rng, 12)
                            + "\n</permissions instructions>",
                        }
                    ],
                },
            )
            instructions = m.prose(rng, rng.randint(10, 60))
            agents_md = f"# AGENTS.md instructions for {p.cwd}\n\n<INSTRUCTIONS>\n{instructions}\n</INSTRUCTIONS>"
            env = (
                f"<environment_context>\n  <cwd>{p.cwd}</cwd>\n  <shell>bash</shell>\n"
                f"  <current_date>{self.clock.now()[:10]}</current_date>\n  <timezone>UTC</timezone>\n"
                "</environment_context>"
            )
            self.line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": agents_md}, {"type": "input_text", "text": env}],
                },
            )
        self.line(
            "turn_context",
            {
                "turn_id": turn_id,
                "cwd": p.cwd,
                "current_date": self.clock.now()[:10],
                "timezone": "UTC",
                "approval_policy": rng.choice(("never", "on-request", "untrusted")),
                "sandbox_policy": {"type": "workspace-write", "writable_roots": ["/tmp"], "network_access": False},
                "model": self.model,
                "effort": rng.choice(("low", "medium", "high")),
                "summary": "auto",
                "collaboration_mode": {
                    "mode": "default",
                    "settings": {"model": self.model, "reasoning_effort": "medium", "developer_instructions": None},
                },
                "truncation_policy": {"mode": "tokens", "limit": 10000},
            },
        )
        prompt = " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 3, 6))))
        if rng.random() < 0.1:
            prompt = (
                f"# Context from my IDE setup:\n\n## Open tabs:\n- {p.path(rng)}\n\n## My request for Codex:\n{prompt}"
            )
        content: list[dict[str, Any]] = [{"type": "input_text", "text": prompt}]
        images: list[str] = []
        if rng.random() < 0.03:
            url = "data:image/png;base64," + rand_base64(rng, rng.randint(20_000, 200_000))
            content.append({"type": "input_image", "image_url": url})
            images.append(url)
        self.line("response_item", {"type": "message", "role": "user", "content": content})
        self.line(
            "event_msg",
            {"type": "user_message", "message": prompt, "images": images, "local_images": [], "text_elements": []},
        )
        self.token_count(empty=index == 0)
        remaining = max(self.target - self.out.size, 3_000)
        scale = min(1.0, remaining / 80_000)
        for _ in range(min(rng.choice((0, 1, 2, 3, 5, 8, 12)), 1 + remaining // 10_000)):
            self.reasoning()
            if rng.random() < 0.2:
                self.patch(turn_id)
            else:
                self.exec_calls(rng.choice((1, 1, 2, 4)), scale)
            self.token_count()
        self.reasoning()
        answer = m.markdown_answer(rng, rng.choice((200, 800, 2000, 5000)), p.lang)
        self.line("event_msg", {"type": "agent_message", "message": answer, "phase": "final_answer"})
        self.line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer}],
                "phase": "final_answer",
            },
        )
        self.token_count()
        self.line(
            "event_msg",
            {
                "type": "task_complete",
                "turn_id": turn_id,
                "last_agent_message": answer,
                "completed_at": self.clock.ms // 1000,
                "duration_ms": rng.randint(2_000, 600_000),
            },
        )

    def reasoning(self) -> None:
        rng = self.rng
        summary: list[dict[str, str]] = []
        if rng.random() < 0.4:
            summary = [
                {"type": "summary_text", "text": "**" + rng.choice(self.m.sentences) + "**\n\n" + self.m.prose(rng, 4)}
            ]
        encrypted = "gAAAAAB" + rand_base64(rng, rng.randint(600, 2500))
        self.line(
            "response_item", {"type": "reasoning", "summary": summary, "content": None, "encrypted_content": encrypted}
        )
        if summary:
            self.line("event_msg", {"type": "agent_reasoning", "text": summary[0]["text"]})

    def exec_calls(self, n: int, scale: float) -> None:
        rng, m = self.rng, self.m
        calls = []
        for _ in range(n):
            call_id = "call_" + rand_token(rng, 24)
            cmd = rng.choice(
                (
                    f"sed -n '1,220p' {self.project.path(rng)}",
                    f"rg -n {rng.choice(m.idents)}",
                    "git status",
                    "pytest -q",
                )
            )
            args = {"cmd": cmd, "yield_time_ms": 1000, "max_output_tokens": 12000}
            self.line(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": orjson.dumps(args).decode(),
                    "call_id": call_id,
                },
            )
            calls.append((call_id, cmd))
        for call_id, cmd in calls:
            if cmd.startswith("sed"):
                body = "\n".join(m.source_file(rng, self.project.lang, max(5, int(rng.randint(20, 300) * scale))))
            elif cmd.startswith("pytest"):
                body = m.test_output(rng, max(3, int(rng.randint(5, 120) * scale)))
            else:
                body = m.shell_output(rng, max(1, int(rng.randint(1, 80) * scale)))
            code = 1 if rng.random() < 0.1 else 0
            output = (
                f"Chunk ID: {rand_hex(rng, 6)}\nWall time: {rng.uniform(0, 3):.4f} seconds\n"
                f"Process exited with code {code}\nOriginal token count: {len(body) // 4}\nOutput:\n{body}"
            )
            self.line("response_item", {"type": "function_call_output", "call_id": call_id, "output": output})
            self.line(
                "event_msg",
                {
                    "type": "exec_command_end",
                    "call_id": call_id,
                    "command": ["bash", "-lc", cmd],
                    "cwd": self.project.cwd,
                    "exit_code": code,
                    "duration": {"secs": rng.randint(0, 20), "nanos": rng.randint(0, 999_999_999)},
                    "status": "completed",
                },
            )

    def patch(self, turn_id: str) -> None:
        rng, m, p = self.rng, self.m, self.project
        path = p.path(rng)
        diff = m.diff(rng, path, p.lang, rng.randint(4, 60))
        call_id = "call_" + rand_token(rng, 24)
        body = f"*** Begin Patch\n*** Update File: {path}\n{diff}\n*** End Patch"
        self.line(
            "response_item",
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": "apply_patch",
                "input": body,
            },
        )
        result = {
            "output": f"Success. Updated the following files:\nM {path}\n",
            "metadata": {"exit_code": 0, "duration_seconds": 0.0},
        }
        self.line(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": call_id, "output": orjson.dumps(result).decode()},
        )
        self.line(
            "event_msg",
            {
                "type": "patch_apply_end",
                "call_id": call_id,
                "turn_id": turn_id,
                "stdout": result["output"],
                "stderr": "",
                "success": True,
                "changes": {path: {"type": "update", "unified_diff": diff, "move_path": None}},
            },
        )


def codex_session(
    material: Material,
    rng: random.Random,
    home: Path,
    project: Project,
    start_ms: int,
    target: int,
    *,
    archived: bool = False,
    with_child: bool = False,
) -> list[Written]:
    """One rollout (and, with `with_child`, a subagent rollout forked from it)."""
    session = CodexSession(material, rng, home, project, start_ms, target, archived=archived)
    out = [session.write()]
    if with_child:
        child = CodexSession(
            material, rng, home, project, session.clock.ms + 1_000, max(target // 3, 20_000), parent=session
        )
        out.append(child.write())
    return out


def append_exchange(material: Material, rng: random.Random, path: Path) -> int:
    """Append one more exchange (a prompt, the answer, a token count) to an existing rollout, timed after its last
    record (the benchmark's "append" phase on a corpus whose one session is a rollout). Returns the bytes appended."""
    last, total = "", {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0}
    with path.open("rb") as handle:
        for raw in handle:
            record = orjson.loads(raw)
            stamp, payload = record.get("timestamp"), record.get("payload")
            last = stamp if isinstance(stamp, str) else last
            info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                total = dict(info["total_token_usage"])
    moment = parse_iso(last)
    if moment is None:
        raise ValueError(f"{path}: no timestamped record to continue from")
    clock = ms_of(moment) + 60_000
    prompt, answer = material.prose(rng, 6), material.markdown_answer(rng, 4_000, "python")
    usage = {"input_tokens": 9_000, "cached_input_tokens": 0, "output_tokens": 700, "reasoning_output_tokens": 0}
    grown = {key: int(total.get(key) or 0) + value for key, value in usage.items()}  # totals are cumulative
    usage["total_tokens"], grown["total_tokens"] = 9_700, grown["input_tokens"] + grown["output_tokens"]
    said = [{"type": "output_text", "text": answer}]
    records = [
        ("event_msg", {"type": "user_message", "message": prompt, "images": [], "local_images": []}),
        ("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}),
        ("response_item", {"type": "message", "role": "assistant", "content": said}),
        ("event_msg", {"type": "agent_message", "message": answer}),
        ("event_msg", {"type": "token_count", "info": {"total_token_usage": grown, "last_token_usage": usage}}),
    ]
    before = path.stat().st_size
    with path.open("ab") as handle:
        for number, (kind, payload) in enumerate(records):
            stamp = datetime.fromtimestamp((clock + number * 1_500) / 1000, UTC).isoformat(timespec="milliseconds")
            record = {"timestamp": stamp.replace("+00:00", "Z"), "type": kind, "payload": payload}
            handle.write(orjson.dumps(record) + b"\n")
    return path.stat().st_size - before
