"""Fake Cline / Roo Code task folders, shaped like docs/agents/cline.md.

`~/.config/Code/User/globalStorage/<extension id>/tasks/<task id>/`:
- `api_conversation_history.json` (the unit, one line of JSON): a `<task>` prompt with `environment_details`,
  assistant messages with `thinking`, text and `tool_use` blocks (`modelInfo`, `metrics`, `ts`), tool results sent
  back as `[tool for 'x'] Result:` user text, `<feedback>` / `<answer>` replies;
- `ui_messages.json`: the UI copy, with one `api_req_started` row per request (tokens and cost, the usage rows),
  partial streaming rows and checkpoints;
- `task_metadata.json` (Cline) or `history_item.json` (Roo, with `parentTaskId` / `childIds` for a delegated child);
- a `focus_chain_taskid_<id>.md` the ETL must not read.
Cline task ids are the creation epoch ms; Roo's are uuidv7.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from bench.material import Material, Project, rand_uuid7
from bench.output import Written, set_mtime

MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "gpt-5-codex")
TOOLS = ("read_file", "execute_command", "search_files", "replace_in_file", "list_files")
CLINE, ROO = "saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline"


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


class Task:
    def __init__(
        self,
        material: Material,
        rng: random.Random,
        home: Path,
        project: Project,
        start_ms: int,
        target: int,
        roo: bool,
    ) -> None:
        self.m, self.rng, self.project, self.target, self.roo = material, rng, project, target, roo
        self.id = rand_uuid7(rng, start_ms) if roo else str(start_ms)
        self.now = start_ms
        self.model = rng.choice(MODELS)
        storage = home / ".config" / "Code" / "User" / "globalStorage"
        self.folder = storage / (ROO if roo else CLINE) / "tasks" / self.id
        self.api: list[dict[str, Any]] = []
        self.ui: list[dict[str, Any]] = []
        self.size = 0
        self.children: list[str] = []
        self.parent: str | None = None

    def tick(self, low: float, high: float) -> int:
        self.now += int(self.rng.uniform(low, high) * 1000)
        return self.now

    def env(self) -> str:
        return (
            "<environment_details>\n# Visual Studio Code Visible Files\n"
            f"{self.project.path(self.rng)}\n\n# Current Time\n(elided)\n\n"
            f"# Current Working Directory ({self.project.cwd}) Files\nREADME.md\nsrc/\n\n# Current Mode\nACT MODE\n"
            "</environment_details>"
        )

    def add(self, message: dict[str, Any]) -> None:
        self.api.append(message)
        self.size += len(json.dumps(message))

    def ui_row(self, kind: str, sub: str, text: str | None = None, **extra: Any) -> None:
        row: dict[str, Any] = {"ts": self.now, "type": kind, kind: sub, "conversationHistoryIndex": len(self.api) - 1}
        if text is not None:
            row["text"] = text
        row.update(extra)
        self.ui.append(row)
        self.size += len(json.dumps(row))

    def request(self) -> None:
        rng = self.rng
        tokens = {"tokensIn": rng.randint(3, 5000), "tokensOut": rng.randint(20, 2000)}
        tokens |= {"cacheWrites": rng.randint(0, 3000), "cacheReads": rng.randint(0, 80_000)}
        cost = round(tokens["tokensOut"] * 15e-6 + tokens["tokensIn"] * 3e-6 + tokens["cacheReads"] * 3e-7, 6)
        self.ui_row("say", "api_req_started", json.dumps({"request": "(elided)", **tokens, "cost": cost}))

    def write(self) -> Written:
        rng, m = self.rng, self.m
        prompt = " ".join(rng.choices(m.sentences, k=rng.choice((1, 2, 4))))
        self.ui_row("say", "text", prompt)
        self.add({"role": "user", "ts": self.now, "content": [_text(f"<task>\n{prompt}\n</task>"), _text(self.env())]})
        while self.size < self.target or len(self.api) < 4:
            self.exchange()
        self.reply(m.markdown_answer(rng, rng.choice((200, 800, 2500)), self.project.lang), [])
        written = Written("cline", self.id, self.folder / "api_conversation_history.json")
        end = self.now
        written.bytes_sources += self.dump("api_conversation_history.json", self.api, end)
        written.bytes_sources += self.dump("ui_messages.json", self.ui, end)
        written.files += [self.folder / "api_conversation_history.json", self.folder / "ui_messages.json"]
        side = "history_item.json" if self.roo else "task_metadata.json"
        written.bytes_sources += self.dump(side, self.sidecar(), end)
        written.files.append(self.folder / side)
        focus = self.folder / f"focus_chain_taskid_{self.id}.md"
        focus.write_text("- [x] " + prompt[:60] + "\n", encoding="utf-8")
        set_mtime(focus, end)
        written.bytes_other += focus.stat().st_size
        return written

    def sidecar(self) -> dict[str, Any]:
        if self.roo:
            item: dict[str, Any] = {"id": self.id, "ts": self.now, "task": self.api[0]["content"][0]["text"][7:80]}
            item |= {"workspace": self.project.cwd, "mode": "code", "status": "completed"}
            if self.children:
                item["childIds"] = self.children
            if self.parent:
                item["parentTaskId"] = self.parent
            return item
        usage = [{"ts": self.api[0]["ts"], "model_id": self.model, "model_provider_id": "anthropic", "mode": "act"}]
        env = [
            {"ts": self.api[0]["ts"], "os_name": "linux", "host_name": "Visual Studio Code", "cline_version": "3.51.0"}
        ]
        return {"files_in_context": [], "model_usage": usage, "environment_history": env}

    def dump(self, name: str, value: Any, mtime: int) -> int:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        path.write_bytes(raw)
        set_mtime(path, mtime)
        return len(raw)

    def reply(self, text: str, calls: list[dict[str, Any]]) -> None:
        rng = self.rng
        self.tick(0.05, 1)
        self.request()
        self.tick(1, 40)
        self.ui_row("say", "text", text[:200], partial=True)
        content: list[dict[str, Any]] = [{"type": "thinking", "thinking": self.m.prose(rng, rng.randint(1, 4))}]
        if text:
            content.append(_text(text))
        content += calls
        info = {"modelId": self.model, "providerId": "anthropic", "mode": "act"}
        self.add({"role": "assistant", "ts": self.now, "modelInfo": info, "content": content})

    def exchange(self) -> None:
        rng, m = self.rng, self.m
        name = rng.choice(TOOLS)
        arg = self.project.path(rng) if name != "execute_command" else rng.choice(m.shell)[:60]
        call = {"type": "tool_use", "id": f"toolu_{rng.getrandbits(64):016x}", "name": name, "input": {"path": arg}}
        self.reply(rng.choice(("", "", m.prose(rng, 2))), [call])
        self.ui_row("say", "tool", json.dumps({"tool": name, "path": arg}))
        self.tick(0.2, 20)
        if name == "read_file":
            out = m.numbered(m.source_file(rng, self.project.lang, rng.randint(10, 200)))
        else:
            out = m.shell_output(rng, rng.randint(1, 60))
        blocks = [_text(f"[{name} for '{arg}'] Result:\n{out}")]
        if rng.random() < 0.1:
            words = rng.choice(m.sentences)
            self.ui_row("say", "user_feedback", words)
            blocks.append(_text(f"<feedback>\n{words}\n</feedback>"))
        self.add({"role": "user", "ts": self.now, "content": [*blocks, _text(self.env())]})
        self.ui_row("say", "checkpoint_created")


def cline_session(
    material: Material,
    rng: random.Random,
    home: Path,
    project: Project,
    start_ms: int,
    target: int,
    *,
    roo: bool = False,
    with_child: bool = False,
) -> list[Written]:
    """One task folder (Cline, or Roo with `roo`); with `with_child` a Roo parent delegating to a child task."""
    task = Task(material, rng, home, project, start_ms, target, roo or with_child)
    if not with_child:
        return [task.write()]
    child = Task(material, rng, home, project, start_ms + 2_000, max(target // 3, 5_000), True)
    task.children.append(child.id)
    child.parent = task.id
    return [task.write(), child.write()]
