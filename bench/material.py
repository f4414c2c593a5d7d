"""Deterministic text material for fake transcripts: prose, source files, shell output, paths, ids and times.

Pools of lines are built once from the seed; sessions draw from them with their own `random.Random`. Drawing whole
lines from large pools (not word by word) keeps generation fast (a 200 MB corpus in well under a minute) while the
text still looks like what agents write: code with line numbers, test runs, diffs, markdown answers.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from datetime import UTC, datetime, timedelta

_WORDS = (
    "account action adapter agent alias allocate api append archive argument array assert async attribute audit "
    "backend batch benchmark binary block branch buffer build bundle cache callback cancel capture channel check "
    "child chunk cleanup client clock close cluster column command commit compile component config connect "
    "console context convert cookie copy count create cursor daemon dashboard data database debug decode default "
    "delete deploy deprecated diff digest directory dispatch document domain download draft driver dump element "
    "encode endpoint entry enum environment error event exception execute export extension factory failure feature "
    "fetch field file filter flag flush format frame function gateway generate global graph guard handler hash "
    "header health helper hook host index init inline input insert install instance interface invoice item job "
    "join json kernel key label layer layout lazy limit line link list listener load local lock log lookup loop "
    "manifest map market match memory merge message metadata method metric middleware migration mock model module "
    "monitor mount mutation namespace network node notify null object offset option order output owner package "
    "page parse parser partition patch path payload peer pending permission pipeline plugin pointer policy pool "
    "port prefix process profile project prompt property provider proxy publish query queue quota range reader "
    "record redirect reduce refresh region registry release remote render replica report request reset resolve "
    "resource response result retry return role route row rule runtime sample schema scope script search secret "
    "section select selector serialize server service session setting shard signal snapshot socket source span "
    "stage state status storage stream string struct subscribe suite summary sync table target task template "
    "tenant test thread ticket timeout token trace transaction transform tree trigger type update upload user "
    "validate value vector version view volume wait webhook window worker wrapper write"
)
WORDS = _WORDS.split()

_VERBS = (
    "add fix remove rename refactor update check verify handle wire expose split merge move extract inline cache "
    "retry validate parse render load store migrate document test log guard simplify"
)
VERBS = _VERBS.split()

LANGS = ("python", "typescript", "elixir", "go", "rust")
EXT = {"python": "py", "typescript": "ts", "elixir": "ex", "go": "go", "rust": "rs"}
SRC = {"python": "src", "typescript": "src", "elixir": "lib", "go": "internal", "rust": "src"}

HOMES = ("/home/dev", "/home/marco", "/Users/sam", "/home/ana", "/Users/kim.lee", "/home/ci-user")
_PROJECT_NAMES = (
    "billing-api web-dashboard spotter infra-tools data-pipeline mobile-app auth-service search-indexer "
    "docs-site cli-toolkit payments ledger notebook-server ml-training chat-backend scheduler analytics "
    "edge-proxy inventory crm-sync"
)
PROJECT_NAMES = _PROJECT_NAMES.split()

MODELS_CLAUDE = ("claude-opus-4-6", "claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101", "claude-haiku-4-5")
EMOJI = ("✅", "⚠️", "🚀", "🔧", "📦", "❌", "✨", "→", "—", "…", "“quoted”", "naïve", "日本語", "Grüße")


def rand_uuid4(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def rand_uuid7(rng: random.Random, ms: int) -> str:
    """A UUIDv7 for a moment (ms since the epoch), random bits from `rng` (Codex threads, Grok sessions)."""
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= rng.getrandbits(12) << 64
    value |= 0b10 << 62
    value |= rng.getrandbits(62)
    return str(uuid.UUID(int=value))


ALNUM = string.ascii_letters + string.digits


def rand_token(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choices(alphabet, k=n))


def rand_hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def rand_base64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode("ascii")


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_ms(ms: int) -> str:
    """`2026-02-10T21:11:56.846Z` (Claude, Codex)."""
    moment = EPOCH + timedelta(milliseconds=ms)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def iso_us(us: int) -> str:
    """`2026-07-31T10:13:27.574131Z` (Grok summary.json)."""
    moment = EPOCH + timedelta(microseconds=us)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{us % 1_000_000:06d}Z"


def ms_of(moment: datetime) -> int:
    return int((moment - EPOCH).total_seconds() * 1000)


class Clock:
    """A session's own time, advanced by plausible gaps (never the machine's clock)."""

    def __init__(self, rng: random.Random, start_ms: int) -> None:
        self.rng = rng
        self.ms = start_ms

    def tick(self, low: float = 0.05, high: float = 3.0) -> str:
        self.ms += int(self.rng.uniform(low, high) * 1000)
        return iso_ms(self.ms)

    def now(self) -> str:
        return iso_ms(self.ms)


class Material:
    """Pools of text built once from the seed."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"material-{seed}")
        self.idents = [self._ident(rng) for _ in range(3000)]
        self.sentences = [self._sentence(rng) for _ in range(6000)]
        self.code = {lang: [self._code_line(rng, lang) for _ in range(4000)] for lang in LANGS}
        self.shell = [self._shell_line(rng) for _ in range(4000)]
        self.test_lines = [self._test_line(rng) for _ in range(2000)]

    # --- pools -----------------------------------------------------------------------------------------------------
    def _ident(self, rng: random.Random) -> str:
        parts = rng.sample(WORDS, rng.choice((1, 2, 2, 3)))
        if rng.random() < 0.5:
            return "_".join(parts)
        return parts[0] + "".join(p.capitalize() for p in parts[1:])

    def _sentence(self, rng: random.Random) -> str:
        n = rng.randint(6, 22)
        words = rng.choices(WORDS + VERBS + ["the", "a", "to", "of", "and", "in", "is", "we", "it", "this"] * 6, k=n)
        if rng.random() < 0.25:
            words.insert(rng.randrange(len(words)), f"`{rng.choice(self.idents) if self.idents else 'x'}`")
        if rng.random() < 0.04:
            words.append(rng.choice(EMOJI))
        text = " ".join(words)
        return text[0].upper() + text[1:] + rng.choice(".......?!:")

    def _code_line(self, rng: random.Random, lang: str) -> str:
        a, b, c = rng.choice(self.idents), rng.choice(self.idents), rng.choice(self.idents)
        indent = " " * rng.choice((0, 2, 4, 4, 4, 8, 8, 12))
        forms: tuple[str, ...]
        if lang == "python":
            forms = (
                f"def {a}(self, {b}: str, {c}: int = 0) -> dict[str, Any]:",
                f"{a} = {b}.get({c!r}, None)",
                f"if {a} is None or not {b}:",
                f"return {a}({b}, {c}=True)",
                f"for {a} in sorted({b}.items()):",
                f"raise ValueError(f'{a} is not a valid {b}: {{{c}!r}}')",
                f"from {a}.{b} import {c}",
                f"# {rng.choice(self.sentences) if self.sentences else a}",
                f"self.{a}: list[{b.capitalize()}] = []",
                f"await self.{a}.{b}({c})",
            )
        elif lang == "typescript":
            forms = (
                f"export function {a}({b}: string, {c}?: number): Promise<void> {{",
                f"const {a} = await {b}.{c}();",
                f"if (!{a} || {a}.length === 0) return null;",
                f"import {{ {a}, {b} }} from './{c}';",
                f"  {a}: {b.capitalize()}[];",
                f"// {rng.choice(self.sentences) if self.sentences else a}",
                f"return {{ ...{a}, {b}: {c} }};",
                f"throw new Error(`{a} failed: ${{{b}}}`);",
                "}",
            )
        elif lang == "elixir":
            forms = (
                f"def {a}({b}, opts \\\\ []) do",
                f"  {a} = Keyword.get(opts, :{b}, {c})",
                f"|> Enum.map(&{a}/1)",
                f"{{:ok, {a}}} <- {b}.{c}(params)",
                f'@doc "{rng.choice(self.sentences) if self.sentences else a}"',
                "end",
                f"alias Spotter.{a.capitalize()}.{b.capitalize()}",
            )
        elif lang == "go":
            forms = (
                f"func ({a} *{b.capitalize()}) {c.capitalize()}(ctx context.Context) error {{",
                f"if err := {a}.{b}(ctx); err != nil {{",
                f'return fmt.Errorf("{a}: %w", err)',
                f"{a} := make(map[string]{b.capitalize()}, len({c}))",
                f"// {rng.choice(self.sentences) if self.sentences else a}",
                "}",
            )
        else:
            forms = (
                f"pub fn {a}(&self, {b}: &str) -> Result<{c.capitalize()}, Error> {{",
                f"let {a} = {b}.iter().map(|x| x.{c}()).collect::<Vec<_>>();",
                f"match {a} {{ Some(v) => v, None => return Ok(()) }}",
                f"// {rng.choice(self.sentences) if self.sentences else a}",
                "}",
            )
        return indent + rng.choice(forms)

    def _shell_line(self, rng: random.Random) -> str:
        a, b = rng.choice(self.idents), rng.choice(self.idents)
        forms = (
            f"-rw-r--r--  1 dev  staff  {rng.randint(100, 90000):>6} Feb {rng.randint(1, 28):>2} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {a}.{rng.choice(list(EXT.values()))}",
            f"src/{a}/{b}.py:{rng.randint(1, 900)}: {rng.choice(self.sentences)}",
            f"\u001b[32m✓\u001b[39m {a} › {b} \u001b[2m({rng.randint(1, 900)} ms)\u001b[22m",
            f"\u001b[31m✗\u001b[39m {a} › {b}",
            f"{rand_hex(rng, 7)} {rng.choice(VERBS).capitalize()} {a} in {b}",
            f"	modified:   {SRC[rng.choice(LANGS)]}/{a}/{b}.{rng.choice(list(EXT.values()))}",
            f"warning: unused variable `{a}` --> src/{b}.rs:{rng.randint(1, 400)}:{rng.randint(1, 80)}",
            f"npm WARN deprecated {a}@{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}: "
            f"{rng.choice(self.sentences)}",
            f"  {a}: {rng.randint(0, 100000)}",
            f"INFO [{a}] {rng.choice(self.sentences)}",
        )
        return rng.choice(forms)

    def _test_line(self, rng: random.Random) -> str:
        a, b = rng.choice(self.idents), rng.choice(self.idents)
        status = rng.choices(("PASSED", "FAILED", "SKIPPED"), weights=(90, 6, 4))[0]
        return f"tests/test_{a}.py::test_{b} {status} [{rng.randint(1, 100):>3}%]"

    # --- drawing ---------------------------------------------------------------------------------------------------
    def prose(self, rng: random.Random, n_sentences: int) -> str:
        out: list[str] = []
        for _ in range(max(1, n_sentences // 4)):
            out.append(" ".join(rng.choices(self.sentences, k=rng.randint(1, 4))))
        return "\n\n".join(out)

    def markdown_answer(self, rng: random.Random, size: int, lang: str) -> str:
        """An assistant answer of about `size` characters: paragraphs, a list, maybe a code block."""
        parts: list[str] = []
        total = 0
        while total < size:
            kind = rng.random()
            if kind < 0.45:
                part = self.prose(rng, rng.randint(2, 8))
            elif kind < 0.7:
                part = "\n".join(f"- {s}" for s in rng.choices(self.sentences, k=rng.randint(2, 6)))
            elif kind < 0.85:
                part = f"## {rng.choice(self.sentences)[:40].rstrip('.?!:')}"
            else:
                body = "\n".join(rng.choices(self.code[lang], k=rng.randint(3, 18)))
                part = f"```{lang}\n{body}\n```"
            parts.append(part)
            total += len(part) + 2
        return "\n\n".join(parts)

    def source_file(self, rng: random.Random, lang: str, n_lines: int) -> list[str]:
        return rng.choices(self.code[lang], k=n_lines)

    def numbered(self, lines: list[str], start: int = 1) -> str:
        """The Read tool's rendering: `     N→line` (U+2192)."""
        return "\n".join(f"{i:>6}→{line}" for i, line in enumerate(lines, start))

    def shell_output(self, rng: random.Random, n_lines: int) -> str:
        return "\n".join(rng.choices(self.shell, k=n_lines))

    def test_output(self, rng: random.Random, n_lines: int) -> str:
        lines = rng.choices(self.test_lines, k=n_lines)
        failed = sum(1 for line in lines if "FAILED" in line)
        summary = f"===== {n_lines - failed} passed, {failed} failed in {rng.uniform(0.5, 90):.2f}s ====="
        return "\n".join(["=" * 29 + " test session starts " + "=" * 30, *lines, summary])

    def diff(self, rng: random.Random, path: str, lang: str, n_lines: int) -> str:
        out = [
            f"--- a/{path}",
            f"+++ b/{path}",
            f"@@ -{rng.randint(1, 400)},{n_lines} +{rng.randint(1, 400)},{n_lines} @@",
        ]
        for line in rng.choices(self.code[lang], k=n_lines):
            out.append(rng.choice((" ", " ", " ", "-", "+")) + line)
        return "\n".join(out)


class Project:
    """A working directory a person runs agents in: its path, language and files."""

    def __init__(self, rng: random.Random, material: Material) -> None:
        self.home = rng.choice(HOMES)
        name = rng.choice(PROJECT_NAMES)
        self.cwd = f"{self.home}/{rng.choice(('projects', 'src', 'work', 'code'))}/{name}"
        if rng.random() < 0.15:
            self.cwd += f"-worktrees/{name}-{rand_token(rng, 3, string.ascii_lowercase + string.digits)}"
        self.lang = rng.choice(LANGS)
        self.branch = rng.choice(("main", "main", "master", "develop", f"feature/{rng.choice(material.idents)}", ""))
        ext = EXT[self.lang]
        folders = [rng.choice(material.idents) for _ in range(rng.randint(3, 9))]
        self.files = sorted(
            {f"{SRC[self.lang]}/{rng.choice(folders)}/{rng.choice(material.idents)}.{ext}" for _ in range(40)}
            | {"README.md", "pyproject.toml" if self.lang == "python" else "Makefile"}
        )

    def path(self, rng: random.Random) -> str:
        return f"{self.cwd}/{rng.choice(self.files)}"
