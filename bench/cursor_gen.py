"""Fake Cursor agent transcripts, shaped like docs/agents/cursor.md.

`~/.cursor/projects/<encoded cwd>/agent-transcripts/<uuid>/<uuid>.jsonl` (one in twelve flat, `<uuid>.jsonl`):
rows with a top-level `role` and no envelope, no ids, times, model or usage. A prompt is
`<timestamp>Sunday, Sep 20, 2026, 12:31 AM (UTC+3)</timestamp>\\n<user_query>\\n…\\n</user_query>` (sometimes with a
`<context>` block after it); a reply is many assistant rows, a third of them only `[REDACTED]`, with `tool_use`
blocks that carry no id and no result; `{"type":"turn_ended","status":…}` closes a turn. A few sessions delegate
to a subagent, written as `<parent>/subagents/<child>.jsonl`. `terminals/` and `worker.log` sit beside, unread.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.material import Material, Project, rand_uuid4
from bench.output import JsonlOut, Written, set_mtime

OFFSETS = (0, 1, 2, 3, -4, -5, -7, 8, 9)  # whole hours: the half-hour form of the tag is not confirmed
TOOLS = ("Read", "Grep", "Glob", "Shell", "StrReplace", "Write")


def encoded(cwd: str) -> str:
    """The project folder's name: the absolute path with `/` and `.` as `-`, no leading dash."""
    return cwd.strip("/").replace("/", "-").replace(".", "-")


def stamp(ms: int, hours: int) -> str:
    """A `<timestamp>` tag: the local wall clock at `hours` from UTC, to the minute."""
    local = datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(timezone(timedelta(hours=hours)))
    zone = "UTC" if hours == 0 else f"UTC{hours:+d}"
    clock = f"{local.hour % 12 or 12}:{local.minute:02d} {'AM' if local.hour < 12 else 'PM'}"
    return f"<timestamp>{local:%A, %b} {local.day}, {local.year}, {clock} ({zone})</timestamp>"


class CursorSession:
    def __init__(
        self,
        material: Material,
        rng: random.Random,
        folder: Path,
        project: Project,
        start_ms: int,
        target: int,
        *,
        native: str | None = None,
        nested: bool = True,
    ) -> None:
        self.m, self.rng, self.project, self.target = material, rng, project, target
        self.now_ms = start_ms
        self.id = native or rand_uuid4(rng)
        self.hours = rng.choice(OFFSETS)
        self.path = folder / self.id / f"{self.id}.jsonl" if nested else folder / f"{self.id}.jsonl"
        self.out = JsonlOut(self.path)
        self.prompts = 0

    def row(self, role: str, *blocks: dict[str, Any]) -> None:
        self.out.add({"role": role, "message": {"content": list(blocks)}})

    def prompt(self, text: str) -> None:
        self.now_ms += int(self.rng.uniform(20, 900) * 1000)
        body = f"{stamp(self.now_ms, self.hours)}\n<user_query>\n{text}\n</user_query>"
        if self.rng.random() < 0.2:
            body += f"\n<context>\n<open_files>{self.project.path(self.rng)}</open_files>\n</context>"
        self.row("user", {"type": "text", "text": body})
        self.prompts += 1

    def reply(self) -> None:
        rng, m = self.rng, self.m
        for _ in range(rng.choice((0, 1, 2, 4, 7, 12))):
            blocks: list[dict[str, Any]] = [
                {"type": "text", "text": rng.choice(("[REDACTED]", "[REDACTED]", m.prose(rng, 1) + "\n\n[REDACTED]"))}
            ]
            for _ in range(rng.choice((0, 1, 1, 2))):
                name = rng.choice(TOOLS)
                if name == "Shell":
                    args: dict[str, Any] = {"command": rng.choice(m.shell)[:60], "description": m.prose(rng, 1)[:50]}
                elif name in ("Grep", "Glob"):
                    args = {"path": self.project.cwd, "pattern": rng.choice(m.idents)}
                elif name == "Write":
                    args = {"path": self.project.path(rng), "contents": "\n".join(m.source_file(rng, "python", 30))}
                else:
                    args = {"path": self.project.path(rng), "limit": rng.choice((40, 200))}
                blocks.append({"type": "tool_use", "name": name, "input": args})
            self.row("assistant", *blocks)
        answer = m.markdown_answer(rng, rng.choice((200, 800, 2500)), self.project.lang)
        self.row("assistant", {"type": "text", "text": answer + "\n\n[REDACTED]"})
        self.now_ms += int(rng.uniform(5, 300) * 1000)
        if rng.random() < 0.7:
            status = "success" if rng.random() < 0.95 else "error"
            marker: dict[str, Any] = {"type": "turn_ended", "status": status}
            if status == "error":
                marker["error"] = "User aborted request."
            self.out.add(marker)

    def write(self, first: str | None = None) -> Written:
        rng, m = self.rng, self.m
        while self.out.size < self.target or self.prompts == 0:
            self.prompt(
                first if first and not self.prompts else " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 3))))
            )
            self.reply()
        written = Written("cursor", self.id, self.path)
        written.bytes_sources = self.out.close(self.now_ms)
        written.files.append(self.path)
        return written


def cursor_session(
    material: Material,
    rng: random.Random,
    home: Path,
    project: Project,
    start_ms: int,
    target: int,
    *,
    with_child: bool = False,
) -> list[Written]:
    """One transcript (and, with `with_child`, a subagent in `<id>/subagents/`), plus unread companions."""
    base = home / ".cursor" / "projects" / encoded(project.cwd)
    folder = base / "agent-transcripts"
    nested = with_child or rng.random() >= 1 / 12
    session = CursorSession(material, rng, folder, project, start_ms, target, nested=nested)
    out = [session.write()]
    if with_child:
        child = CursorSession(
            material, rng, folder / session.id / "subagents", project, start_ms + 5_000, max(target // 3, 2_000),
            nested=False,
        )  # fmt: skip
        out.append(child.write(first="Find where " + rng.choice(material.idents) + " is defined and report back."))
    log = base / "worker.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"[{session.id}] worker started in {project.cwd}\n")
    set_mtime(log, session.now_ms)
    return out
