"""The declarative tables of the Cline / Roo Code / Kilo Code reader: what each record of a task folder becomes.

A task folder holds `api_conversation_history.json` (the messages sent to the model: turns and tool calls are read
here), `ui_messages.json` (the UI transcript: per-request usage, compaction and delegation markers are read here;
its copies of the conversation are not read twice) and the metadata sidecars `task_metadata.json` (Cline) and
`history_item.json` (Roo, Kilo). docs/agents/cline.md "Which file says what".
"""

from __future__ import annotations

import re

from extractors.model import Disposition

# The extension ids whose `globalStorage/<id>/tasks/<task id>/` folders are read, and the product each one is.
EXTENSIONS: dict[str, str] = {
    "saoudrizwan.claude-dev": "Cline",
    "rooveterinaryinc.roo-cline": "Roo Code",
    "kilocode.kilo-code": "Kilo Code",
}

API_HISTORY = "api_conversation_history.json"  # the unit: one per task folder
UI_MESSAGES = "ui_messages.json"
TASK_METADATA = "task_metadata.json"
HISTORY_ITEM = "history_item.json"
SIDECARS = (UI_MESSAGES, TASK_METADATA, HISTORY_ITEM)  # read with the unit and counted in its fingerprint

# --- api_conversation_history.json: message kinds (census `api/<kind>`) ----------------------------------------------
# A message's kind is its `role`, refined below; a role not listed is an unknown record (SPEC.unknown_records).
MESSAGE_KINDS: dict[str, tuple[Disposition, str]] = {
    "user": (Disposition.TURN, "a person's turn when it holds a <task>/<feedback>/<answer>/<user_message> span"),
    "user/tool_results": (Disposition.TOOL, "only tool results (`[tool] Result:` text or tool_result blocks)"),
    "user/harness": (Disposition.HARNESS, "environment details, reminders, resumption notices: nothing typed"),
    "user/truncation_marker": (Disposition.HARNESS, "Roo's `isTruncationMarker` placeholder for dropped messages"),
    "assistant": (Disposition.TURN, "the model's visible text; its tool_use blocks become tool calls"),
    "assistant/tool_calls": (Disposition.TOOL, "tool_use blocks (or XML tool calls) and no other text"),
    "assistant/reasoning": (Disposition.HARNESS, "thinking blocks only, or Roo's `type: reasoning` item"),
    "assistant/summary": (Disposition.HARNESS, "Roo's condense summary (`isSummary`): a compaction, not a reply"),
    "assistant/empty": (Disposition.SKIPPED, "no content at all (an interrupted request)"),
}

# --- ui_messages.json: `say` / `ask` kinds (census `ui/say/<kind>`, `ui/ask/<kind>`) ----------------------------------
# The UI transcript repeats the conversation for display; only these kinds say something the API history does not.
UI_READ: dict[str, tuple[Disposition, str]] = {
    "say/api_req_started": (Disposition.METADATA, "per-request tokens and cost: the usage rows"),
    "say/condense_context": (Disposition.HARNESS, "Roo/Kilo compaction marker (contextCondense): counted, not a turn"),
    "say/context_condense": (Disposition.HARNESS, "the same marker under its other spelling"),
    "say/condense_context_error": (Disposition.HARNESS, "a compaction that failed"),
    "say/sliding_window_truncation": (Disposition.HARNESS, "Roo dropped old messages to fit the window"),
    "say/subtask_result": (Disposition.HARNESS, "a child task's result handed back to its parent (Roo)"),
}
# Every other ui row is the UI's copy of what api_conversation_history.json holds (text, tool asks, command output,
# checkpoints, reasoning) or UI bookkeeping: SKIPPED, with this why. Rows still `partial: true` are skipped too: the
# streaming leaves them behind (and real Cline files keep a last assistant text row partial).
UI_COPY_WHY = "the UI's copy of the conversation, read from api_conversation_history.json instead"
UI_PARTIAL_KIND = "ui/partial"

