"""Fake Aider chat histories, shaped like docs/agents/aider.md.

Aider appends every run to `.aider.chat.history.md` in the repository it works in: one session = one run, from its
`# aider chat started at` header (local time) to the next. A run writes the startup banner (`> Aider v…`,
`> Main model: …`), the person's prompts as `####` lines (some of several lines, some `/add` commands), the model's
replies (Markdown, SEARCH/REPLACE edits, sometimes `<thinking-content-…>` reasoning), and aider's own `>` lines after
each reply (`> Tokens: … Cost: …`, `> Applied edit to …`, `> Commit …`). Every line aider writes itself ends with two
spaces (a Markdown hard break).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from bench.material import Material, Project
from bench.output import Written, set_mtime

HISTORY = ".aider.chat.history.md"
VERSIONS = ("0.55.0", "0.72.3", "0.82.1", "0.86.1", "0.86.2")
MODELS = ("anthropic/claude-sonnet-4-5", "openai/gpt-4.1", "gemini/gemini-2.5-pro", "deepseek/deepseek-chat")
REASONING = "thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b"


def _aider(line: str) -> str:
    return f"{line}  \n"


def _tokens(rng: random.Random) -> str:
    sent = rng.randint(800, 60_000)
    received = rng.randint(20, 4_000)
    cost = (sent * 3 + received * 15) / 1_000_000
    shown = f"{sent / 1000:.1f}k" if sent < 10_000 else f"{round(sent / 1000)}k"
    return _aider(f"> Tokens: {shown} sent, {received} received. Cost: ${cost:.4f} message, ${cost * 2:.4f} session.")


def aider_session(
    material: Material, rng: random.Random, home: Path, project: Project, start_ms: int, target: int
) -> list[Written]:
    """Append one run of about `target` bytes to the project's history file (created with its first run). Its header
    is the start in UTC (a real header is the machine's local time; the bench reads with TZ unset, i.e. UTC)."""
    path = home / project.cwd.lstrip("/") / HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    started = datetime.fromtimestamp(start_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    version, model = rng.choice(VERSIONS), rng.choice(MODELS)
    parts = [f"\n# aider chat started at {started}\n\n"]
    parts += [
        _aider(f"> {project.home}/.local/bin/aider --model {model}"),
        _aider(f"> Aider v{version}"),
        _aider(f"> Main model: {model} with diff edit format"),
        _aider(f"> Git repo: .git with {len(project.files)} files"),
        _aider("> Repo-map: using 4096 tokens, auto refresh"),
    ]
    size = sum(len(p) for p in parts)
    while size < target:
        parts.append("\n" + _aider(f"#### /add {rng.choice(project.files)}"))
        parts.append(_aider(f"> Added {rng.choice(project.files)} to the chat"))
        lines = material.prose(rng, rng.randint(1, 6)).split("\n")
        parts.append("\n" + "".join(_aider(f"#### {line}") for line in lines))
        reply = material.markdown_answer(rng, rng.randint(200, 3_000), project.lang)
        if rng.random() < 0.2:
            reply = f"<{REASONING}>\n\n{material.prose(rng, 4)}\n\n</{REASONING}>\n\n{reply}"
        parts.append(f"\n{reply}\n\n")
        parts.append(_tokens(rng))
        parts.append(_aider(f"> Applied edit to {rng.choice(project.files)}"))
        size = sum(len(p.encode()) for p in parts)
    raw = "".join(parts).encode()
    with path.open("ab") as handle:
        handle.write(raw)
    set_mtime(path, start_ms + 60_000)
    native = started.replace("-", "").replace(":", "").replace(" ", "T")
    return [Written("aider", native, path, bytes_sources=len(raw), files=[path] if created else [])]
