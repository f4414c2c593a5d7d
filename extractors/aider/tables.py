"""What each line of `.aider.chat.history.md` is: the declarative tables of the Aider reader.

Aider appends Markdown to one file per repository (`aider/io.py`, `InputOutput`): `# aider chat started at …` opens
each run, `user_input` writes `#### <line>  ` per line the person typed, `tool_output` / `tool_error` /
`tool_warning` / `confirm_ask` write `> <text>  `, and `ai_output` writes the model's reply as it is, between blank
lines. Every line aider writes itself ends with two spaces (a Markdown hard break); the reply's lines do not, which
tells a `####` heading or a `>` quote in a reply from aider's own lines (docs/agents/aider.md "Lines").
"""

from __future__ import annotations

import re

from extractors.model import Disposition

# The census kind of each line -> (disposition, why). Blank lines are separators, not records: they are not counted.
LINE_KINDS: dict[str, tuple[Disposition, str]] = {
    "header": (Disposition.METADATA, "`# aider chat started at YYYY-MM-DD HH:MM:SS`: a run starts; its local time"),
    "prompt": (Disposition.TURN, "`#### <text>  `: a line the person typed (consecutive lines are one prompt)"),
    "command": (Disposition.TURN, "`#### /add x  `, `#### !ls  `: a command the person typed, one turn as typed"),
    "confirm_answer": (
        Disposition.HARNESS,
        "`#### Add file to the chat? (Y)es/(N)o… [Yes]: skip  `: aider echoes a yes/no question answered for a "
        "group of questions; the question is aider's, not the person's words",
    ),
    "command_message": (
        Disposition.HARNESS,
        "`#### X  ` right after `#### /code X  ` (or `/ask`, `/architect`, …): the command runs X as a message and "
        "aider logs it again; the person typed it once, as the command",
    ),
    "architect_handoff": (
        Disposition.HARNESS,
        "`#### <the architect's reply>  `: architect mode hands the reply to the editor model as its input, and "
        "aider logs it as the person's lines",
    ),
    "blank_input": (Disposition.SKIPPED, "`#### <blank>  `: the person pressed Enter on an empty line"),
    "banner": (Disposition.METADATA, "`> Aider v0.86.1`, `> Main model: …`, `> Weak model: …`: version and models"),
    "working_dir": (
        Disposition.METADATA,
        "`> Cur working dir: /path`, `> Git working dir: /path`: printed when aider starts below the repository's root",
    ),
    "tokens": (Disposition.METADATA, "`> Tokens: 2.3k sent, 120 received. Cost: $0.01 message, …`: one reply's usage"),
    "tool_output": (
        Disposition.HARNESS,
        "any other `> …` line and the unprefixed lines that continue it: aider's messages, warnings, questions "
        "with the answers, edits applied, commits, `^C KeyboardInterrupt`",
    ),
    "assistant": (Disposition.TURN, "a line of the model's reply (everything else)"),
    "reasoning": (
        Disposition.HARNESS,
        "`<thinking-content-…>` … `</thinking-content-…>` (or `<think>` … `</think>`): the model's reasoning",
    ),
}

# A line of a kind this reader does not know: a `# aider …` marker line that is not a run's header, outside a reply
# (a newer aider's marker, e.g.). Counted under this kind, skipped (`SPEC.unknown_records`).
UNKNOWN_KIND = "aider_marker"

HISTORY_FILE = ".aider.chat.history.md"

# `\n# aider chat started at {datetime.now().strftime("%Y-%m-%d %H:%M:%S")}\n\n` (aider/io.py InputOutput.__init__).
HEADER = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
MARKER = "# aider "
HARD_BREAK = "  "
PROMPT = "####"
QUOTE = ">"
BLANK_INPUT = "<blank>"  # what user_input writes for an empty input
COMMAND_PREFIXES = ("/", "!")  # `!cmd` is aider's shorthand for `/run cmd`
# confirm_ask's options and default, as `user_input(f"{question}{res}")` echoes them for a group preference.
CONFIRM = re.compile(r"\(Y\)es/\(N\)o.*\[[^\]]*\]: ")
CONFIRM_START = "(Y)es/(N)o"  # what CONFIRM matches first

# Banner lines (aider/models.py and main.py announcements): the version, the models.
VERSION = re.compile(r"^> Aider v(\S+)")
MODEL = re.compile(r"^> (Main model|Model|Editor model|Weak model): (\S+)")
CHAT_MODELS = frozenset({"Main model", "Model"})  # the model that writes the replies (until the next banner)
WORKING_DIR = re.compile(r"^> (Cur|Git) working dir: (.+?)\s*$")  # the session's cwd: `Cur`, else `Git`

