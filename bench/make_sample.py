"""Write the small sample corpus shipped in data/sample (deterministic): `uv run python bench/make_sample.py`.

A fake home with one or more sessions of every agent, covering the cases a newcomer should see: tool calls, a
slash command, an injected reminder, a response split over lines, a subagent, a compaction, injected Codex
context, a Grok session, a Gemini, an OpenCode and a Cursor session, an Aider history in the project folder, a
corrupt file (rejected) and a summary-only file (nothing to load); and a ChatGPT export for `transcripts backfill`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "data" / "sample"
HOME = OUT / "home"
CWD = "/home/dev/webapp"


def jl(records: Sequence[dict[str, Any] | str]) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, separators=(",", ":"))) + "\n" for r in records)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def claude(sid: str, ts: str, kind: str, **extra: Any) -> dict[str, Any]:
    rec = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": sid,
        "version": "2.1.38",
        "gitBranch": "main",
        "type": kind,
        "timestamp": ts,
        "uuid": f"{sid[:8]}-{kind}-{ts[-9:-1].replace(':', '').replace('.', '')}",
    }
    rec.update(extra)
    return rec


def msg(sid: str, ts: str, mid: str, blocks: list[dict[str, Any]], out_tokens: int, **extra: Any) -> dict[str, Any]:
    usage = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 2048,
        "cache_read_input_tokens": 18000,
        "output_tokens": out_tokens,
    }
    return claude(
        sid,
        ts,
        "assistant",
        requestId=f"req_{mid}",
        message={
            "model": "claude-opus-4-6",
            "id": f"msg_{mid}",
            "type": "message",
            "role": "assistant",
            "content": blocks,
            "usage": usage,
        },
        **extra,
    )


def claude_sessions() -> None:
    root = HOME / ".claude" / "projects" / "-home-dev-webapp"
    s1 = "5f0c2a1e-7b3d-4c55-9e21-0a1b2c3d4e01"
    d = "2026-03-02T09:"
    write(
        root / f"{s1}.jsonl",
        jl(
            [
                {
                    "type": "file-history-snapshot",
                    "messageId": "m0",
                    "isSnapshotUpdate": False,
                    "snapshot": {"messageId": "m0", "trackedFileBackups": {}, "timestamp": f"{d}00:00.000Z"},
                },
                claude(
                    s1,
                    f"{d}00:01.000Z",
                    "user",
                    message={
                        "role": "user",
                        "content": "The login form accepts empty passwords. Find out why and fix it."
                        "<system-reminder>Todo list is empty.</system-reminder>",
                    },
                ),
                msg(
                    s1,
                    f"{d}00:04.000Z",
                    "a1",
                    [{"type": "thinking", "thinking": "Look at the validator.", "signature": ""}],
                    8,
                ),
                msg(s1, f"{d}00:05.000Z", "a1", [{"type": "text", "text": "Let me look at the form validation."}], 20),
                msg(
                    s1,
                    f"{d}00:06.000Z",
                    "a1",
                    [
                        {
                            "type": "tool_use",
                            "id": "toolu_01",
                            "name": "Bash",
                            "input": {"command": "grep -rn password src/forms"},
                        }
                    ],
                    61,
                ),
                claude(
                    s1,
                    f"{d}00:07.000Z",
                    "user",
                    toolUseResult={"stdout": "src/forms/login.ts:14", "stderr": ""},
                    message={
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "toolu_01",
                                "content": "src/forms/login.ts:14: if (password) {",
                                "is_error": False,
                            }
                        ],
                    },
                ),
                msg(
                    s1,
                    f"{d}00:09.000Z",
                    "a2",
                    [
                        {
                            "type": "text",
                            "text": "An empty string is falsy, but the check "
                            "runs on the untrimmed value. I'll fix it and ask a subagent to add "
                            "tests.",
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_02",
                            "name": "Task",
                            "input": {
                                "description": "tests",
                                "prompt": "Write tests for login.",
                                "subagent_type": "general-purpose",
                            },
                        },
                    ],
                    140,
                ),
                claude(
                    s1,
                    f"{d}01:30.000Z",
                    "user",
                    toolUseResult={"agentId": "a7c41d2", "status": "completed"},
                    message={
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "Added 3 tests; all pass."}
                        ],
                    },
                ),
                claude(
                    s1,
                    f"{d}02:00.000Z",
                    "user",
                    isMeta=True,
                    message={
                        "role": "user",
                        "content": "<local-command-caveat>Caveat: The messages below were generated by the user "
                        "while running local commands.</local-command-caveat>",
                    },
                ),
                claude(
                    s1,
                    f"{d}02:01.000Z",
                    "user",
                    message={
                        "role": "user",
                        "content": "<command-message>review</command-message>\n<command-name>/review</command-name>\n"
                        "<command-args>src/forms</command-args>",
                    },
                ),
                claude(
                    s1,
                    f"{d}02:01.500Z",
                    "user",
                    isMeta=True,
                    message={
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Review the code in src/forms for bugs (expanded command prompt)."}
                        ],
                    },
                ),
                msg(s1, f"{d}02:20.000Z", "a3", [{"type": "text", "text": "Review done: no other issues."}], 30),
                claude(s1, f"{d}02:30.000Z", "progress", data={"type": "hook_progress", "hookEvent": "Stop"}),
            ]
        ),
    )
    sub = root / s1 / "subagents" / "agent-a7c41d2.jsonl"
    write(
        sub,
        jl(
            [
                claude(
                    s1,
                    f"{d}00:10.000Z",
                    "user",
                    isSidechain=True,
                    agentId="a7c41d2",
                    message={"role": "user", "content": "Write tests for login."},
                ),
                msg(
                    s1,
                    f"{d}00:40.000Z",
                    "s1",
                    [{"type": "text", "text": "Added 3 tests; all pass."}],
                    90,
                    isSidechain=True,
                    agentId="a7c41d2",
                ),
            ]
        ),
    )
    s2 = "7a2e9b4c-1d2f-4e3a-8b5c-6d7e8f901202"
    d2 = "2026-03-04T15:"
    write(
        root / f"{s2}.jsonl",
        jl(
            [
                claude(s2, f"{d2}00:00.000Z", "user", message={"role": "user", "content": "Refactor the router."}),
                msg(s2, f"{d2}01:00.000Z", "b1", [{"type": "text", "text": "Refactored into three modules."}], 400),
                claude(
                    s2,
                    f"{d2}30:00.000Z",
                    "system",
                    subtype="compact_boundary",
                    content="Conversation compacted",
                    compactMetadata={"trigger": "auto", "preTokens": 170251},
                ),
                claude(
                    s2,
                    f"{d2}30:01.000Z",
                    "user",
                    isCompactSummary=True,
                    isVisibleInTranscriptOnly=True,
                    message={
                        "role": "user",
                        "content": "This session is being continued from a previous "
                        "conversation that ran out of context. The summary below covers the router refactor.",
                    },
                ),
                claude(s2, f"{d2}31:00.000Z", "user", message={"role": "user", "content": "Now update the docs."}),
                msg(s2, f"{d2}32:00.000Z", "b2", [{"type": "text", "text": "Docs updated."}], 50),
            ]
        ),
    )
    s3 = "9c3d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e03"
    write(
        root / f"{s3}.jsonl",
        jl(
            [
                claude(s3, "2026-03-05T08:00:00.000Z", "user", message={"role": "user", "content": "hello"}),
                '{"type":"pr-link","prNu{"parentUuid":null,"type":"user"}',
                msg(s3, "2026-03-05T08:00:05.000Z", "c1", [{"type": "text", "text": "hi"}], 3),
            ]
        ),
    )
    write(
        root / "1e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a04.jsonl",
        jl([{"type": "summary", "summary": "Old title", "leafUuid": "elsewhere"}]),
    )


def codex_session() -> None:
    thread = "019e1695-0522-7c83-8b39-0dd379793f81"
    day = "2026-05-11"

    def env(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": f"{day}T11:26:{second:02d}.000Z", "type": kind, "payload": payload}

    agents = f"# AGENTS.md instructions for {CWD}\n\n<INSTRUCTIONS>Use pnpm.</INSTRUCTIONS>"
    envctx = f"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>zsh</shell>\n</environment_context>"
    total = {
        "input_tokens": 9000,
        "cached_input_tokens": 6000,
        "output_tokens": 300,
        "reasoning_output_tokens": 120,
        "total_tokens": 9300,
    }
    records = [
        env(
            0,
            "session_meta",
            {
                "id": thread,
                "timestamp": f"{day}T11:26:00.000Z",
                "cwd": CWD,
                "originator": "codex_cli_rs",
                "cli_version": "0.125.0",
                "source": "cli",
                "model_provider": "openai",
                "git": {"branch": "main"},
            },
        ),
        env(
            1,
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "<permissions instructions>..."}],
            },
        ),
        env(
            1,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": agents}, {"type": "input_text", "text": envctx}],
            },
        ),
        env(2, "turn_context", {"turn_id": "019e1695-0600-7000-8000-000000000001", "cwd": CWD, "model": "gpt-5.4"}),
        env(2, "event_msg", {"type": "user_message", "message": "Why does `pnpm test` fail on CI only?"}),
        env(
            2,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Why does `pnpm test` fail on CI only?"}],
            },
        ),
        env(3, "response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"}),
        env(
            4,
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "call_1",
                "arguments": json.dumps({"command": ["cat", ".github/workflows/ci.yml"]}),
            },
        ),
        env(
            5,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": json.dumps({"output": "node-version: 18", "metadata": {"exit_code": 0}}),
            },
        ),
        env(
            6,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "CI runs Node 18; the tests use a Node 20 API. Bump the CI version.",
                    }
                ],
            },
        ),
        env(6, "event_msg", {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": total}}),
    ]
    write(HOME / ".codex" / "sessions" / "2026" / "05" / "11" / f"rollout-{day}T11-26-00-{thread}.jsonl", jl(records))


def grok_session() -> None:
    sid = "019f6851-7ec4-7ef0-97d3-03f3eee38701"
    folder = HOME / ".grok" / "sessions" / "%2Fhome%2Fdev%2Fwebapp" / sid
    write(
        folder / "chat_history.jsonl",
        jl(
            [
                {"type": "system", "content": "You are Grok, a CLI coding assistant."},
                {
                    "type": "user",
                    "content": [{"type": "text", "text": "<user_info>OS Version: linux</user_info>"}],
                    "synthetic_reason": "environment_context",
                },
                {
                    "type": "user",
                    "content": [{"type": "text", "text": "What does src/main.ts print?"}],
                    "prompt_index": 0,
                },
                {
                    "type": "assistant",
                    "content": "Let me read it.",
                    "model_id": "grok-4.5",
                    "tool_calls": [{"id": "call-1", "name": "read_file", "arguments": '{"target_file":"src/main.ts"}'}],
                },
                {"type": "tool_result", "tool_call_id": "call-1", "content": "console.log('ready')"},
                {"type": "assistant", "content": "It prints `ready`.", "model_id": "grok-4.5", "tool_calls": []},
            ]
        ),
    )
    write(
        folder / "summary.json",
        json.dumps(
            {
                "info": {"id": sid, "cwd": CWD},
                "created_at": "2026-07-31T10:13:27.574131Z",
                "updated_at": "2026-07-31T10:15:02.118940Z",
                "current_model_id": "grok-4.5",
                "generated_title": "What src/main.ts prints",
                "chat_format_version": 1,
            },
            indent=1,
        ),
    )


def aider_session() -> None:
    """Aider's history in the project folder itself (docs/agents/aider.md): one run, a command, a prompt of two lines,
    a reply with its usage report; aider's own lines end with two spaces. Four folders below the sample home, so that
    a checkout of this project in a home folder (`~/transcripts/data/sample/home/…` is eight deep) never has its
    sample found by a real run's walk of the home (five deep)."""
    hard = "  "
    write(
        HOME / "src" / "github.com" / "dev" / "webapp" / ".aider.chat.history.md",
        "\n# aider chat started at 2026-07-31 11:02:10\n\n"
        f"> Aider v0.86.1{hard}\n"
        f"> Main model: anthropic/claude-sonnet-4-5 with diff edit format, infinite output{hard}\n"
        f"> Git repo: .git with 24 files{hard}\n"
        f"\n#### /add src/main.ts{hard}\n"
        f"> Added src/main.ts to the chat{hard}\n"
        f"\n#### make it print the version too{hard}\n#### from package.json{hard}\n"
        "\nsrc/main.ts\n```typescript\n<<<<<<< SEARCH\nconsole.log('ready')\n=======\n"
        "console.log('ready', require('../package.json').version)\n>>>>>>> REPLACE\n```\n\n"
        f"> Tokens: 3.1k sent, 2.8k cache hit, 64 received. Cost: $0.0031 message, $0.0031 session.{hard}\n"
        f"> Applied edit to src/main.ts{hard}\n",
    )


