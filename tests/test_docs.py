"""The documentation says each thing once and truthfully, and public
docstrings speak of behaviour, not of the issues that asked for it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_issue_numbers_in_the_package() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "git_isopatch").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bissues? #?\d", line, re.IGNORECASE)
    ]
    assert not found, "name the behaviour or its source instead:\n" + "\n".join(found)


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if len(p) > 120]


def test_the_manual_page_says_each_paragraph_once() -> None:
    paragraphs = _paragraphs((ROOT / "man" / "git-isopatch.rst").read_text())
    repeated = {p for p in paragraphs if paragraphs.count(p) > 1}
    assert not repeated, repeated


def test_the_first_lines_promise_what_is_true() -> None:
    """The command can write refs, the stash and configuration (a linked
    worktree shares them): the opening lines promise only what git-isopatch
    itself does."""
    readme = " ".join((ROOT / "README.md").read_text().split("```")[0].split())
    page = (ROOT / "man" / "git-isopatch.rst").read_text()
    description = " ".join(page.split("DESCRIPTION\n===========")[1].split("\n\n")[1].split())
    for text in (readme, description):
        assert "never touched" not in text and "are never written to" not in text, text
        assert "git-isopatch itself never writes" in text, text


def test_the_python_example_says_who_deletes_the_private_folder() -> None:
    api = (ROOT / "README.md").read_text().split("### Python API")[1].split("\n## ")[0]
    assert "result.tmpdir" in api and "delete" in api
