"""Redaction: every rule finds its planted secret in every text column of every agent; ordinary text is untouched."""

from __future__ import annotations

import pickle
import re
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from extractors.model import Agent, Loaded, Role, Session, Source, ToolCall, Turn
from extractors.registry import agents
from tests.secrets_planted import ORDINARY, PLANTED
from transforms.normalize import session_tables
from transforms.redact import MARKER_PREFIX, Redactor, RulesError, parse_rules, ruleset, shannon_entropy, version_of

KEY = bytes(range(32))
MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+):hmac=([0-9a-f]{12})\]")
START = datetime(2026, 3, 1, 10, tzinfo=UTC)


def test_the_rules_compile_in_re2_and_name_their_source() -> None:
    rules = ruleset()
    rules.compile_all()
    assert len(rules.rules) >= 50
    for name, source in rules.sources.items():
        assert source.get("url") and source.get("licence"), name
    for rule in rules.rules:
        assert rule.source in rules.sources and rule.description, rule.id
        assert rule.keywords or rule.trigger or rule.id == "discord-bot-token", f"{rule.id} would scan every text"


def test_every_rule_has_a_planted_secret() -> None:
    assert set(PLANTED) == {r.id for r in ruleset().rules}


@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_each_rule_finds_its_planted_secret(rule: str) -> None:
    text, secret = PLANTED[rule]
    out, findings = Redactor(KEY).redact(text)
    assert secret not in out
    assert [f.rule for f in findings] == [rule], out
    assert MARKER.findall(out) == [(rule, findings[0].digest)]


def test_the_same_secret_gives_the_same_marker_and_another_key_another_one() -> None:
    text, secret = PLANTED["github-pat"]
    first, _ = Redactor(KEY).redact(text)
    again, _ = Redactor(KEY).redact(f"later: {secret}")
    other, _ = Redactor(bytes(32)).redact(text)
    assert MARKER.findall(first) == MARKER.findall(again)
    assert MARKER.findall(first) != MARKER.findall(other)


def test_ordinary_text_and_code_is_untouched() -> None:
    redactor = Redactor(KEY)
    touched = [(text, redactor.redact(text)[0]) for text in ORDINARY if redactor.redact(text)[1]]
    assert touched == []
    print(f"precision: {len(ORDINARY) - len(touched)}/{len(ORDINARY)} ordinary texts untouched")


def test_raw_mode_changes_nothing() -> None:
    text, _ = PLANTED["jwt"]
    assert Redactor(None).redact(text) == (text, [])
    assert not Redactor(None).enabled and Redactor(None).suffix == "+raw"


def test_a_secret_inside_json_text_leaves_valid_json() -> None:
    import json

    _, secret = PLANTED["private-key"]
    payload = json.dumps({"command": "cat key", "content": secret, "jwt": PLANTED["jwt"][1] + "\\"})
    out, findings = Redactor(KEY).redact(payload)
    assert {f.rule for f in findings} == {"private-key", "jwt"}
    assert json.loads(out)["content"].startswith(MARKER_PREFIX)


def test_the_redactor_pickles_as_its_key_for_worker_processes() -> None:
    again = pickle.loads(pickle.dumps(Redactor(KEY)))
    text, _ = PLANTED["stripe-access-token"]
    assert again.redact(text) == Redactor(KEY).redact(text)


def test_a_changed_rules_file_changes_the_version() -> None:
    raw = b'version = "1"\n[sources.x]\nurl = "u"\nlicence = "l"\n'
    rule = b'[[rules]]\nid = "a"\nsource = "x"\nregex = "abc"\nkeywords = ["abc"]\n'
    assert version_of(raw + rule) != version_of(raw + rule.replace(b"abc", b"abd"))
    assert parse_rules(raw + rule).rules[0].id == "a"


