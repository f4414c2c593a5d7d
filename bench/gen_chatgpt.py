"""Generate a deterministic, realistic ChatGPT export of a given size: one-line `conversations.json` (+ zip).

Usage: uv run python bench/gen_chatgpt.py --mb 500 --out DIR [--seed 7] [--zip]

Each conversation looks like a real export's (docs/agents/chatgpt.md "Conversations"): a root node, a hidden system
node, sometimes custom instructions, user turns (text or multimodal with an image), reasoning (`thoughts` +
`reasoning_recap`), commentary preambles, code sent to `python` with its `execution_output`, answers with citation
markers, and branches from regenerations and edits. The file is written streaming (never held whole in memory), as ONE
line. The same seed and size give the same bytes.
"""

from __future__ import annotations

import argparse
import random
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

WORDS = (  # noqa: SIM905 - a sentence reads better than a list of 80 quoted words
    "the a to of and in is it you that for on with this be as are can use data file function model error value "
    "python query table join index memory stream parse token export thread branch node parent child answer "
    "question please explain why how does work example test run result output input list dict string bytes "
    "schema parquet duckdb arrow polars prefect flow task retry cache limit bound offset chunk buffer scanner "
    "café naïve résumé 東京 データ 😀 ünïcödé"
).split()
MODELS = ("gpt-4o", "gpt-4o-mini", "o3", "gpt-5", "gpt-5-thinking", "gpt-4")


def _text(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    if rng.random() < 0.2:  # pasted code: quotes, backslashes and newlines to escape
        words.append('\n```python\nprint("a\\tb", {"k": [1, 2]})\n```\n')
    return " ".join(words)


class _Conversation:
    def __init__(self, rng: random.Random, start: float) -> None:
        self.rng = rng
        self.time = start
        self.mapping: dict[str, dict[str, Any]] = {}

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self) -> float:
        self.time += self.rng.uniform(1.0, 120.0)
        return round(self.time, 6)

    def add(self, parent: str | None, message: dict[str, Any] | None, node_id: str | None = None) -> str:
        nid = node_id or self.uid()
        self.mapping[nid] = {"id": nid, "message": message, "parent": parent, "children": []}
        if parent is not None:
            self.mapping[parent]["children"].append(nid)
        return nid

    def message(
        self,
        role: str,
        content: dict[str, Any],
        *,
        metadata: dict[str, Any] | None = None,
        recipient: str = "all",
        channel: str | None = None,
        name: str | None = None,
        timed: bool = True,
    ) -> dict[str, Any]:
        return {
            "id": self.uid(),
            "author": {"role": role, "name": name, "metadata": {}},
            "create_time": self.tick() if timed else None,
            "update_time": None,
            "content": content,
            "status": "finished_successfully",
            "end_turn": (role == "assistant" and recipient == "all") or None,
            "weight": 1.0 if timed else 0.0,
            "metadata": metadata or {},
            "recipient": recipient,
            "channel": channel,
        }

    def user(self, parent: str) -> str:
        rng = self.rng
        text = _text(rng, 5, 120)
        if rng.random() < 0.15:
            image = {
                "content_type": "image_asset_pointer",
                "asset_pointer": f"file-service://file-{self.uid()[:12]}",
                "size_bytes": rng.randint(10_000, 900_000),
                "width": 1024,
                "height": 768,
                "fovea": None,
                "metadata": None,
            }
            content: dict[str, Any] = {"content_type": "multimodal_text", "parts": [image, text]}
        else:
            content = {"content_type": "text", "parts": [text]}
        return self.add(parent, self.message("user", content, metadata={"request_id": self.uid()[:16]}))

    def answer(self, parent: str, model: str) -> str:
        rng = self.rng
        meta = {"model_slug": model, "finish_details": {"type": "stop"}, "parent_id": parent}
        node = parent
        if rng.random() < 0.3:  # a reasoning model: thoughts, then the recap
            thoughts = [
                {"summary": _text(rng, 2, 6), "content": _text(rng, 20, 150), "chunks": [], "finished": True}
                for _ in range(rng.randint(1, 3))
            ]
            node = self.add(node, self.message("assistant", {"content_type": "thoughts", "thoughts": thoughts}))
            recap = {"content_type": "reasoning_recap", "content": f"Thought for {rng.randint(2, 90)}s"}
            node = self.add(node, self.message("assistant", recap, metadata=meta))
        if rng.random() < 0.1:
            preamble = {"content_type": "text", "parts": [_text(rng, 5, 20)]}
            extra = {**meta, "is_thinking_preamble_message": True}
            node = self.add(node, self.message("assistant", preamble, metadata=extra, channel="commentary"))
        if rng.random() < 0.15:  # code sent to the python tool, and its output
            code = {"content_type": "code", "language": "unknown", "text": "import pandas as pd\n" + _text(rng, 5, 40)}
            node = self.add(node, self.message("assistant", code, metadata=meta, recipient="python"))
            status = "success" if rng.random() < 0.8 else "failed_with_in_kernel_exception"
            out = {"content_type": "execution_output", "text": _text(rng, 3, 60)}
            tool_meta = {"aggregate_result": {"status": status, "code": "", "messages": []}}
            node = self.add(node, self.message("tool", out, metadata=tool_meta, name="python"))
        text = _text(rng, 20, 600)
        if rng.random() < 0.2:
            text += " \ue200cite\ue202turn0search0\ue201"
        answer = {"content_type": "text", "parts": [text]}
        return self.add(node, self.message("assistant", answer, metadata=meta))