# --- the person's words ----------------------------------------------------------------------------------------------
# The fast forms of the regexes below search for one character (`"<" in text`) before a longer needle: CPython
# finds one character with memchr, while a longer needle in a text that is not Latin-1 (most tool output: box
# drawing, emoji) costs ~0.6 ns a character, and a tool result is read three times over (person spans, error).
# In a user message, the person's words are the interiors of these tags (Cline's and Roo's own wrappers: the first
# prompt `<task>`, feedback on a result or a denied tool `<feedback>`, the reply to ask_followup_question `<answer>`,
# a message typed into a running or resumed task `<user_message>`). A tag counts only at the start of a line. In a
# tool result block (`[x] Result:`) only `<feedback>` and `<answer>` count, and only where the harness puts them:
# right after a line ending in ':' (`] Result:`, `the following feedback:`) or closing the block (`...attempt
# completion again.\n<feedback>...</feedback>`), so a file the model read that holds such a tag is not a person.
PERSON_TAGS = ("task", "feedback", "answer", "user_message")
PERSON_SPAN = re.compile(r"(?:^|\n)<(task|feedback|answer|user_message)>\n?(.*?)\n?</\1>", re.DOTALL)
_PERSON_OPENERS = tuple(f"<{tag}>" for tag in PERSON_TAGS)  # PERSON_SPAN's openers, searched for before it
RESULT_PERSON_SPAN = re.compile(r"(?:^|\n)<(feedback|answer)>\n?(.*?)\n?</\1>", re.DOTALL)
_RESULT_PERSON_OPENER = re.compile(r"<(?:feedback|answer)>")  # one search for the two, in a text that holds a `<`


def result_person_spans(text: str) -> list[str]:
    """The person's words in a tool result block (see above)."""
    if "<" not in text or _RESULT_PERSON_OPENER.search(text) is None:
        return []  # the regex scans char by char; searches for `<` and the openers rule most results out first
    spans = []
    for match in RESULT_PERSON_SPAN.finditer(text):
        before = text[: match.start()].rstrip()
        if before.endswith(":") or not text[match.end() :].strip():
            spans.append(match.group(2))
    return spans


# Text the harness writes into user messages; removed before looking for tags (never a person's words).
HARNESS_SECTIONS = re.compile(
    r"<environment_details>.*?(?:</environment_details>|\Z)|<file_content\b.*?(?:</file_content>|\Z)", re.DOTALL
)


def without_harness(text: str) -> str:
    """`HARNESS_SECTIONS.sub("", text)` by substring search: the regex's lazy `.*?` tries its two ends at every
    character of a section (4 us for the environment_details block of every user message). A section starts at the
    leftmost opener (`<file_content` only where `\b` holds after it) and ends after the first closer of its kind
    after the opener, or at the end of the text; the search goes on after it. tests/test_cline.py holds the two to
    the same answers."""
    if text.startswith(_DETAILS_OPEN):  # the environment_details block every user message ends with
        close = text.find(_DETAILS_CLOSE, len(_DETAILS_OPEN))
        if close < 0 or close + len(_DETAILS_CLOSE) == len(text):
            return ""  # one section, the whole text
    if "<" not in text or ("<environment_details>" not in text and "<file_content" not in text):
        return text
    kept: list[str] = []
    position = 0
    while True:
        details = text.find(_DETAILS_OPEN, position)
        content = _file_content_at(text, position)
        start = min(details, content) if details >= 0 and content >= 0 else max(details, content)
        if start < 0:
            kept.append(text[position:])
            return "".join(kept)
        kept.append(text[position:start])
        opener, closer = (_DETAILS_OPEN, _DETAILS_CLOSE) if start == details else (_CONTENT_OPEN, _CONTENT_CLOSE)
        end = text.find(closer, start + len(opener))
        position = len(text) if end < 0 else end + len(closer)


_DETAILS_OPEN, _DETAILS_CLOSE = "<environment_details>", "</environment_details>"
_CONTENT_OPEN, _CONTENT_CLOSE = "<file_content", "</file_content>"


def _file_content_at(text: str, position: int) -> int:
    """The first `<file_content` at or after `position` that `\b` ends (no word character after it), or -1."""
    at = text.find(_CONTENT_OPEN, position)
    while at >= 0:
        after = at + len(_CONTENT_OPEN)
        if after == len(text) or not (text[after].isalnum() or text[after] == "_"):
            return at
        at = text.find(_CONTENT_OPEN, at + 1)
    return -1


