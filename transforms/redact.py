"""Pure: secrets in text -> markers naming the rule and a keyed hash, with what was found (never the value).

The rules are data (`transforms/rules/secrets.toml`, each with its source); they are compiled once per process
with RE2 (`google-re2`), whose matching time is linear in the text whatever the text or the pattern, so hostile
input (long runs of near-matches) cannot stall a run. One pass of one automaton over the text (an RE2 set of every
keyword and trigger) decides which rules run at all (as gitleaks does): most text is scanned once, and never by a
rule's regex.

No filesystem, clock or environment beyond reading the packaged rules: the per-corpus key is passed in as bytes.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import hmac
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import re2

MARKER_PREFIX = "[REDACTED:"
HMAC_HEX = 12  # 48 bits of HMAC-SHA256: enough to tell secrets of one corpus apart, too few to be a fingerprint
KEY_BYTES = 32
ENGINE_VERSION = "1"  # bump when this module changes what it writes for the same rules
CONTEXT_BEFORE = 50  # bytes of identifier before a match that allow_context sees (gitleaks' [\w.-]{0,50} prefix)
_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_DIGITS = frozenset(b"0123456789")
MEMO_CHARS = 256  # texts up to this length are remembered by a Redactor (they repeat); longer ones are not
MEMO_ENTRIES = 4096


class RulesError(ValueError):
    """The rules file is malformed (a bug in this checkout, not something a user did)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One redacted value: the rule that found it and the keyed hash in its marker."""

    rule: str
    digest: str


class _Compiled:
    """The regexes of a rule, compiled on first use: most rules never run in a process (their keywords never
    occur), and compiling all of them up front would cost every worker process a noticeable fraction of a second."""

    __slots__ = ("allow", "allow_context", "regex")

    def __init__(self, rule: Rule) -> None:
        self.regex = _compile(rule.pattern, f"rule {rule.id}")
        self.allow = tuple(_compile(p, f"rule {rule.id} allow") for p in rule.allow)
        self.allow_context = tuple(_compile(p, f"rule {rule.id} allow_context") for p in rule.allow_context)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    source: str
    description: str
    pattern: str
    keywords: tuple[str, ...]
    trigger: str | None
    entropy: float | None
    require_digit: bool
    allow: tuple[str, ...]
    allow_context: tuple[str, ...]
    stopwords: tuple[bytes, ...]

    def accepts(self, compiled: _Compiled, secret: bytes, data: bytes, start: int, end: int) -> bool:
        """True when `secret` (at data[start:end] of a match) passes this rule's filters."""
        if self.entropy is not None and shannon_entropy(secret) <= self.entropy:
            return False
        if self.require_digit and not _DIGITS.intersection(secret):
            return False
        if any(a.search(secret) for a in compiled.allow):
            return False
        if self.stopwords:
            lowered = secret.lower()
            if any(word in lowered for word in self.stopwords):
                return False
        if compiled.allow_context:
            begin = start
            while begin > 0 and start - begin < CONTEXT_BEFORE and data[begin - 1] in _IDENT:
                begin -= 1
            context = data[begin:end]
            if any(a.search(context) for a in compiled.allow_context):
                return False
        return True


@dataclass(frozen=True, slots=True)
class RuleSet:
    version: str  # the redaction version: engine version and a hash of the rules file
    rules: tuple[Rule, ...]
    sources: dict[str, dict[str, str]]
    triggers: Any  # re2.Set of the triggers: which of them occur
    enables: tuple[tuple[int, ...], ...]  # per trigger: the rules it makes run
    compiled: dict[int, _Compiled]  # per rule index, filled on first use

    def regexes(self, index: int) -> _Compiled:
        found = self.compiled.get(index)
        if found is None:
            found = self.compiled[index] = _Compiled(self.rules[index])
        return found

    def compile_all(self) -> None:
        """Compile every rule now (tests: a rule RE2 refuses fails here, not in the middle of a run)."""
        for index in range(len(self.rules)):
            self.regexes(index)


def shannon_entropy(data: bytes) -> float:
    """Bits per byte of `data` (gitleaks' entropy filter)."""
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in (data.count(b) for b in set(data)))


def _options(*, case_insensitive: bool = False) -> Any:
    opts = re2.Options()
    opts.max_mem = 64 << 20  # room for the DFA of the larger rules, so RE2 stays on its fast path
    opts.log_errors = False
    if case_insensitive:
        opts.case_sensitive = False
    return opts


