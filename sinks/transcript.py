"""One session as something to read: Markdown (for models and export), plain text (a terminal), HTML (one
self-contained page), JSON. Tool calls are folded to one line each (an HTML `<details>` a click opens); links to
subagents, a parent and compactions are marked where they belong.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import Any

from sinks.query import jsonable
from sinks.sessions import Session, Step, ToolCall

CALL_CHARS = 160  # of a tool call's input, and of its output, in a folded line
LINK_WORDS = {  # what the other session is to this one, by kind and direction of the link
    ("subagent", "to"): "subagent of",
    ("subagent", "from"): "subagent",
    ("compaction", "to"): "compaction of",
    ("compaction", "from"): "compacted by",
    ("resume", "to"): "resumes",
    ("resume", "from"): "resumed by",
    ("fork", "to"): "fork of",
    ("fork", "from"): "forked as",
}


def _time(ts: datetime | None, *, day: bool = True) -> str:
    if ts is None:
        return ""
    return ts.strftime("%Y-%m-%d %H:%M:%S" if day else "%H:%M:%S")


def _clip(text: str | None, chars: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def _outcome(call: ToolCall) -> str:
    if call.is_error:
        return "error"
    if call.is_error is None and call.output is None:
        return "no result"
    return "ok"


def fold(call: ToolCall) -> str:
    """A tool call in one line: name, input, outcome, the start of its output, the subagent it started."""
    line = f"{call.name} {_clip(call.input, CALL_CHARS)} → {_outcome(call)}"
    if call.output:
        line += f": {_clip(call.output, CALL_CHARS)}"
    if call.spawned_session_id:
        line += f" ⇒ subagent {call.spawned_session_id}"
    return line


def links(session: Session) -> list[str]:
    """`subagent of claude-...`, `compacted by ...`: the session's lineage as lines."""
    return [f"{LINK_WORDS.get((k['kind'], k['direction']), k['kind'])} {k['session_id']}" for k in session.links]


def _header(session: Session, zone: str) -> list[tuple[str, str]]:
    m = session.meta
    rows = [
        ("session", str(m["session_id"])),
        ("agent", str(m["agent"])),
        ("project", f"{m['project']}" + (f" ({m['cwd']})" if m.get("cwd") else "")),
        ("time", f"{_time(m['started_at'])} → {_time(m['ended_at'])} ({zone})"),
    ]
    if m.get("git_branch"):
        rows.append(("branch", str(m["git_branch"])))
    if m.get("models"):
        rows.append(("models", ", ".join(m["models"])))
    shown = f"{session.first}-{session.last} of {session.turn_count}" if session.turn_count else "0"
    rows.append(("turns", shown + f", {m['tool_call_count']} tool calls"))
    rows.extend(("link", line) for line in links(session))
    return rows


def _title(session: Session) -> str:
    return str(session.meta.get("title") or session.meta["session_id"])


def _step_head(step: Step) -> str:
    parts = [str(step.number), step.role or "tool calls"]
    if step.timestamp is not None:
        parts.append(_time(step.timestamp))
    if step.model:
        parts.append(step.model)
    return " · ".join(parts)