# The usage report (aider/coders/base_coder.py `show_usage_report`): `Tokens: 2.3k sent, 1.2k cache write, 3.4k cache
# hit, 120 received.` then ` Cost: $0.01 message, $0.05 session.` on the same line, or on the next unprefixed line
# when both cache figures are printed. Older versions wrote `12,450 sent` and `$0.01 request`.
TOKENS = re.compile(r"^> Tokens: ")
TOKENS_START = "> Tokens: "  # what TOKENS matches, as a prefix
# What a `>` line starts with when VERSION, MODEL, WORKING_DIR or TOKENS can match it; other `>` lines skip them.
AIDER_LINE_STARTS = (
    "> Aider v",
    "> Main model: ",
    "> Model: ",
    "> Editor model: ",
    "> Weak model: ",
    "> Cur working dir: ",
    "> Git working dir: ",
    TOKENS_START,
)
# What a line of aider's own `>` lines starts with when it is one of those (AIDER_LINE_STARTS), in a group of them.
AIDER_LINE_START = re.compile(
    b"^(?:" + b"|".join(re.escape(start.encode()) for start in AIDER_LINE_STARTS) + b")", re.MULTILINE
)
TOKEN_FIGURE = re.compile(r"([\d.,]+)([kKmM]?) (sent|received|cache write|cache hit)\b")
# The usual report without cache figures, `> Tokens: 2.3k sent, 120 received. `: TOKEN_FIGURE's two figures, when the
# rest of the line names no other.
USUAL_TOKENS = re.compile(r"> Tokens: ([\d.,]+)([kKmM]?) sent, ([\d.,]+)([kKmM]?) received\. ")
MESSAGE_COST = re.compile(r"Cost: \$([\d.,]+) (?:message|request)\b")

# The model's reasoning, as aider keeps it in the reply (aider/reasoning_tags.py REASONING_TAG), or as the model wrote
# it (`<think>` … `</think>` of qwen3 and deepseek-r1 served through an OpenAI-compatible API: Simple-Calulator l.1231).
REASONING_OPEN = re.compile(r"^<(?:thinking-content-[0-9a-f]+|think)>\s*$")
REASONING_CLOSE = re.compile(r"^</(?:thinking-content-[0-9a-f]+|think)>\s*$")

