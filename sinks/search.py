"""Full-text search over turns: DuckDB's fts extension (BM25), loaded offline from the duckdb-extension-fts wheel.

The index lives in the warehouse itself (schema `fts_main_turns`), so it is swapped in with the tables it indexes
and SQL users can rank with `fts_main_turns.match_bm25(turn_id, 'words')`. The extension only builds an index
whole; a load re-indexes just the sessions it replaced (`update_index`), in the extension's own tables.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from sinks.views import PROJECT

INDEX_SCHEMA = "fts_main_turns"
STEMMER = "porter"
# No stop words: the extension's English list (571 words) dropped `hello`, `first`, `new`, `help`, `still`, ... from
# every turn and every query, so `search hello` found nothing in 11 turns that say it. Measured on a 50 MB generated
# corpus (3,731 turns, on a shared 2-core machine): 700k -> 830k postings (+19 %), the warehouse 29.6 -> 29.4 MB (it
# compresses well), its build 3.6 -> 3.9 s.
STOPWORDS = "none"
# What the index was made with, kept in the warehouse's meta table: a warehouse whose index was made otherwise is
# rebuilt whole by the next run (an update would index new turns one way and keep old ones the other).
INDEX_SETTINGS = f"stemmer={STEMMER} stopwords={STOPWORDS}"
SNIPPET_CHARS = 160


class SearchUnavailable(RuntimeError):
    """The fts extension or the index is missing; the message says what to do."""


def extension_path() -> Path:
    """The fts extension built for the DuckDB in use, from the `duckdb-extension-fts` wheel (no network)."""
    spec = importlib.util.find_spec("duckdb_extension_fts")
    if spec is None or not spec.submodule_search_locations:
        raise SearchUnavailable(
            f"the DuckDB fts extension is not installed: install duckdb-extension-fts=={duckdb.__version__} "
            "(`uv sync` does)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{duckdb.__version__}"
    path = path / "fts.duckdb_extension"
    if not path.exists():
        raise SearchUnavailable(
            f"no fts extension for DuckDB {duckdb.__version__} in {path.parent.parent}: "
            f"install duckdb-extension-fts=={duckdb.__version__}"
        )
    return path


def load_extension(con: duckdb.DuckDBPyConnection) -> None:
    """LOAD fts by path: never INSTALL, which would fetch it from the network."""
    con.execute(f"LOAD '{extension_path()}'")


class OnCursor:
    """`work(cursor)` on a cursor of `con` in a thread, while the caller goes on with other statements on `con`.

    A cursor is a connection of its own to the same database, with temporary tables of its own, and it starts in the
    default catalog (`work` says `USE` to work in an attached one). DuckDB runs each connection's statement on its
    calling thread, so a statement here and one of the caller's take a core each.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, work: Callable[[duckdb.DuckDBPyConnection], None], *, name: str
    ) -> None:
        self._cursor = con.cursor()
        self._error: BaseException | None = None
        self._done = False
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
        try:
            work(self._cursor)
        except BaseException as exc:  # raised again in the caller's thread, by wait()
            self._error = exc

    def wait(self) -> None:
        """Wait for the work; raise what it raised, once."""
        if not self._done:
            self._thread.join()
            self._cursor.close()
            self._done = True
        error, self._error = self._error, None
        if error is not None:
            raise error

    def cancel(self) -> None:
        """Interrupt the work and wait for it, raising nothing (the caller has an error of its own to raise)."""
        if not self._done:
            self._cursor.interrupt()
        with contextlib.suppress(Exception):
            self.wait()


def has_index(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = 'docs'", [INDEX_SCHEMA]
    ).fetchone()
    return bool(row and row[0])


def create_index(con: duckdb.DuckDBPyConnection) -> None:
    """Create the extension's index on `turns` (no stop words, Porter stemmer), indexing what it holds.

    On an empty `turns` this is instant and gives the scaffold (schema, stop words, `match_bm25`) that
    `update_index` fills; on a full one it is the extension's own (slow: correlated updates) full build.
    """
    load_extension(con)
    con.execute(
        f"PRAGMA create_fts_index('turns', 'turn_id', 'text', stemmer = '{STEMMER}', stopwords = '{STOPWORDS}', "
        "overwrite = 1)"
    )