def markdown(session: Session, zone: str, *, max_bytes: int | None = None) -> tuple[str, int | None]:
    """The session as Markdown, and None, or (with about `max_bytes` of UTF-8 reached) the number of the first turn
    left out, so a caller can ask for the rest from there. A single turn longer than the budget is cut, saying so."""
    out = [f"# {_title(session)}", ""]
    out += [f"- {k}: {v}" for k, v in _header(session, zone)]
    out.append("")
    used = sum(_size(line) + 1 for line in out)
    for n, step in enumerate(session.steps):
        block = _markdown_step(step)
        size = _size(block)
        if max_bytes is not None and used + size > max_bytes:
            if n == 0:  # never nothing: the first step, cut (characters: at most 4 bytes each)
                room = max(200, (max_bytes - used - 200) // 4)
                out.append(block[:room] + f"\n\n[… cut: {len(block) - room} more characters of this turn]\n")
                rest = session.steps[1:]
            else:
                rest = session.steps[n:]
            following = next((s.number for s in rest if s.role is not None), None)
            if following is not None:
                return "\n".join(out), following
            break
        out.append(block)
        used += size + 1
    return "\n".join(out), None


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _markdown_step(step: Step) -> str:
    lines = [f"## {_step_head(step)}", ""]
    if step.text:
        lines += [step.text, ""]
    for call in step.calls:
        lines.append(f"> tool: {fold(call)}")
    if step.calls:
        lines.append("")
    return "\n".join(lines)


def text(session: Session, zone: str) -> str:
    """The session for a terminal: a header, then each turn under a rule with its number, role and time."""
    out = [_title(session)]
    out += [f"  {k:<8} {v}" for k, v in _header(session, zone)]
    for step in session.steps:
        out.append("")
        out.append(f"── {_step_head(step)} " + "─" * max(3, 60 - len(_step_head(step))))
        if step.text:
            out.append(step.text)
        out += [f"  ▸ {fold(call)}" for call in step.calls]
    return "\n".join(out) + "\n"


def as_json(session: Session, zone: str) -> dict[str, Any]:
    """The session as JSON-ready data: its row, its links, and its turns with their tool calls (whole)."""
    return {
        "session": {k: jsonable(v) for k, v in session.meta.items()},
        "zone": zone,
        "turn_count": session.turn_count,
        "links": session.links,
        "steps": [
            {
                "number": s.number,
                "turn_id": s.turn_id,
                "role": s.role,
                "timestamp": jsonable(s.timestamp),
                "model": s.model,
                "text": s.text,
                "tool_calls": [
                    {
                        "name": c.name,
                        "input": c.input,
                        "output": c.output,
                        "is_error": c.is_error,
                        "spawned_session_id": c.spawned_session_id,
                    }
                    for c in s.calls
                ],
            }
            for s in session.steps
        ],
    }


def json_text(session: Session, zone: str) -> str:
    return json.dumps(as_json(session, zone), ensure_ascii=False, indent=1) + "\n"


_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d2430}
h1{font-size:1.4rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;color:#4a5565}
dt{font-weight:600}.step{border-top:1px solid #dde3ea;padding:.6rem 0}.head{font-size:.85rem;color:#5a6675}
.user .who{color:#0b6bcb}.assistant .who{color:#3a8a2e}.text{white-space:pre-wrap;overflow-wrap:anywhere}
details{font-size:.85rem;margin:.2rem 0 .2rem 1rem}summary{cursor:pointer;color:#5a6675}
details pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f6f8;padding:.4rem;margin:.2rem 0}
.error summary{color:#b42318}.link{color:#7a4bc2}
"""


def html_page(session: Session, zone: str) -> str:
    """The session as one HTML page with no outside reference (styles inline, no script): each turn with its role
    and time, each tool call a `<details>` with its input and output."""
    e = html.escape
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{e(_title(session))}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(_title(session))}</h1><dl>",
        *(f"<dt>{e(k)}</dt><dd{' class=link' if k == 'link' else ''}>{e(v)}</dd>" for k, v in _header(session, zone)),
        "</dl>",
    ]
    for step in session.steps:
        role = step.role or "tools"
        parts.append(f'<section class="step {role}" data-turn="{step.number}" data-role="{e(role)}">')
        parts.append(f"<div class=head><span class=who>{e(_step_head(step))}</span></div>")
        if step.text:
            parts.append(f"<div class=text>{e(step.text)}</div>")
        for call in step.calls:
            summary = e(f"{call.name} → {_outcome(call)}")
            if call.spawned_session_id:
                summary += f" <span class=link>⇒ subagent {e(call.spawned_session_id)}</span>"
            parts.append(
                f'<details class="call{" error" if call.is_error else ""}"><summary>{summary}</summary>'
                f"<pre>{e(call.input or '')}</pre><pre>{e(call.output or '')}</pre></details>"
            )
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
