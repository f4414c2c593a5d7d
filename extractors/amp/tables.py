"""Amp thread records: what each content block of a message is, and why (declarative).

A record is one content block of a message (`messages[].content[]`), counted as `<role>/<block type>` under the
thread's `v`; a message of a role not listed here is one record `<role>` (docs/agents/amp.md "Messages and
blocks"). A block of a type not listed is a new kind: skipped and counted (`SPEC.unknown_records`), never a turn.
"""

from __future__ import annotations

from extractors.model import Disposition

USER = "user"
ASSISTANT = "assistant"
ROLES = frozenset({USER, ASSISTANT})

# (role, block type) -> (disposition, why).
BLOCKS: dict[tuple[str, str], tuple[Disposition, str]] = {
    (USER, "text"): (Disposition.TURN, "what the person typed (a user message's text blocks, joined)"),
    (USER, "tool_result"): (
        Disposition.TOOL,
        "a call's result sent back as a user message (`toolUseID`, `run{status, result}`): never a person's turn",
    ),
    (USER, "image"): (Disposition.METADATA, "an image the person attached: kept as a reference, never its bytes"),
    (ASSISTANT, "text"): (Disposition.TURN, "the model's visible answer"),
    (ASSISTANT, "thinking"): (Disposition.HARNESS, "the model's reasoning: never a turn, as in the Claude reader"),
    (ASSISTANT, "redacted_thinking"): (Disposition.HARNESS, "reasoning withheld by the provider"),
    (ASSISTANT, "tool_use"): (Disposition.TOOL, "a call (`id`, `name`, `input`, `complete`)"),
}

# `run.status` of a tool result -> is_error. A status not listed keeps is_error unknown (None), never a guess.
RUN_STATUS: dict[str, bool] = {
    "done": False,
    "error": True,
    "cancelled": True,
    "rejected-by-user": True,
}

# The usage fields of an assistant message (per inference): docs/agents/amp.md "Tokens".
TOKEN_FIELDS = ("inputTokens", "outputTokens", "cacheCreationInputTokens", "cacheReadInputTokens")

# Model names of the OpenAI family, whose uncached prompt Amp writes under `cacheCreationInputTokens` (with
# `inputTokens` 0): those tokens are input, priced as input, never cache writes (docs/agents/amp.md "Tokens").
OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "codex-")

# `relationships[]` of kind `handoff`: `role` is THIS thread's role, `threadID` the other thread (a peer's reader,
# corrected to this reading): `child` names the thread this one was handed off from (docs/agents/amp.md "Lineage").
HANDOFF = "handoff"
HANDOFF_ROLES = frozenset({"parent", "child"})
