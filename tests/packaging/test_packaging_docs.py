"""The documentation says each thing once and truthfully: public
docstrings speak of behaviour, not of the issues that asked for it, and the
documented pipelines work as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

ROOT = Path(__file__).resolve().parents[2]


def _applying_lines(text: str, rst: bool) -> list[str]:
    """Lines of a document's examples (a README code block, an indented
    man page block) that run ``git apply`` to change files (not ``--stat``
    or ``--check``), and every hint that shows one."""
    lines, in_block = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        example = in_block or (rst and line.startswith("    ")) or "hint: " in line
        if (
            example
            and re.search(r"git (-C \S+ )?apply ", line)
            and "--stat" not in line
            and "--check" not in line
        ):
            lines.append(line)
    return lines


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if len(p) > 120]


def test_documented_pipelines_do_not_depend_on_apply_whitespace() -> None:
    for name in ("README.md", "man/git-isopatch.rst"):
        lines = _applying_lines((ROOT / name).read_text(), name.endswith(".rst"))
        assert lines, name
        for line in lines:
            assert "--whitespace=nowarn" in line, (name, line)


@pytest.mark.parametrize("setting", ["error", "fix"])
def test_the_documented_pipeline_reproduces_trailing_blanks(env, make_repo, setting) -> None:
    """``apply.whitespace=error`` would refuse the patch, ``fix`` would
    strip the blanks; the README's pipeline does neither."""
    repo = make_repo()
    git("config", "apply.whitespace", setting, cwd=repo, env=env)
    script = "printf 'blank  \\ntab\\t\\n' > README"
    made = isopatch("--stdout", "--", "sh", "-c", script, cwd=repo, env=env)
    assert made.returncode == 0, made.err
    readme = [
        line for line in (ROOT / "README.md").read_text().splitlines() if "| git apply" in line
    ]
    apply_args = readme[0].split("| git ", 1)[1].split("#")[0].split()
    git(*apply_args, cwd=repo, env=env, input=made.stdout)
    assert (repo / "README").read_bytes() == b"blank  \ntab\t\n"


def test_no_issue_numbers_in_the_package() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "git_isopatch").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bissues? #?\d", line, re.IGNORECASE)
    ]
    assert not found, "name the behaviour or its source instead:\n" + "\n".join(found)


def test_the_manual_page_says_each_paragraph_once() -> None:
    paragraphs = _paragraphs((ROOT / "man" / "git-isopatch.rst").read_text())
    repeated = {p for p in paragraphs if paragraphs.count(p) > 1}
    assert not repeated, repeated


def _plain_words(paragraph: str) -> str:
    """A paragraph without its markup (README backquotes and stars, the
    page's ``**``, ``*`` and escaped spaces), lowercased: the same text in
    either document reads the same."""
    return " ".join(re.sub(r"\\ |[`*]", "", paragraph).lower().split())


def _sentences(text: str) -> set[str]:
    return {s for s in re.split(r"(?<=[.:;])\s+", _plain_words(text)) if len(s) > 80}


def test_no_paragraph_stands_in_the_readme_and_the_page() -> None:
    """The README is the front page and the manual page the reference: a
    paragraph (or a long sentence) of one is never copied into the other."""
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "man" / "git-isopatch.rst").read_text()
    in_page = {_plain_words(p) for p in _paragraphs(page)}
    both = [p for p in _paragraphs(readme) if _plain_words(p) in in_page]
    assert not both, both
    shared = _sentences(readme) & _sentences(page)
    assert not shared, shared


def test_the_readme_and_the_page_sentences_compare_without_markup() -> None:
    """The comparison above sees through each document's markup."""
    assert _plain_words("**--apply** writes the *<file>*\\ **.lock**") == _plain_words(
        "`--apply` writes the <file>.lock"
    )


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
