"""Generate a deterministic, realistic Claude.ai export of a given size: one-line `conversations.json` (+ zip).

Usage: uv run python bench/claude_ai_gen.py --mb 200 --out DIR [--seed 7] [--zip]

Each conversation looks like a real export's (docs/agents/claude_ai.md "Messages and blocks"): messages linked by
`parent_message_uuid` from the root sentinel, human text blocks with pasted-file attachments (`extracted_content`) and
uploaded `files`, assistant `thinking` blocks, `web_search` calls with `knowledge` results, artifacts, `token_budget`
checkpoints, and branches left by edited questions and retried answers; about one in six is an older conversation with
the flat `text` only and no links. The file is written streaming (never held whole in memory), as ONE line, like the
real export. The same seed and size give the same bytes. `--zip` also writes the export's `.zip` with `users.json`
and `projects.json` beside it, so `transcripts backfill` detects the format from the path.
"""

from __future__ import annotations

import argparse
import random
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

WORDS = (  # noqa: SIM905 - a sentence reads better than a list of quoted words
    "the a to of and in is it you that for on with this be as are can use data file function model error value "
    "python query table join index memory stream parse token export thread branch message parent leaf answer "
    "question please explain why how does work example test run result output input list dict string bytes "
    "schema parquet duckdb arrow polars artifact search page cite source limit bound offset chunk buffer "
    "café naïve résumé 東京 データ 😀 ünïcödé"
).split()
ROOT = "00000000-0000-4000-8000-000000000000"
EPOCH = datetime(2025, 3, 1, tzinfo=UTC)
ACCOUNT = "9f000000-0000-4000-8000-0000000000aa"