def cursor_session() -> None:
    sid = "5b0e9d2c-6a1f-4c3e-8d7b-2f4a6c8e0b13"
    folder = HOME / ".cursor" / "projects" / "home-dev-webapp" / "agent-transcripts" / sid

    def row(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "message": {"content": list(blocks)}}

    write(
        folder / f"{sid}.jsonl",
        jl(
            [
                row(
                    "user",
                    {
                        "type": "text",
                        "text": "<timestamp>Friday, Jul 31, 2026, 1:20 PM (UTC+3)</timestamp>\n<user_query>\n"
                        "Which port does the dev server listen on?\n</user_query>",
                    },
                ),
                row("assistant", {"type": "text", "text": "[REDACTED]"}),
                row(
                    "assistant",
                    {"type": "text", "text": "Checking the config.\n\n[REDACTED]"},
                    {"type": "tool_use", "name": "Grep", "input": {"path": CWD, "pattern": "port"}},
                ),
                row("assistant", {"type": "text", "text": "Port 5173, set in vite.config.ts.\n\n[REDACTED]"}),
                {"type": "turn_ended", "status": "success"},
            ]
        ),
    )
    write(HOME / ".cursor" / "projects" / "home-dev-webapp" / "worker.log", "worker started\n")


def gemini_session() -> None:
    chats = HOME / ".gemini" / "tmp" / "0b7dfb1274ee51b336813b17f2ddab1f56b6591f723e7314126bbd502c69e9c9" / "chats"
    write(
        chats / "session-2026-01-16T18-34-3739ef95.json",
        json.dumps(
            {
                "sessionId": "3739ef95-1c2d-4e5f-8a9b-0c1d2e3f4a05",
                "projectHash": "0b7dfb12",
                "kind": "main",
                "startTime": "2026-01-16T18:34:00.000Z",
                "lastUpdated": "2026-01-16T18:35:10.000Z",
                "messages": [
                    {"id": "m1", "timestamp": "2026-01-16T18:34:01.000Z", "type": "user", "content": "List the TODOs."},
                    {
                        "id": "m2",
                        "timestamp": "2026-01-16T18:34:05.000Z",
                        "type": "gemini",
                        "model": "gemini-2.5-pro",
                        "content": "There are two TODOs, both in src/api.ts.",
                        "tokens": {
                            "input": 5200,
                            "output": 40,
                            "cached": 4000,
                            "thoughts": 12,
                            "tool": 0,
                            "total": 5252,
                        },
                        "toolCalls": [
                            {
                                "id": "grep-1",
                                "name": "search_file_content",
                                "args": {"pattern": "TODO"},
                                "status": "success",
                                "timestamp": "2026-01-16T18:34:03.000Z",
                                "result": [
                                    {
                                        "functionResponse": {
                                            "id": "grep-1",
                                            "name": "search_file_content",
                                            "response": {"output": "src/api.ts:3: TODO"},
                                        }
                                    }
                                ],
                            }
                        ],
                    },
                    {"id": "m3", "timestamp": "2026-01-16T18:35:10.000Z", "type": "info", "content": "Session saved."},
                ],
            },
            indent=1,
        ),
    )