# The characters `str.isspace` takes (a line of them alone is blank), but the newline, as UTF-8.
SPACE_BYTES = (
    rb"(?:[\t\x0b\x0c\r\x1c-\x1f ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]"
    rb"|\xe2\x81\x9f|\xe3\x80\x80)"
)
# The usual exchange, taken in one match where the group-at-a-time walk takes four or five groups (each part is
# stricter than the walk: whatever the match does not take, the walk takes as before): maybe a command of one line
# with aider's echo right after it (`> Added x to the chat  `: `>` lines that are none of AIDER_LINE_STARTS), the
# person's `####` lines, empty lines, maybe the reasoning (`<thinking-content-…>` … `</…>` alone on their lines), the
# reply's lines, and then either a usage report (`> Tokens: 18k sent, 460 received. Cost: $0.0624 message, $0.1247
# session.  `, the usual one read here) with aider's lines after it (`> Applied edit to x  `), or the empty lines
# after the reply, the reply left open for the walk to read on. Or a command and its echo alone.
_OUTPUT = (
    rb">(?! Aider v| Main model: | Model: | Editor model: | Weak model: | Cur working dir: | Git working dir: "
    rb"| Tokens: )[^\n]*  "
)  # a line of aider's output that is none of AIDER_LINE_STARTS
_SPACE_LIKE = rb"\t\x0b\x0c\r\x1c-\x1f \x80-\xbf\xc2\xe1\xe2\xe3"  # every byte a line of spaces alone can hold
# A line of a reply that no group takes (and not empty): it starts with a byte no group starts with; or with `#` and
# is no `####` line of aider's and no marker; or with `<` and is no reasoning tag; or with a space and holds a byte
# no space is made of.
_REPLY_STARTS = (
    rb"[^#<>\t\x0b\x0c\r\x1c-\x1f \xc2\xe1\xe2\xe3\n]",
    rb"#(?!###[^\n]*  \n| aider )",
    rb"<(?!/?think)",
    rb"[\t\x0b\x0c\r\x1c-\x1f \xc2\xe1\xe2\xe3][" + _SPACE_LIKE + rb"]*[^" + _SPACE_LIKE + rb"\n]",
)
# Each start with the rest of its line, as alternatives of one level (the same lines as `(?:A|B|…)[^\n]*`, in the same
# order; `re` tries them ~5% faster than nested).
_REPLY_FIRST = rb"(?:" + rb"|".join(start + rb"[^\n]*" for start in _REPLY_STARTS) + rb")"
# Any other line of a reply, or of its reasoning: also a marker, and the model's quote (a `>` line without the hard
# break that is no usage report).
_REPLY_LINE = _REPLY_FIRST[:-1] + rb"|# aider [^\n]*|>(?! Tokens: )(?:[^\n]*[^\n ])? ?(?=\n))"
_FIGURE = rb"(\d+(?:\.\d+)?)"  # a figure TOKEN_FIGURE and MESSAGE_COST read the same (no `,`, no other digits)
_TYPED = rb"####[^\n]*  (?:\n####[^\n]*  )*"  # a group of `####` lines
_ECHO = rb"#### ?([^\n]*)  \n(" + _OUTPUT + rb"(?:\n" + _OUTPUT + rb")*)"  # a command of one line, aider's echo
# The most lines of a reply, or of its reasoning, one match takes (`re` keeps a step back for each): the walk goes on.
_MOST_LINES = rb"{0,4000}"
_THOUGHT = (
    rb"\n<(?:thinking-content-[0-9a-f]+|think)>((?:\n(?:" + _REPLY_LINE + rb")?)" + _MOST_LINES + rb")"
    rb"\n</(?:thinking-content-[0-9a-f]+|think)>\n*"
)
_USUAL_REPORT = (
    rb"> Tokens: " + _FIGURE + rb"([kKmM]?) sent, " + _FIGURE + rb"([kKmM]?) received\. "
    rb"Cost: \$" + _FIGURE + rb" (?:message|request), \$[\d.]+ session\.  "
)
EXCHANGE = (
    # `(?=(…))\4` (group 4: TYPED): the `####` lines taken whole, never given back one by one (a lookahead is never
    # gone back into), as an atomic group would, which Python before 3.11.5 gets wrong; no line after fewer of them
    # could follow.
    rb"(?P<exchange>(?:" + _ECHO + rb"\n+)?(?=(" + _TYPED + rb"))\4\n*(?:" + _THOUGHT + rb")?"
    rb"\n(" + _REPLY_FIRST + rb"(?:\n+" + _REPLY_LINE + rb")" + _MOST_LINES + rb")"
    rb"(?:\n+(?:" + _USUAL_REPORT + rb"|(> Tokens: [^\n]*  ))((?:\n" + _OUTPUT + rb")*)"
    rb"|\n*)"  # any other line after the reply (or more of it): the walk reads on from there, the reply still open
    rb"|" + _ECHO + rb")"
)
# EXCHANGE's groups, numbered in LINE_GROUP: the command and its echo, the person's lines, the reasoning's lines (from
# the newline after the opening tag to the one before the closing tag), the reply, the usual usage report's sent and
# received figures with their scales and its cost, any other usage report (its line), aider's lines after the report;
# a command and its echo alone.
(COMMAND, ECHO, TYPED, THOUGHT, REPLY, SENT, SENT_SCALE, RECEIVED, RECEIVED_SCALE, COST, REPORT, OUTPUT) = range(2, 14)
ALONE, ALONE_ECHO = 14, 15
# The lines a run's text (UTF-8) is cut at, after the newline before each, everything else being taken a span at a
# time: the usual exchange (EXCHANGE, tried first), aider's `####` lines (a person's input, hard break; consecutive
# ones together), aider's `>` lines (hard break; consecutive ones together), any other `>` line (a quote, or the first
# line of a message of aider's of several lines), a `# aider ` marker, a reasoning tag (REASONING_OPEN,
# REASONING_CLOSE), a line of spaces alone.
LINE_GROUP = re.compile(
    rb"\n(?=[#<>\t\x0b\x0c\r\x1c-\x1f \xc2\xe1\xe2\xe3])(?:"  # what such a line can start with, checked first
    + EXCHANGE
    + rb"|"
    rb"(?P<aider>>[^\n]*  (?:\n>[^\n]*  )*)"
    rb"|(?P<prompt>####[^\n]*  (?:\n####[^\n]*  )*)"
    rb"|(?P<quote>>[^\n]*)"
    rb"|(?P<marker># aider [^\n]*)"
    rb"|(?P<open><(?:thinking-content-[0-9a-f]+|think)>" + SPACE_BYTES + rb"*)"
    rb"|(?P<close></(?:thinking-content-[0-9a-f]+|think)>" + SPACE_BYTES + rb"*)"
    # Plain greedy repeats, never possessive ones (`*+`, `++`: wrong in Python before 3.11.5, which Debian 12 has;
    # tests/test_python_compat.py): each group must end at the newline, so a greedy repeat finds what a possessive
    # one would, an indented line costing a few steps back before the group fails.
    rb"|(?P<blank>" + SPACE_BYTES + rb"+)"
    rb")(?=\n)"
)
# A `####` line's text as the person typed it: without `####`, one space after it and the hard break.
PROMPT_TEXT = re.compile(r"^####(?: )?(.*)  $", re.MULTILINE)
EMPTY_LINE = re.compile(rb"\n(?=\n)")  # the newline before an empty line (several in a row each found)

# Folders discovery never enters: dependencies, build output, caches and the OS's own trees (hidden folders, those
# whose name starts with a dot, are never entered either).
PRUNED_DIRS = frozenset(
    {
        "node_modules",
        "venv",
        "__pycache__",
        "site-packages",
        "dist",
        "build",
        "target",
        "vendor",
        "Library",
        "AppData",
        "snap",
    }
)
# How many folders below a root a history file may lie (`~/src/github.com/owner/repo/` is four).
MAX_DEPTH = 5