def _text(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    if rng.random() < 0.2:  # pasted code: quotes, backslashes and newlines to escape
        words.append('\n```python\nprint("a\\tb", {"k": [1, 2]})\n```\n')
    return " ".join(words)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def tick(self, rng: random.Random, low: float = 1, high: float = 40) -> str:
        self.now += timedelta(seconds=rng.uniform(low, high))
        return _stamp(self.now)


def _block(kind: str, clock: _Clock, rng: random.Random, **fields: Any) -> dict[str, Any]:
    start = clock.tick(rng, 0.1, 2)
    return {"start_timestamp": start, "stop_timestamp": clock.tick(rng, 0.1, 3), "flags": None, "type": kind, **fields}


def _human(rng: random.Random, clock: _Clock, parent: str) -> dict[str, Any]:
    question = _text(rng, 4, 40)
    attachments = []
    if rng.random() < 0.15:
        pasted = _text(rng, 50, 600)
        attachments.append({"file_name": f"{rng.choice(WORDS)}.txt", "file_size": len(pasted.encode()),
                            "file_type": "txt", "extracted_content": pasted})  # fmt: skip
    files = [{"file_uuid": _uuid(rng), "file_name": "image.png"}] if rng.random() < 0.08 else []
    when = clock.tick(rng, 20, 300)
    return {"uuid": _uuid(rng), "text": question, "content": [_block("text", clock, rng, text=question, citations=[])],
            "sender": "human", "created_at": when, "updated_at": when, "attachments": attachments, "files": files,
            "parent_message_uuid": parent}  # fmt: skip


def _assistant(rng: random.Random, clock: _Clock, parent: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if rng.random() < 0.5:
        content.append(_block("thinking", clock, rng, thinking=_text(rng, 20, 200),
                              summaries=[{"summary": _text(rng, 3, 8)}], cut_off=False))  # fmt: skip
    if rng.random() < 0.25:
        call = f"toolu_01{rng.getrandbits(64):016x}"
        content.append(_block("tool_use", clock, rng, id=call, name="web_search", input={"query": _text(rng, 3, 8)},
                              message="Searching the web", integration_name=None, display_content=None))  # fmt: skip
        results = [{"type": "knowledge", "title": _text(rng, 3, 8), "url": f"https://example.invalid/{n}",
                    "text": _text(rng, 30, 120), "is_missing": False} for n in range(rng.randint(1, 5))]  # fmt: skip
        content.append(_block("tool_result", clock, rng, tool_use_id=call, name="web_search", content=results,
                              is_error=False))  # fmt: skip
        content.append(_block("token_budget", clock, rng))
    answer = _text(rng, 20, 400)
    content.append(_block("text", clock, rng, text=answer, citations=[]))
    if rng.random() < 0.1:
        call = f"toolu_01{rng.getrandbits(64):016x}"
        spec = {"id": rng.choice(WORDS), "type": "application/vnd.ant.code", "title": _text(rng, 2, 5),
                "command": "create", "content": _text(rng, 40, 400), "language": "python",
                "version_uuid": _uuid(rng)}  # fmt: skip
        content.append(_block("tool_use", clock, rng, id=call, name="artifacts", input=spec))
        content.append(_block("tool_result", clock, rng, tool_use_id=call, name="artifacts",
                              content=[{"type": "text", "text": "OK"}], is_error=False))  # fmt: skip
    when = clock.tick(rng, 2, 60)
    return {"uuid": _uuid(rng), "text": answer, "content": content, "sender": "assistant", "created_at": when,
            "updated_at": when, "attachments": [], "files": [], "parent_message_uuid": parent}  # fmt: skip


def conversation(rng: random.Random, index: int) -> dict[str, Any]:
    """One conversation: a thread of exchanges, sometimes a branch off an earlier message; sometimes the old shape."""
    clock = _Clock(EPOCH + timedelta(minutes=37 * index + rng.randint(0, 30)))
    created = _stamp(clock.now)
    messages: list[dict[str, Any]] = []
    leaf = ROOT
    for _ in range(rng.randint(1, 12)):
        if messages and rng.random() < 0.1:  # an edited question or a retried answer: a branch off an earlier message
            fork = rng.choice(messages)
            leaf = fork["uuid"] if fork["sender"] == "assistant" else fork["parent_message_uuid"]
        human = _human(rng, clock, leaf)
        answer = _assistant(rng, clock, human["uuid"])
        messages += [human, answer]
        leaf = answer["uuid"]
    if rng.random() < 1 / 6:  # an older export's conversation: the flat text, no blocks, no links
        for msg in messages:
            for key in ("content", "parent_message_uuid"):
                del msg[key]
    return {"uuid": _uuid(rng), "name": _text(rng, 2, 6), "summary": "", "created_at": created,
            "updated_at": _stamp(clock.now), "account": {"uuid": ACCOUNT}, "chat_messages": messages}  # fmt: skip


def chunks(mb: float, seed: int) -> Iterator[bytes]:
    """The export's bytes, one conversation at a time, until about `mb` MB: `[c0, c1, ...]` on one line."""
    rng = random.Random(seed)
    target = int(mb * 1_000_000)
    written = 0
    index = 0
    yield b"["
    while True:
        raw = orjson.dumps(conversation(rng, index))
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
    parser.add_argument("--zip", action="store_true", help="also write the export's .zip (deflated)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "conversations.json"
    with target.open("wb") as handle:
        for piece in chunks(args.mb, args.seed):
            handle.write(piece)
    print(f"{target}: {target.stat().st_size} bytes")
    if args.zip:
        archive = args.out / "data-2026-02-03-batch-0000.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            with zf.open("conversations.json", "w", force_zip64=True) as member, target.open("rb") as source:
                while block := source.read(4 * 1024 * 1024):
                    member.write(block)
            zf.writestr("users.json", orjson.dumps([{"uuid": ACCOUNT, "email_address": "user@example.invalid"}]))
            zf.writestr("projects.json", orjson.dumps([]))
        print(f"{archive}: {archive.stat().st_size} bytes")


if __name__ == "__main__":
    main()