# Turn text indexed per statement, at most: the tokenized words of a chunk are materialised, and the warehouse
# connection has a memory limit (sinks.warehouse), so a whole build of a large corpus (a 5 GB one has ~460 MB of
# turn text) is done chunk by chunk instead of failing to pin memory.
CHUNK_TEXT_BYTES = 32 * 1024 * 1024


def update_index(
    con: duckdb.DuckDBPyConnection,
    sessions: str,
    texts: str = "turns",
    *,
    chunk_bytes: int = CHUNK_TEXT_BYTES,
    removed: str | None = None,
    tokenizer: str | None = None,
) -> None:
    """Re-index the turns of the sessions `sessions` (SQL yielding session_id) after their rows in `turns` changed.

    The extension can only rebuild the whole index; this applies the same tokenizer, stop words and stemmer to
    just these turns and keeps document frequencies and statistics as a rebuild would have them, so an
    append-one-session run stays cheap. Documents of turns no longer in `turns` go too. `texts` is a relation with
    the turns' `session_id`, `turn_id` and `text` (default the table).
    The sessions are indexed in chunks of about `chunk_bytes` of text, so memory stays bounded whatever their size.
    `removed` (SQL yielding turn_id): every turn deleted from `turns` since the index was last updated, when the
    caller knows them; without it they are found by comparing every document with `turns` (two whole scans).
    `tokenizer`: the index's `tokenize` macro as `tokenizer_of` gives it, when the caller kept it; else looked up.
    """
    load_extension(con)
    tokenizer = tokenizer_of(con) if tokenizer is None else tokenizer
    gone = "name NOT IN (SELECT turn_id FROM turns)" if removed is None else f"name IN ({removed})"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE fts_changed AS
            SELECT turn_id FROM turns WHERE session_id IN (SELECT DISTINCT s FROM ({sessions}) t(s))"""
    )
    _drop_gone(con, f"name IN (SELECT turn_id FROM fts_changed) OR {gone}")
    _index_sessions(con, sessions, texts, tokenizer, chunk_bytes)
    for temp in ("fts_changed", "fts_gone"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")


def add_documents(
    con: duckdb.DuckDBPyConnection,
    sessions: str,
    texts: str,
    *,
    tokenizer: str,
    chunk_bytes: int = CHUNK_TEXT_BYTES,
) -> None:
    """Index the turns of the sessions `sessions` as `texts` holds them (a table, or a parenthesised query with an
    alias, with `session_id`, `turn_id` and `text`), and bring the index's statistics up to date: the second half
    of `update_index`, for a change that dropped the documents of every turn it deleted (`drop_documents`) and
    knows where its sessions' new rows are. None of these turns has a document then (a turn id is its session's),
    so nothing is compared with the index, and `texts` can be the rows just loaded (a few Parquet files) instead of
    `turns` (three scans of a table that grows with the corpus: ~20 ms of a one-session change at 5 GB)."""
    load_extension(con)
    _index_sessions(con, sessions, texts, tokenizer, chunk_bytes)


def _index_sessions(
    con: duckdb.DuckDBPyConnection, sessions: str, texts: str, tokenizer: str, chunk_bytes: int
) -> None:
    """Tokenize and add the turns of `sessions` in `texts` (none of them indexed now) in chunks of about
    `chunk_bytes` of text, then the index's statistics."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE fts_sessions AS
            SELECT session_id, hash(session_id) AS h FROM (SELECT DISTINCT s AS session_id FROM ({sessions}) t(s))"""
    )
    row = con.execute(
        f"SELECT coalesce(sum(strlen(text)), 0) FROM {texts} WHERE session_id IN (SELECT session_id FROM fts_sessions)"
    ).fetchone()
    chunks = max(1, -(-int(row[0] if row else 0) // max(1, chunk_bytes)))
    for chunk in range(chunks):
        part = f"SELECT session_id FROM fts_sessions WHERE h % {chunks} = {chunk}"
        _tokenize(con, f"SELECT turn_id, text FROM {texts} WHERE session_id IN ({part})", _TEMP, tokenizer)
        _add_words(con, _TEMP)
    _finish(con)
    for temp in ("fts_sessions", *_TEMP):
        con.execute(f"DROP TABLE IF EXISTS {temp}")


def drop_documents(con: duckdb.DuckDBPyConnection, turns: str) -> None:
    """Remove the documents of the turns `turns` (SQL yielding turn_id) from the index, with their terms and their
    share of each term's document frequency: the first half of `update_index`, for a change that knows the turns it
    deleted before it inserts their sessions' new rows (`sinks.warehouse.Begun` does it beside the commit). The
    index is then brought up to date by `add_documents` once the rows are in."""
    _drop_gone(con, f"name IN ({turns})")
    con.execute("DROP TABLE IF EXISTS fts_gone")


def _drop_gone(con: duckdb.DuckDBPyConnection, which: str) -> None:
    """Drop the documents `which` (a condition on the index's `docs`) into temp table `fts_gone`, then from the
    index, with their terms and document frequencies."""
    x = INDEX_SCHEMA
    removal = [
        f"CREATE OR REPLACE TEMP TABLE fts_gone AS SELECT docid FROM {x}.docs WHERE {which}",
        f"""UPDATE {x}.dict SET df = dict.df - g.n
            FROM (SELECT termid, count(DISTINCT docid) AS n FROM {x}.terms
                  WHERE docid IN (SELECT docid FROM fts_gone) GROUP BY termid) g
            WHERE dict.termid = g.termid""",
        f"DELETE FROM {x}.terms WHERE docid IN (SELECT docid FROM fts_gone)",
        f"DELETE FROM {x}.docs WHERE docid IN (SELECT docid FROM fts_gone)",
    ]
    for sql in removal:
        con.execute(sql)


# A fresh build tokenizes its turns a group of files at a time, ahead of the statements that add them to the index.
# Tokenizing is most of an index's cost (~1.1 of 1.8 CPU s per 18 MB of text) and a group's statements read the
# dictionary the group before them wrote, so the groups are tokenized on cursors of their own, in threads, while
# one cursor adds them in order and the build's own connection inserts the tables: ~8 MB of text a group keeps the
# first and last steps, which have less beside them, short.
BUILD_GROUP_BYTES = 8 * 1024 * 1024
SCRATCH = "fts_scratch"  # an in-memory database the cursors share (a TEMP table is its connection's own)
TOKENIZERS = 2  # cursors that tokenize: once the tables are in, two keep both cores busy beside the one adding


def build_index(
    con: duckdb.DuckDBPyConnection,
    turn_files: Sequence[str],
    *,
    chunk_bytes: int = BUILD_GROUP_BYTES,
    tokenizer: str | None = None,
) -> None:
    """Index every turn of a fresh build (an empty index, from `create_index`) from the Parquet files of `turns`.

    A turns file holds whole sessions (one bucket), so a group of files is a group of sessions and each file is
    read once. (Chunks of sessions drawn from every file, as `update_index` makes them, had each chunk scan every
    file: the build grew with chunks x text, 19 of 27 s at 1 GB.) A group holds about `chunk_bytes` of text, from
    the files' metadata, so memory stays bounded as in `update_index`: a group is tokenized on a cursor of `con`
    in a thread (`_Ahead`) while `con` adds the group before it. `tokenizer` as in `update_index`.
    """
    if not turn_files:
        return  # no turns: the scaffold `create_index` made is the index
    load_extension(con)
    tokenizer = tokenizer_of(con) if tokenizer is None else tokenizer
    groups = [
        "SELECT turn_id, text FROM read_parquet(["
        + ", ".join(sql_string(f) for f in group)
        + "], union_by_name = true)"
        for group in _file_groups(turn_files, chunk_bytes)
    ]
    con.execute(f"ATTACH ':memory:' AS {SCRATCH}")
    try:
        ahead = _Ahead(con, groups, tokenizer)
        try:
            for number in range(len(groups)):
                tables = ahead.ready(number)
                _add_words(con, tables)
                for table in tables:
                    con.execute(f"DROP TABLE {table}")
                ahead.done(number)
        except BaseException:
            ahead.cancel()
            raise
        ahead.wait()
    finally:
        con.execute(f"DETACH {SCRATCH}")
    _finish(con)


class _Ahead:
    """The tokenizing side of a fresh build: `TOKENIZERS` cursors, each in a thread, tokenize the groups in turn into
    SCRATCH tables, at most TOKENIZERS groups ahead of the caller, which takes a group's tables with `ready(n)` and
    says `done(n)` once it has added them. The first error of a tokenizing thread is raised to the caller."""

    def __init__(self, con: duckdb.DuckDBPyConnection, groups: Sequence[str], tokenizer: str) -> None:
        row = con.execute("SELECT current_database()").fetchone()
        self._catalog = str(row[0]) if row else "memory"
        self._groups = groups
        self._tokenizer = tokenizer
        self._turn = threading.Condition()
        self._made: set[int] = set()  # groups tokenized
        self._added = 0  # groups the caller has added
        self._error: BaseException | None = None  # the first error a tokenizing thread raised
        self._stop = False
        self._workers = [
            OnCursor(con, functools.partial(self._run, first), name=f"fts-tokenize-{first}")
            for first in range(min(TOKENIZERS, len(groups)))
        ]

    def _tables(self, number: int) -> tuple[str, str]:
        return f"{SCRATCH}.docs_{number}", f"{SCRATCH}.words_{number}"

    def _run(self, first: int, cursor: duckdb.DuckDBPyConnection) -> None:
        try:
            cursor.execute(f"USE {_identifier(self._catalog)}")  # a cursor starts in the default catalog
            for number in range(first, len(self._groups), TOKENIZERS):
                with self._turn:
                    while not self._stop and number >= self._added + TOKENIZERS:
                        self._turn.wait()
                    if self._stop:
                        return
                _tokenize(cursor, self._groups[number], self._tables(number), self._tokenizer, stop=self._stopped)
                with self._turn:
                    self._made.add(number)
                    self._turn.notify_all()
        except BaseException as exc:
            with self._turn:
                if self._error is None and not self._stop:  # once stopped, what a thread raises is the interrupt
                    self._error = exc
                self._turn.notify_all()
            raise

    def _stopped(self) -> bool:
        return self._stop

    def ready(self, number: int) -> tuple[str, str]:
        """The tables of group `number` once tokenized; raises what a tokenizing thread raised (the others stopped)."""
        with self._turn:
            while number not in self._made and self._error is None:
                self._turn.wait()
            if number in self._made:
                return self._tables(number)
            error = self._error
        assert error is not None
        self.cancel()
        raise error

    def done(self, number: int) -> None:
        with self._turn:
            self._added = number + 1
            self._turn.notify_all()

    def wait(self) -> None:
        """Wait for every tokenizing thread; raise the first error one raised. A stop signal meanwhile (a
        KeyboardInterrupt in this thread, never a thread's error) stops the threads and goes on up: swallowed here,
        a stopped `watch` finished its load and recorded it `ok` while saying it was abandoned."""
        try:
            for worker in self._workers:
                with contextlib.suppress(Exception):  # a thread's own error: the first is self._error, raised below
                    worker.wait()
        except BaseException:
            self.cancel()
            raise
        if self._error is not None:
            raise self._error

    def cancel(self) -> None:
        """Stop tokenizing and wait for the threads, raising nothing (the caller has an error to raise)."""
        with self._turn:
            self._stop = True
            self._turn.notify_all()
        for worker in self._workers:
            worker.cancel()


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _file_groups(files: Sequence[str], chunk_bytes: int) -> list[list[str]]:
    """`files` in order, in consecutive groups of about `chunk_bytes` of uncompressed `text` each."""
    import pyarrow.parquet as pq

    groups: list[list[str]] = []
    size = 0
    for path in files:
        meta = pq.read_metadata(path)
        where = meta.schema.names.index("text") if "text" in meta.schema.names else None
        text = 0
        if where is not None:
            text = sum(meta.row_group(i).column(where).total_uncompressed_size for i in range(meta.num_row_groups))
        if not groups or (size and size + text > chunk_bytes):
            groups.append([])
            size = 0
        groups[-1].append(path)
        size += text
    return groups


def sql_string(text: str) -> str:
    """`text` as a SQL string literal (for what DuckDB takes no parameter for: file lists, ATTACH, SET)."""
    return "'" + text.replace("'", "''") + "'"


def _finish(con: duckdb.DuckDBPyConnection) -> None:
    """Drop words no document has any more, and set the statistics BM25 reads, as a rebuild would."""
    x = INDEX_SCHEMA
    con.execute(f"DELETE FROM {x}.dict WHERE df = 0")
    con.execute(
        f"""UPDATE {x}.stats SET num_docs = (SELECT count(docid) FROM {x}.docs),
                                 avgdl = (SELECT sum(len) / count(len) FROM {x}.docs)"""
    )


# The extension's tokenizer, as `create_fts_index` writes it with its default `ignore` pattern (a SQL string literal).
_MACRO = re.compile(
    r"string_split_regex\(regexp_replace\(lower\(strip_accents\(CAST\(s AS VARCHAR\)\)\), "
    r"(?P<ignore>'\[(?:[^']|'')*\]\+'), ' ', 'g'\), '\\s\+'\)"
)


def tokenizer_of(con: duckdb.DuckDBPyConnection) -> str:
    """The definition of the index's `tokenize` macro ("" without an index). It reads the catalog of every function
    (15-50 ms), so a warehouse keeps it in its meta table: the macro changes only when `create_index` makes it."""
    row = con.execute(
        "SELECT macro_definition FROM duckdb_functions() WHERE schema_name = ? AND function_name = 'tokenize'",
        [INDEX_SCHEMA],
    ).fetchone()
    return str(row[0]).strip() if row else ""


def _tokens(tokenizer: str, text: str) -> str:
    """SQL for the words the extension's `tokenize` macro gives for `text`, at about half its cost.

    The macro is `string_split_regex(regexp_replace(lower(strip_accents(s)), IGNORE, ' ', 'g'), '\\s+')`: the words
    are the runs of characters outside IGNORE and outside ASCII white space. `strip_accents` is most of its cost
    (utf8proc over every non-ASCII text, and most long texts hold one non-ASCII character somewhere). Here the raw text
    is split at the same separators first; an ASCII word only needs `lower`, and the few others get the macro's own
    `lower(strip_accents(w))`, split again (a stripped character can become a separator: `≠` is `=` plus a mark).
    The words are the same: every separator is ASCII, which neither function changes, and neither joins characters
    across one (marks are stripped before anything is composed, and `lower` maps one character at a time);
    `tests/test_search.py` compares the two on hostile text. An extension whose macro reads otherwise (`tokenizer`,
    its definition from `tokenizer_of`) gets its macro.
    """
    found = _MACRO.fullmatch(tokenizer)
    if found is None:
        return f"{INDEX_SCHEMA}.tokenize({text})"
    ignore = found["ignore"]
    split = "'[\\s" + ignore[2:]  # the same class with ASCII white space in it: '[\s0-9!@…-]+'
    return (
        f"flatten(list_transform(string_split_regex({text}, {split}), w -> CASE WHEN strlen(w) = length(w) "
        f"THEN [lower(w)] ELSE string_split_regex(lower(strip_accents(w)), {split}) END))"
    )


_TEMP = ("fts_new_docs", "fts_words")  # `update_index`'s tables of a chunk: TEMP, on its one connection


def _tokenize(
    con: duckdb.DuckDBPyConnection,
    rows: str,
    tables: tuple[str, str],
    tokenizer: str,
    *,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """The words of the turns `rows` (SQL yielding turn_id and text, none of them indexed now), as the extension's
    build takes them (tokenized, empty words and stop words out), into `tables`: (documents: `docid` from 0 in
    turn_id order, `name`; words: `docid`, `w`). TEMP tables when named as `_TEMP`, else tables of SCRATCH. `stop`
    is asked between the two statements (a cancelled build)."""
    docs, words = tables
    create = "CREATE OR REPLACE TEMP TABLE" if tables == _TEMP else "CREATE TABLE"
    con.execute(
        f"{create} {docs} AS SELECT row_number() OVER (ORDER BY turn_id) - 1 AS docid, turn_id AS name FROM ({rows})"
    )
    if stop():
        return
    # As the extension's own build: tokenize, then drop empty words and stop words (stemmed later, once per word).
    con.execute(
        f"""{create} {words} AS
            SELECT docid, w FROM (
                SELECT d.docid, unnest({_tokens(tokenizer, "c.text")}) AS w
                FROM ({rows}) c JOIN {docs} d ON d.name = c.turn_id)
            WHERE w IS NOT NULL AND len(w) > 0 AND w NOT IN (SELECT sw FROM {INDEX_SCHEMA}.stopwords)"""
    )


def _add_words(con: duckdb.DuckDBPyConnection, tables: tuple[str, str]) -> None:
    """Add the documents and words `_tokenize` made to the index, as the extension's build would: the documents'
    ids follow every id indexed so far, each distinct word is stemmed once (stemming every occurrence is most of
    the extension's build time), new terms join the dictionary and every term's document frequency grows."""
    x = INDEX_SCHEMA
    docs, words = tables
    row = con.execute(f"SELECT coalesce(max(docid), -1) + 1, (SELECT count(*) FROM {docs}) FROM {x}.docs").fetchone()
    base, count = (int(row[0]), int(row[1])) if row else (0, 0)
    if not count:
        return
    statements = [
        f"""CREATE OR REPLACE TEMP TABLE fts_stems AS
            SELECT w, stem(w, '{STEMMER}') AS term FROM (SELECT DISTINCT w FROM {words})""",
        f"""INSERT INTO {x}.dict (termid, term, df)
            SELECT (SELECT coalesce(max(termid), -1) FROM {x}.dict) + row_number() OVER (ORDER BY term), term, 0
            FROM (SELECT DISTINCT term FROM fts_stems) n
            WHERE NOT EXISTS (SELECT 1 FROM {x}.dict d WHERE d.term = n.term)""",
        f"""INSERT INTO {x}.docs (docid, name, len)
            SELECT {base} + d.docid, d.name, coalesce(c.n, 0)
            FROM {docs} d LEFT JOIN (SELECT docid, count(*) AS n FROM {words} GROUP BY docid) c USING (docid)""",
        # Each distinct word's term id, so that every word of the chunk is joined once, on a table of distinct words.
        f"""CREATE OR REPLACE TEMP TABLE fts_word_ids AS
            SELECT s.w, d.termid FROM fts_stems s JOIN {x}.dict d ON d.term = s.term""",
        f"""INSERT INTO {x}.terms (docid, fieldid, termid)
            SELECT {base} + w.docid, (SELECT fieldid FROM {x}.fields WHERE field = 'text'), i.termid
            FROM {words} w JOIN fts_word_ids i USING (w)""",
        # The new documents' ids follow every id indexed so far: their terms are read by a range of constants, which
        # DuckDB's zone maps keep to the rows just added (`docid IN (new docs)` scanned every term indexed so far,
        # so a build of many chunks grew with their square).
        f"""UPDATE {x}.dict SET df = dict.df + n.n
            FROM (SELECT termid, count(DISTINCT docid) AS n FROM {x}.terms
                  WHERE docid BETWEEN {base} AND {base + count - 1} GROUP BY termid) n
            WHERE dict.termid = n.termid""",
    ]
    for sql in statements:
        con.execute(sql)
    for temp in ("fts_stems", "fts_word_ids"):
        con.execute(f"DROP TABLE {temp}")


def _of_sessions(project: str | None, sessions: str | None) -> str:
    """A condition on a turn's session, or nothing: a semi-join, so that ranking still reads `turns` alone."""
    where = [f"({sessions})"] if sessions else []
    if project is not None:
        where.append(f"(coalesce({PROJECT}, '(none)') = $project OR s.cwd = $project)")
    if not where:
        return ""
    return f"AND t.session_id IN (SELECT s.session_id FROM sessions s WHERE {' AND '.join(where)})"


@dataclass(frozen=True, slots=True)
class Hit:
    score: float
    turn_id: str
    session_id: str
    agent: str
    role: str
    timestamp: datetime
    project: str
    cwd: str | None
    title: str | None
    snippet: str
    highlights: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of matched words in snippet


_WORD = re.compile(r"[^\W\d_]+")


def _fold(word: str) -> str:
    """Lower-case and strip accents, as the index does (strip_accents = 1, lower = 1)."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c))


def _stems(con: duckdb.DuckDBPyConnection, words: set[str]) -> dict[str, str]:
    """Porter stems of `words`, by the extension itself (an Arrow column: a long Python list converts slowly)."""
    if not words:
        return {}
    con.register("transcripts_stem_words", pa.table({"w": pa.array(sorted(words), pa.string())}))
    try:
        rows = con.execute(f"SELECT w, stem(w, '{STEMMER}') FROM transcripts_stem_words").fetchall()
    finally:
        con.unregister("transcripts_stem_words")
    return {str(w): str(s) for w, s in rows}


def _candidates(words: set[str], stems: set[str]) -> set[str]:
    """Words that may stem to one of `stems`: a Porter stem less its last letter starts the word (happy -> happi)."""
    prefixes = tuple(stem[:-1] or stem for stem in stems)
    return {w for w in words if w.startswith(prefixes)} if prefixes else set()


def _snippet(text: str, matched: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """About SNIPPET_CHARS of `text` around its first match, whitespace collapsed, matches re-based to it."""
    start = max(0, matched[0][0] - SNIPPET_CHARS // 3) if matched else 0
    # Widen to word boundaries (a little) so no word is cut in half.
    for _ in range(20):
        if start == 0 or text[start - 1].isspace():
            break
        start -= 1
    end = min(len(text), start + SNIPPET_CHARS)
    for _ in range(20):
        if end == len(text) or text[end].isspace():
            break
        end += 1
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    prefix = "…" if start > 0 else ""
    out.append(prefix)
    position += len(prefix)
    cursor = start
    for a, b in [(a, b) for a, b in matched if a >= start and b <= end] + [(end, end)]:
        piece = re.sub(r"\s+", " ", text[cursor:a])
        out.append(piece)
        position += len(piece)
        if a < b:
            out.append(text[a:b])
            spans.append((position, position + b - a))
            position += b - a
        cursor = b
    if end < len(text):
        out.append("…")
    return "".join(out), spans


def ignored_words(con: duckdb.DuckDBPyConnection, words: str) -> list[str]:
    """The words of `words` the index leaves out: none for an index made now (`STOPWORDS`), English stop words for
    an index made before (until the next run rebuilds it)."""
    stop = {str(r[0]) for r in con.execute(f"SELECT sw FROM {INDEX_SCHEMA}.stopwords").fetchall()}
    return sorted({_fold(w) for w in _WORD.findall(words)} & stop)


def search(
    con: duckdb.DuckDBPyConnection,
    words: str,
    *,
    agent: str | None = None,
    role: str | None = None,
    since: date | None = None,
    until: date | None = None,
    project: str | None = None,
    sessions: str | None = None,
    limit: int = 20,
) -> list[Hit]:
    """Turns ranked by BM25 for `words` (any of them; best first, ties by turn id), with filters.

    `since` and `until` (included) are days in the connection's view zone (`transcripts_timezone()`); `project` is a
    project as `turn_context` names it (its folder's name), or a working directory; `sessions` a condition on the
    `sessions` row (alias `s`) a hit's session must meet. Raises SearchUnavailable when the extension or the index is
    missing.
    """
    if not has_index(con):
        raise SearchUnavailable("the warehouse has no search index yet: run `transcripts run` to build it")
    load_extension(con)
    # Rank on turns alone (the index's own table), then fetch the session context of the best `limit` only.
    rows = con.execute(
        f"""WITH ranked AS (
                SELECT turn_id, score FROM (
                    SELECT t.turn_id, {INDEX_SCHEMA}.match_bm25(t.turn_id, $words) AS score
                    FROM turns t
                    WHERE ($agent IS NULL OR t.agent = $agent) AND ($role IS NULL OR t.role = $role)
                      AND ($since IS NULL OR CAST(timezone(transcripts_timezone(), t.timestamp) AS DATE) >= $since)
                      AND ($until IS NULL OR CAST(timezone(transcripts_timezone(), t.timestamp) AS DATE) <= $until)
                      {_of_sessions(project, sessions)}
                ) WHERE score IS NOT NULL ORDER BY score DESC, turn_id LIMIT $limit
            )
            SELECT r.score, c.turn_id, c.session_id, c.agent, c.role, c.timestamp, c.project, c.cwd, c.title, c.text
            FROM ranked r JOIN turn_context c USING (turn_id) ORDER BY r.score DESC, c.turn_id""",
        {"words": words, "agent": agent, "role": role, "since": since, "until": until, "limit": limit}
        | ({"project": project} if project is not None else {}),
    ).fetchall()
    terms = {_fold(w) for w in _WORD.findall(words)} - set(ignored_words(con, words))
    query_stems = _stems(con, terms)
    wanted = set(query_stems.values())
    text_words = {_fold(m.group()) for row in rows for m in _WORD.finditer(str(row[9]))}
    stems = query_stems | _stems(con, _candidates(text_words, wanted))
    hits = []
    for score, turn_id, session_id, agent_, role_, ts, project, cwd, title, text in rows:
        matched = [(m.start(), m.end()) for m in _WORD.finditer(text) if stems.get(_fold(m.group())) in wanted]
        snippet, spans = _snippet(text, matched)
        hits.append(Hit(float(score), turn_id, session_id, agent_, role_, ts, project, cwd, title, snippet, spans))
    return hits