def person_spans(plain: str) -> list[str]:
    """The interiors of PERSON_SPAN in a user text (harness sections removed), by substring search: PERSON_SPAN's
    lazy `(.*?)` tries `\n?</tag>` at every character of the span (~4 us for a first prompt). A span starts at an
    opener at the start of the text or after a newline, drops one newline after the opener, and ends at the first
    closer of its tag after that (a newline right before the closer is not in it); the search goes on after the
    closer. tests/test_cline.py holds the two to the same answers."""
    if "<" not in plain or (
        "<task>" not in plain
        and "<feedback>" not in plain
        and "<answer>" not in plain
        and "<user_message>" not in plain
    ):
        return []  # the openers of _PERSON_OPENERS, without a generator's frames
    spans: list[str] = []
    at = 0 if plain.startswith("<") else _line_opening(plain, 0)  # where an opener may start
    while at >= 0:
        tag = None
        for opener in _PERSON_OPENERS:
            if plain.startswith(opener, at):
                tag = opener
                break
        if tag is not None:
            start = at + len(tag)
            if plain.startswith("\n", start):
                start += 1
            closer = "</" + tag[1:]
            close = plain.find(closer, start)
            if close >= 0:
                spans.append(plain[start : close - 1 if close > start and plain[close - 1] == "\n" else close])
                at = _line_opening(plain, close + len(closer))
                continue
        at = _line_opening(plain, at)
    return spans


def _line_opening(text: str, position: int) -> int:
    """Where the first `<` right after a newline at or after `position` is, or -1."""
    found = text.find("\n<", position)
    return found + 1 if found >= 0 else -1


# A tool result sent back as user text (Cline's text protocol, Roo's XML era): `[read_file for 'x'] Result:`.
# The head starts with the tool's snake_case name (`[TASK RESUMPTION]`, `[ERROR]` are notices, not results) and may
# hold newlines and brackets after it (a command, a follow-up question): the first `] Result:` ends it.
RESULT_HEAD = re.compile(r"\A\s*\[([a-z][a-z0-9_]*(?: .*?)?)\] Result:[ \t]*\n?", re.DOTALL)
_RESULT_NAME = re.compile(r"\s*\[([a-z][a-z0-9_]*)")  # RESULT_HEAD up to the tool's name
_RESULT_CLOSE = "] Result:"
# RESULT_HEAD where the head holds no `]` and no newline before its `] Result:` (the usual `[read_file for 'x']`):
# one match instead of the steps below (~1 us a result; a tool result's text is mostly not Latin-1, where each
# substring search first widens its needle).
_RESULT_HEAD_PLAIN = re.compile(r"\[([a-z][a-z0-9_]*(?: [^\]\n]*)?)\] Result:[ \t]*\n?")


def result_head(text: str) -> tuple[str, int] | None:
    """RESULT_HEAD's group 1 and end in `text`, or None where it does not match: the usual head by one short regex,
    any other by a short regex for the name and substring search for the rest (RESULT_HEAD's lazy `.*?` tries
    `] Result:` at every character of a long head). tests/test_cline.py holds the two to the same answers."""
    if not text or (text[0] != "[" and not text[0].isspace()):
        return None
    plain = _RESULT_HEAD_PLAIN.match(text)
    if plain is not None:
        return plain.group(1), plain.end()
    name = _RESULT_NAME.match(text)
    if name is None:
        return None
    after = name.end()
    if text.startswith(_RESULT_CLOSE, after):
        close = after  # `[name] Result:`
    elif text.startswith(" ", after):
        close = text.find(_RESULT_CLOSE, after + 1)  # `[name for 'x'] Result:`: the first `] Result:` ends the head
        if close < 0:
            return None
    else:
        return None  # the name runs on into a character RESULT_HEAD's name does not take
    end = close + len(_RESULT_CLOSE)
    while end < len(text) and text[end] in " \t":
        end += 1
    if text.startswith("\n", end):
        end += 1
    return text[name.start(1) : close], end


ERROR_RESULT = re.compile(r"\A\s*(?:The tool execution failed|<error>|\[ERROR\])|\"status\"\s*:\s*\"error\"")
# ERROR_RESULT's two halves, for `is_error_result`: searched whole, its anchored half is tried at every position.
_ERROR_HEAD = re.compile(r"\s*(?:The tool execution failed|<error>|\[ERROR\])")
_ERROR_STATUS = re.compile(r"\"status\"\s*:\s*\"error\"")


def is_error_result(text: str) -> bool:
    """Whether ERROR_RESULT finds a failure in a tool result's text: the same answer, without a full regex scan."""
    return _ERROR_HEAD.match(text) is not None or (
        '"' in text and '"status"' in text and _ERROR_STATUS.search(text) is not None
    )


# The first `# Current Working Directory (<path>) Files` of an environment_details block: Cline's only cwd.
CWD_LINE = re.compile(r"# Current Working Directory \((.+?)\) Files")

# Roo's delegation tool: its calls spawn the child tasks listed in history_item.json `childIds`, in order.
DELEGATION_TOOLS = frozenset({"new_task", "newTask"})