@pytest.mark.parametrize(
    "bad",
    [
        b'[sources.x]\nurl = "u"\n[[rules]]\nid = "a"\nsource = "nope"\nregex = "a"\nkeywords = ["a"]\n',
        b'[sources.x]\nurl = "u"\n[[rules]]\nid = "a"\nsource = "x"\nkeywords = ["a"]\n',
        b'[sources.x]\nurl = "u"\n[[rules]]\nid = "a"\nsource = "x"\nregex = "(a)\\\\1"\nkeywords = ["a"]\n',
        b"not toml [",
    ],
)
def test_a_malformed_rules_file_is_refused(bad: bytes) -> None:
    with pytest.raises(RulesError):
        parse_rules(bad).compile_all()


def test_entropy_is_bits_per_byte() -> None:
    assert shannon_entropy(b"aaaa") == 0.0
    assert shannon_entropy(b"abcd") == 2.0


def _session(agent: Agent, text: str, n: int) -> Loaded:
    sid = f"{agent}-s{n}"
    ses = Session(
        agent=agent,
        session_id=sid,
        native_id=f"s{n}",
        started_at=START,
        cwd=f"/home/u/{text}" if n % 7 == 0 else "/home/u/proj",
        git_branch=text if n % 5 == 0 else "main",
        title=f"about {text}",
        turns=(
            Turn(0, Role.USER, f"please use {text}", START),
            Turn(1, Role.ASSISTANT, f"I used:\n{text}\nand it worked", START, "m"),
        ),
        tool_calls=(ToolCall("c1", 1, "Bash", '{"command": ' + _json_str(text) + "}", f"$ run\n{text}\n", False),),
    )
    return Loaded(Source(agent, f"/x/{sid}", 1, 1), ses)


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)


def _cells(tables: dict[str, pa.Table]) -> list[tuple[str, str, str | None]]:
    out = []
    for table, columns in {
        "turns": ("text",),
        "tool_calls": ("input", "output"),
        "sessions": ("title", "cwd", "git_branch"),
    }.items():
        t = tables[table]
        for col in columns:
            for sid, value in zip(t.column("session_id").to_pylist(), t.column(col).to_pylist(), strict=True):
                out.append((sid, f"{table}.{col}", value))
    return out


def test_recall_every_rule_in_every_text_column_of_every_agent() -> None:
    """Planted: every rule's secret in turn text (both roles), tool input and output, title, and (in some
    sessions) the cwd and git branch, of a session of every agent. None may survive anywhere."""
    loaded, secret_of = [], {}
    for agent in agents():
        for n, rule in enumerate(sorted(PLANTED)):
            text, secret = PLANTED[rule]
            item = _session(agent, text, n)
            loaded.append(item)
            secret_of[item.session.session_id] = (rule, secret)
    versions = {a: "1+rX" for a in agents()}
    tables = session_tables(loaded, versions, Redactor(KEY))
    planted = found = 0
    misses = []
    for sid, column, value in _cells(tables):
        rule, secret = secret_of[sid]
        if column in ("sessions.cwd", "sessions.git_branch") and value in ("/home/u/proj", "main"):
            continue  # this session has no secret there
        planted += 1
        if value is not None and secret not in value and f"[REDACTED:{rule}:" in value:
            found += 1
        else:
            misses.append((sid, column, value))
    print(
        f"recall: {found}/{planted} planted secrets redacted by their rule ({len(PLANTED)} rules, "
        f"{len(agents())} agents)"
    )
    assert misses == []
    audit = tables["redactions"]
    assert audit.num_rows >= planted
    assert set(audit.column("column_name").to_pylist()) == {
        "turns.text",
        "tool_calls.input",
        "tool_calls.output",
        "sessions.title",
        "sessions.cwd",
        "sessions.git_branch",
    }
    every_value = " ".join(str(v) for col in audit.columns for v in col.to_pylist())
    assert not any(secret in every_value for _, secret in secret_of.values())  # the audit holds no value