def _compile(pattern: str, where: str, *, case_insensitive: bool = False) -> Any:
    try:
        return re2.compile(pattern.encode(), options=_options(case_insensitive=case_insensitive))
    except re2.error as exc:
        raise RulesError(f"{where}: not an RE2 pattern: {exc}") from None


def parse_rules(raw: bytes) -> RuleSet:
    """The rule set of a rules file (TOML). Raises RulesError."""
    try:
        doc = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulesError(f"the rules file is not TOML: {exc}") from None
    sources = {str(k): {str(a): str(b) for a, b in v.items()} for k, v in doc.get("sources", {}).items()}
    rules: list[Rule] = []
    seen: set[str] = set()
    for n, item in enumerate(doc.get("rules", [])):
        rid = str(item.get("id", ""))
        where = f"rule {n} ({rid or 'no id'})"
        if not rid or rid in seen:
            raise RulesError(f"{where}: every rule needs an id of its own")
        if item.get("source") not in sources:
            raise RulesError(f"{where}: source must be one of {', '.join(sources)}")
        seen.add(rid)
        entropy = item.get("entropy")
        trigger = item.get("trigger")
        if "regex" not in item or (trigger is not None and item.get("keywords")):
            raise RulesError(f"{where}: needs a regex, and keywords or a trigger (not both)")
        rules.append(
            Rule(
                id=rid,
                source=str(item["source"]),
                description=str(item.get("description", "")),
                pattern=str(item["regex"]),
                keywords=tuple(str(k).lower() for k in item.get("keywords", [])),
                trigger=None if trigger is None else str(trigger),
                entropy=None if entropy is None else float(entropy),
                require_digit=bool(item.get("require_digit", False)),
                allow=tuple(str(p) for p in item.get("allow", [])),
                allow_context=tuple(str(p) for p in item.get("allow_context", [])),
                stopwords=tuple(str(w).lower().encode() for w in item.get("stopwords", [])),
            )
        )
    # The triggers: every keyword (a literal, any case), each rule's own trigger regex, and the whole pattern of
    # a rule with neither. One set match over all of them says which rules to run (for most texts: none).
    # An RE2 set cannot fall back to the NFA as a single regex does when its DFA cache fills, and so never gives up
    # on a text (RE2's dfa.cc: a set "keeps on keeping on", slower): no text goes unscanned. It is also cheaper
    # than a search for any trigger first: that search scans a text without one to its end as well, and costs
    # more per call (measured in docs/benchmarks.md "Redaction").
    words = sorted({k for r in rules for k in r.keywords})
    triggers = [re2.escape(w.encode()).decode() for w in words]
    enables = [tuple(i for i, r in enumerate(rules) if w in r.keywords) for w in words]
    for i, r in enumerate(rules):
        if r.trigger is not None or not r.keywords:
            triggers.append(f"(?-i:{r.trigger if r.trigger is not None else r.pattern})")
            enables.append((i,))
    trigger_set = re2.Set.SearchSet(_options(case_insensitive=True))
    for trigger in triggers:
        trigger_set.Add(trigger.encode())
    trigger_set.Compile()
    return RuleSet(_version(raw, doc), tuple(rules), sources, trigger_set, tuple(enables), {})


@functools.cache
def _rules_file() -> bytes:
    return resources.files("transforms").joinpath("rules/secrets.toml").read_bytes()


@functools.cache
def ruleset() -> RuleSet:
    """The packaged rules, compiled once per process."""
    return parse_rules(_rules_file())


def version_of(raw: bytes) -> str:
    """The redaction version of a rules file: this engine's version, the file's own, and a hash of its bytes."""
    try:
        doc = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulesError(f"the rules file is not TOML: {exc}") from None
    return _version(raw, doc)


def _version(raw: bytes, doc: dict[str, Any]) -> str:
    return f"{ENGINE_VERSION}.{doc.get('version', '0')}.{hashlib.sha256(raw).hexdigest()[:8]}"


@functools.cache
def redaction_version() -> str:
    """What the parser version of every source carries while redaction is on (`+r<this>`); no compiling."""
    return version_of(_rules_file())


def version_suffix(enabled: bool) -> str:
    """The suffix of every effective parser version: `+r<redaction version>`, or `+raw` with redaction off."""
    return f"+r{redaction_version()}" if enabled else "+raw"


def _overlaps(taken: list[tuple[int, int, str]], start: int, end: int) -> bool:
    """Whether [start, end) overlaps a span of `taken` (sorted, non-overlapping)."""
    at = bisect.bisect_left(taken, (start,))
    if at < len(taken) and taken[at][0] < end:
        return True
    return at > 0 and taken[at - 1][1] > start


