"""The docs live in the repository: every Markdown page the code cites exists (with the section it names), every
relative link in README.md and docs/ resolves, and the README stays short (docs/contributing.md "Tests")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("extractors", "transforms", "sinks", "flows", "bench", "tests")
README_MAX_LINES = 250

# Files the agents themselves read (project instructions, skills) or write (Aider's chat history): named in comments
# and test data as what an agent injects or keeps, not cited as documentation of this project.
AGENTS_OWN_FILES = frozenset({"AGENTS.md", "CLAUDE.md", "GEMINI.md", "SKILL.md", ".aider.chat.history.md"})

# A Markdown path in code: not preceded by a word character or a backslash (`"\nREADME.md"` in test data is
# `README.md`), optionally followed by a quoted section name on the same line: docs/agents/claude.md "Record types".
CITATION = re.compile(r'(?<![\w\\/])((?:[\w.-]+/)*[\w.-]+\.md)\b(?: "([^"\n]+)")?')
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _code_files() -> list[Path]:
    here = Path(__file__).resolve()  # this file names pages only as patterns
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py") if p.resolve() != here)


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _resolve(name: str, citing: Path) -> Path | None:
    """The cited page: from the repository root, else beside the citing file, else under docs/."""
    for base in (ROOT, citing.parent, ROOT / "docs"):
        if (base / name).is_file():
            return base / name
    return None


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _headings(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return [re.sub(r"[`*]", "", h).strip() for h in HEADING.findall(text)]


def _citations() -> list[tuple[Path, int, str, str | None]]:
    found = []
    for path in _code_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in CITATION.finditer(line):
                if match.group(1) not in AGENTS_OWN_FILES:
                    found.append((path, number, match.group(1), match.group(2)))
    return found


def test_the_code_cites_pages() -> None:
    cited = {name for _, _, name, _ in _citations()}
    assert {"docs/agents/claude.md", "docs/design.md", "docs/analysis.md"} <= cited


def test_every_cited_page_exists_with_its_section() -> None:
    problems = []
    for path, number, name, section in _citations():
        where = f"{path.relative_to(ROOT)}:{number}"
        page = _resolve(name, path)
        if page is None:
            problems.append(f"{where}: {name} does not exist")
        elif section is not None and section not in _headings(page):
            problems.append(f'{where}: {name} has no section "{section}"')
    assert not problems, "\n".join(problems)


def test_every_relative_link_resolves() -> None:
    problems = []
    for page in _pages():
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
        for match in LINK.finditer(text):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if file_part and not linked.exists():
                problems.append(f"{page.relative_to(ROOT)}: {target} does not resolve")
                continue
            if anchor and linked.is_dir():
                linked = linked / "README.md"
            if anchor and linked.suffix == ".md" and anchor not in {_anchor(h) for h in _headings(linked)}:
                problems.append(f"{page.relative_to(ROOT)}: {target} has no such section")
    assert not problems, "\n".join(problems)


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_agent_has_a_row_in_the_readme_and_the_agents_table() -> None:
    from extractors.registry import specs

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = (ROOT / "docs" / "agents" / "README.md").read_text(encoding="utf-8")
    for spec in specs():
        assert f"| [{spec.display}](docs/agents/{spec.name}.md) |" in readme, f"README.md: no row for {spec.name}"
        assert f"| [`{spec.name}`]({spec.name}.md) |" in table, f"docs/agents/README.md: no row for {spec.name}"