def conversation(rng: random.Random, index: int) -> dict[str, Any]:
    """One realistic conversation."""
    start = round(1_690_000_000.0 + index * 3_600.0 + rng.uniform(0, 3_000), 6)
    conv = _Conversation(rng, start)
    root = conv.add(None, None, "client-created-root" if rng.random() < 0.5 else None)
    hidden = conv.message(
        "system",
        {"content_type": "text", "parts": [""]},
        metadata={"is_visually_hidden_from_conversation": True},
        timed=False,
    )
    node = conv.add(root, hidden)
    if rng.random() < 0.3:
        custom = {"content_type": "user_editable_context", "user_profile": _text(rng, 5, 30), "user_instructions": ""}
        flags = {"is_visually_hidden_from_conversation": True, "is_user_system_message": True}
        node = conv.add(node, conv.message("user", custom, metadata=flags))
    model = rng.choice(MODELS)
    exchanges = min(60, int(rng.paretovariate(1.3) * 2))
    for _ in range(max(1, exchanges)):
        if rng.random() < 0.05:  # an edit: the first version of the question stays as a dead branch
            old = conv.user(node)
            conv.answer(old, model)
        question = conv.user(node)
        if rng.random() < 0.08:  # a regeneration: the first answer stays as a dead branch
            conv.answer(question, model)
        node = conv.answer(question, model)
    cid = conv.uid()
    return {
        "title": _text(rng, 2, 6)[:60],
        "create_time": start if rng.random() < 0.97 else None,  # a few exports lack it (basic-memory#1276)
        "update_time": round(conv.tick(), 6),
        "mapping": conv.mapping,
        "moderation_results": [],
        "current_node": node,
        "plugin_ids": None,
        "conversation_id": cid,
        "conversation_template_id": None,
        "gizmo_id": None,
        "gizmo_type": None,
        "is_archived": rng.random() < 0.05,
        "safe_urls": [],
        "default_model_slug": model,
        "memory_scope": "global_enabled",
        "id": cid,
    }


def chunks(mb: float, seed: int) -> Iterator[bytes]:
    """The export's bytes, one conversation at a time, until about `mb` MB: `[c0, c1, ...]` on one line."""
    rng = random.Random(seed)
    target = int(mb * 1_000_000)
    written = 0
    index = 0
    yield b"["
    while True:
        conv = conversation(rng, index)
        raw = orjson.dumps(conv)
        yield raw if index == 0 else b", " + raw
        written += len(raw) + 2
        index += 1
        if written >= target:
            break
    yield b"]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="approximate size of conversations.json in MB")
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--zip", action="store_true", help="also write chatgpt-export.zip (deflated)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "conversations.json"
    with target.open("wb") as handle:
        for piece in chunks(args.mb, args.seed):
            handle.write(piece)
    print(f"{target}: {target.stat().st_size} bytes")
    if args.zip:
        archive = args.out / "chatgpt-export.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            with zf.open("conversations.json", "w", force_zip64=True) as member, target.open("rb") as source:
                while block := source.read(4 * 1024 * 1024):
                    member.write(block)
            zf.writestr("user.json", orjson.dumps({"id": "user-generated", "email": "user@example.invalid"}))
            zf.writestr("chat.html", "<html><body>generated export</body></html>")
        print(f"{archive}: {archive.stat().st_size} bytes")


if __name__ == "__main__":
    main()