def test_the_audit_names_turn_and_call_and_counts_repeats() -> None:
    text, secret = PLANTED["gitlab-pat"]
    item = _session(Agent("codex"), f"{text} and again {secret}", 1)
    tables = session_tables([item], {Agent("codex"): "1+rX"}, Redactor(KEY))
    rows = tables["redactions"].to_pylist()
    by_column = {r["column_name"]: r for r in rows}
    turns = sorted((r["turn_id"], r["tool_call_id"]) for r in rows if r["column_name"] == "turns.text")
    assert turns == [("codex-s1-0", None), ("codex-s1-1", None)]
    assert by_column["tool_calls.output"]["tool_call_id"] == "codex-s1-call-c1"
    assert by_column["tool_calls.output"]["turn_id"] == "codex-s1-1"
    assert by_column["sessions.title"]["turn_id"] is None
    assert {r["count"] for r in rows} == {2} and {r["rule"] for r in rows} == {"gitlab-pat"}
    assert len({r["secret_hmac"] for r in rows}) == 1


def test_raw_sessions_have_no_audit_and_keep_their_text() -> None:
    text, _ = PLANTED["aws-access-token"]
    tables = session_tables([_session(Agent("claude"), text, 1)], {Agent("claude"): "1+raw"}, Redactor(None))
    assert tables["redactions"].num_rows == 0
    assert text in tables["turns"].column("text").to_pylist()[0]


def _base64_blob(n: int, seed: int = 7) -> str:
    """`n` bytes of base64 text (an inlined image, a key store): every position could begin a token or a scheme."""
    import base64
    import random

    return base64.b64encode(random.Random(seed).randbytes(n * 3 // 4)).decode()


def test_pathological_inputs_finish() -> None:
    """Long runs of near-matches for every kind of rule: RE2 is linear, so these end (the time bound is measured
    in the benchmark, not asserted here)."""
    near = [
        "key=" * 20000,
        "api_key = " + "a1" * 40000,
        "://" + "u:" * 30000 + "@" * 10,
        "-----BEGIN RSA PRIVATE KEY-----" + "A" * 200000,
        "eyJ" + "a" * 50000 + ".eyJ" + "b" * 50000 + ".",
        "xoxb-" + "1" * 100000,
        ("AKIA" + "A" * 15 + " ") * 5000,
        "M" + "a" * 24 + "." * 100000,
        "Authorization: Bearer " + "=" * 200000,
        ("token" + " " * 19 + ":" + "'" * 5) * 5000,
        _base64_blob(300_000) + " postgres://app:s3cret@db/x",  # url-password's regex over a whole blob
    ]
    redactor = Redactor(KEY)
    for text in near:
        out, _ = redactor.redact(text)
        assert len(out) > 0


def test_a_repeated_short_text_gives_the_same_result_and_findings_of_its_own() -> None:
    text, secret = PLANTED["github-pat"]
    redactor = Redactor(KEY)
    first, found = redactor.redact(text)
    found.clear()  # a caller's list is its own: the remembered result is not changed through it
    again, found_again = redactor.redact(text)
    assert secret not in first and again == first
    assert [f.rule for f in found_again] == ["github-pat"]
    long_text = text + " " * 300  # past the remembered length: redacted afresh, the same way
    assert redactor.redact(long_text) == Redactor(KEY).redact(long_text)


def test_a_secret_after_text_that_overflows_the_automaton_cache_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger pass is an RE2 set, which never gives up on a text (a single RE2 regex falls back to its NFA
    when its DFA cache overflows; a set cannot, and keeps going): with a cache far too small for this text,
    secrets after it are still found."""
    import random

    import transforms.redact as redact

    real = redact._options

    def tiny(*, case_insensitive: bool = False) -> object:
        opts = real(case_insensitive=case_insensitive)
        opts.max_mem = 256 << 10
        return opts

    monkeypatch.setattr(redact, "_options", tiny)
    rules = parse_rules(redact._rules_file())
    noise = "".join(random.Random(5).choice("MNOabc123_-.") for _ in range(100_000))  # discord-token prefixes
    for rule in ("aws-access-token", "github-pat", "private-key"):
        text, secret = PLANTED[rule]
        out, findings = Redactor(KEY, rules).redact(f"{noise} {text} {noise}")
        assert secret not in out and rule in {f.rule for f in findings}, rule