def opencode_session() -> None:
    storage = HOME / ".local" / "share" / "opencode" / "storage"
    sid, user, asst = "ses_sample0001", "msg_sample0001", "msg_sample0002"
    write(
        storage / "session" / "global" / f"{sid}.json",
        json.dumps(
            {
                "id": sid,
                "version": "1.1.0",
                "title": "Rename a function",
                "directory": CWD,
                "time": {"created": 1767000000000, "updated": 1767000060000},
            }
        ),
    )
    write(
        storage / "message" / sid / f"{user}.json",
        json.dumps({"id": user, "sessionID": sid, "role": "user", "time": {"created": 1767000000000}}),
    )
    write(
        storage / "message" / sid / f"{asst}.json",
        json.dumps(
            {
                "id": asst,
                "sessionID": sid,
                "role": "assistant",
                "modelID": "claude-sonnet-4-5",
                "providerID": "anthropic",
                "time": {"created": 1767000005000, "completed": 1767000060000},
                "tokens": {"input": 900, "output": 120, "reasoning": 0, "cache": {"read": 3000, "write": 0}},
                "cost": 0.004,
            }
        ),
    )
    write(
        storage / "part" / user / "prt_sample0001.json",
        json.dumps(
            {
                "id": "prt_sample0001",
                "sessionID": sid,
                "messageID": user,
                "type": "text",
                "text": "Rename getUser to fetchUser everywhere.",
            }
        ),
    )
    write(
        storage / "part" / asst / "prt_sample0002.json",
        json.dumps(
            {"id": "prt_sample0002", "sessionID": sid, "messageID": asst, "type": "text", "text": "Renamed in 4 files."}
        ),
    )


