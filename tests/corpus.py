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