def _odd_backslashes(data: bytes, start: int, end: int) -> bool:
    n = 0
    while end - n > start and data[end - n - 1] == 0x5C:
        n += 1
    return n % 2 == 1


def marker(rule: str, digest: str) -> str:
    return f"{MARKER_PREFIX}{rule}:hmac={digest}]"


class Redactor:
    """Replaces secrets in text by markers; `Redactor(None)` (raw mode) returns every text unchanged.

    Picklable as its key alone: a worker process compiles the rules once, on first use.
    """

    __slots__ = ("_key", "_memo", "_rules")

    def __init__(self, key: bytes | None, rules: RuleSet | None = None) -> None:
        if key is not None and len(key) < 16:
            raise ValueError("a redaction key has at least 16 bytes")
        self._key = key
        self._rules = rules
        # Short texts repeat (a session's cwd and branch, `git status`, "main"): their results are kept, up to
        # MEMO_ENTRIES of them (then forgotten at once). Long texts are not: hashing one costs a third of its scan,
        # and they seldom repeat.
        self._memo: dict[str, tuple[str, tuple[Finding, ...]]] = {}

    def __reduce__(self) -> tuple[Any, tuple[bytes | None]]:
        return (Redactor, (self._key,))

    def __repr__(self) -> str:
        return "Redactor(redacting)" if self._key is not None else "Redactor(raw)"  # never the key

    @property
    def enabled(self) -> bool:
        return self._key is not None

    @property
    def suffix(self) -> str:
        return f"+r{self.rules.version}" if self.enabled else "+raw"

    @property
    def rules(self) -> RuleSet:
        if self._rules is None:
            self._rules = ruleset()
        return self._rules

    def digest(self, secret: bytes) -> str:
        assert self._key is not None
        return hmac.new(self._key, secret, hashlib.sha256).hexdigest()[:HMAC_HEX]

    def redact(self, text: str) -> tuple[str, list[Finding]]:
        """`text` with every secret replaced by its marker, and the findings in order. Unchanged when raw."""
        if self._key is None or not text:
            return text, []
        if len(text) > MEMO_CHARS:
            return self._redact(text)
        known = self._memo.get(text)
        if known is None:
            out, findings = self._redact(text)
            if len(self._memo) >= MEMO_ENTRIES:
                self._memo.clear()
            known = self._memo[text] = (out, tuple(findings))
        return known[0], list(known[1])

    def _redact(self, text: str) -> tuple[str, list[Finding]]:
        rules = self.rules
        data = text.encode("utf-8", "surrogatepass")  # the extractors keep lone surrogates; so does this
        matched = rules.triggers.Match(data)
        if not matched:
            return text, []
        chosen = sorted({i for t in matched for i in rules.enables[t]})
        spans = self._spans(data, rules, chosen)
        if not spans:
            return text, []
        out: list[bytes] = []
        findings: list[Finding] = []
        pos = 0
        for start, end, rule in spans:
            secret = data[start:end]
            found = Finding(rule, self.digest(secret))
            findings.append(found)
            out.append(data[pos:start])
            out.append(marker(found.rule, found.digest).encode())
            pos = end
        out.append(data[pos:])
        return b"".join(out).decode("utf-8", "surrogatepass"), findings

    @staticmethod
    def _spans(data: bytes, rules: RuleSet, chosen: Sequence[int]) -> list[tuple[int, int, str]]:
        """Non-overlapping (start, end, rule id) of the secrets, earlier rules first, sorted by position."""
        taken: list[tuple[int, int, str]] = []  # sorted, non-overlapping: a bisect finds a clash in log time
        for index in chosen:
            rule, compiled = rules.rules[index], rules.regexes(index)
            groups = range(1, (compiled.regex.groups or 0) + 1)
            for match in compiled.regex.finditer(data):
                start, end = match.span()
                for g in groups:
                    gs, ge = match.span(g)
                    if gs >= 0 and ge > gs:
                        start, end = gs, ge
                        break
                while end > start and _odd_backslashes(data, start, end):
                    end -= 1  # never end inside an escape (\" in JSON text): the marker would break the JSON
                if end <= start or _overlaps(taken, start, end):
                    continue
                if rule.accepts(compiled, data[start:end], data, match.start(), match.end()):
                    bisect.insort(taken, (start, end, rule.id))
        return taken