def chatgpt_export() -> None:
    def node(cid: str, i: int, parent: str, role: str, text: str) -> dict[str, Any]:
        return {
            "id": f"{cid}-{i}",
            "parent": parent,
            "children": [],
            "message": {
                "id": f"{cid}-{i}",
                "author": {"role": role},
                "create_time": 1700000000.0 + 60 * i,
                "recipient": "all",
                "content": {"content_type": "text", "parts": [text]},
                "metadata": {"model_slug": "gpt-4o"},
            },
        }

    convs = []
    for cid, texts in (
        ("6a1b2c3d-0000-4000-8000-00000000c001", ["How do I profile Python?", "Use cProfile."]),
        ("6a1b2c3d-0000-4000-8000-00000000c002", ["Name for a cat?", "Miso."]),
    ):
        mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for i, text in enumerate(texts):
            n = node(cid, i, parent, "user" if i % 2 == 0 else "assistant", text)
            mapping[parent]["children"].append(n["id"])
            mapping[n["id"]] = n
            parent = n["id"]
        convs.append(
            {
                "id": cid,
                "conversation_id": cid,
                "title": texts[0],
                "create_time": 1700000000.0,
                "update_time": 1700000060.0,
                "mapping": mapping,
                "current_node": parent,
                "default_model_slug": "gpt-4o",
            }
        )
    write(OUT / "chatgpt" / "conversations.json", json.dumps(convs))


def main() -> None:
    shutil.rmtree(HOME, ignore_errors=True)
    shutil.rmtree(OUT / "chatgpt", ignore_errors=True)
    claude_sessions()
    codex_session()
    grok_session()
    gemini_session()
    opencode_session()
    chatgpt_export()
    cursor_session()
    aider_session()
    old = 1767225600  # 2026-01-01: the sample is settled (no file looks like it is being written)
    for path in OUT.rglob("*"):
        os.utime(path, (old, old))


if __name__ == "__main__":
    main()
