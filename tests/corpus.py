"""A tiny Claude Code home built in a temporary folder, for pipeline tests (the extractor's own tests go deeper)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROJECT = "-home-u-proj"


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"))


def claude_exchange(session: str, n: int, *, start_minute: int = 0, text: str = "question") -> list[str]:
    """`n` user/assistant exchanges of a Claude Code session, as JSONL lines."""
    lines = []
    for i in range(n):
        minute = start_minute + i
        ts = f"2026-03-01T10:{minute // 60:02d}:{minute % 60:02d}.000Z"
        base = {
            "sessionId": session,
            "cwd": "/home/u/proj",
            "version": "2.1.38",
            "gitBranch": "main",
            "isSidechain": False,
            "userType": "external",
            "timestamp": ts,
        }
        lines.append(
            _line(
                {
                    **base,
                    "type": "user",
                    "uuid": f"{session}-u{minute}",
                    "message": {"role": "user", "content": f"{text} {minute}"},
                }
            )
        )
        lines.append(
            _line(
                {
                    **base,
                    "type": "assistant",
                    "uuid": f"{session}-a{minute}",
                    "requestId": f"req{minute}",
                    "message": {
                        "id": f"msg_{session[:8]}_{minute}",
                        "role": "assistant",
                        "model": "claude-opus-4-6",
                        "type": "message",
                        "content": [{"type": "text", "text": f"answer {minute}"}],
                        "usage": {
                            "input_tokens": 10,
                            "output_tokens": 5,
                            "cache_read_input_tokens": 100,
                            "cache_creation_input_tokens": 1,
                        },
                    },
                }
            )
        )
    return lines


def write_session(home: Path, session: str, lines: list[str], *, append: bool = False) -> Path:
    path = home / ".claude" / "projects" / PROJECT / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return path


S1 = "aaaaaaaa-0000-4000-8000-000000000001"
S2 = "bbbbbbbb-0000-4000-8000-000000000002"
S3 = "cccccccc-0000-4000-8000-000000000003"


def small_home(home: Path) -> Path:
    """Three sessions: two good, one with a corrupt middle line (rejected)."""
    write_session(home, S1, claude_exchange(S1, 3))
    write_session(home, S2, claude_exchange(S2, 2, text="other"))
    bad = claude_exchange(S3, 2)
    bad.insert(1, '{"type":"user","broken')
    write_session(home, S3, bad)
    return home


def codex_rollout(home: Path, thread: str, n: int, *, day: str = "2026-05-11") -> Path:
    """A current-envelope Codex rollout with `n` exchanges and cumulative token counts."""
    ts = f"{day}T09:00:00.000Z"

    def env(kind: str, payload: dict[str, Any], second: int = 0) -> str:
        return _line({"timestamp": f"{day}T09:00:{second:02d}.000Z", "type": kind, "payload": payload})

    lines = [
        env(
            "session_meta",
            {
                "id": thread,
                "timestamp": ts,
                "cwd": "/home/u/proj",
                "originator": "codex_cli_rs",
                "cli_version": "0.125.0",
                "source": "cli",
                "git": {"branch": "main"},
            },
        )
    ]
    total = 0
    for i in range(n):
        lines.append(env("turn_context", {"turn_id": f"t{i}", "cwd": "/home/u/proj", "model": "gpt-5.4"}, i))
        lines.append(env("event_msg", {"type": "user_message", "message": f"codex question {i}"}, i))
        lines.append(
            env(
                "response_item",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"codex question {i}"}]},
                i,
            )
        )
        lines.append(
            env(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"codex answer {i}"}],
                },
                i,
            )
        )
        total += 100
        usage = {
            "input_tokens": total,
            "cached_input_tokens": total // 2,
            "output_tokens": total // 10,
            "reasoning_output_tokens": 0,
            "total_tokens": total + total // 10,
        }
        lines.append(
            env(
                "event_msg", {"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage}}, i
            )
        )
    y, m, d = day.split("-")
    path = home / ".codex" / "sessions" / y / m / d / f"rollout-{day}T09-00-00-{thread}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def grok_session(home: Path, session: str, n: int) -> Path:
    """A Grok Build session folder: chat_history.jsonl and summary.json."""
    folder = home / ".grok" / "sessions" / "%2Fhome%2Fu%2Fproj" / session
    folder.mkdir(parents=True, exist_ok=True)
    lines = [_line({"type": "system", "content": "You are Grok."})]
    for i in range(n):
        lines.append(
            _line({"type": "user", "content": [{"type": "text", "text": f"grok question {i}"}], "prompt_index": i})
        )
        lines.append(
            _line({"type": "assistant", "content": f"grok answer {i}", "tool_calls": [], "model_id": "grok-4.5"})
        )
    (folder / "chat_history.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    summary = {
        "info": {"id": session, "cwd": "/home/u/proj"},
        "created_at": "2026-07-31T10:13:27.574131Z",
        "updated_at": "2026-07-31T10:15:02.118940Z",
        "current_model_id": "grok-4.5",
        "generated_title": "grok test",
    }
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder


T1 = "019e1695-0522-7c83-8b39-0dd379793f80"
G1 = "019f6851-7ec4-7ef0-97d3-03f3eee38755"


def mixed_home(home: Path) -> Path:
    """Claude, Codex and Grok side by side, as a real home has them."""
    small_home(home)
    codex_rollout(home, T1, 3)
    grok_session(home, G1, 2)
    return home


def busy_home(home: Path, sessions: int = 1200) -> Path:
    """A Claude home with enough small sessions that a run is still going when a test interrupts or kills it."""
    import uuid

    project = home / ".claude" / "projects" / "-proj"
    project.mkdir(parents=True)
    for i in range(sessions):
        sid = str(uuid.UUID(int=i + 1))
        (project / f"{sid}.jsonl").write_text("".join(line + "\n" for line in claude_exchange(sid, 20)))
    return home
