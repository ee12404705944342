"""The README is the front page: its first screen gives the commands CI
runs, it stays short, and its links lead into the manual page, the
reference (issue 2, issue 34)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGE = ROOT / "man" / "git-isopatch.rst"


def _test_command_in_ci() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = lines.index("# The README's test command, verbatim:")
    return next(line for line in lines[marker + 1 :] if "pytest" in line)


def test_ci_runs_the_readme_test_command() -> None:
    readme_head = README.read_text().splitlines()[:24]
    assert _test_command_in_ci() in readme_head


def test_readme_first_screen_installs_and_runs_isopatch() -> None:
    readme_head = "\n".join(README.read_text().splitlines()[:24])
    assert "pip install" in readme_head and "git isopatch" in readme_head


def test_the_readme_is_a_front_page_not_a_manual() -> None:
    """At most about 2,000 words, and the sections a newcomer looks for."""
    text = README.read_text()
    assert len(text.split()) <= 2000, len(text.split())
    headings = re.findall(r"^##+ (.*)$", text, flags=re.MULTILINE)
    for wanted in ("Platforms", "Recipes", "How it works", "Reference"):
        assert wanted in headings, headings
    recipes = " ".join(headings[headings.index("Recipes") :])
    for wanted in ("--apply", "pre-commit hook", "pre-commit framework", "husky", "lint-staged",
                   "CI", "Agents", "--json", "MCP"):  # fmt: skip
        assert wanted in recipes, (wanted, recipes)


def _section_ids(rst: str) -> set[str]:
    """The ids docutils (and so GitHub's rendering) gives the page's
    sections: the title lowercased, every run of other characters a dash."""
    lines = rst.splitlines()
    titles = [
        lines[n - 1]
        for n in range(1, len(lines))
        if re.fullmatch(r"([=-])\1+", lines[n]) and lines[n - 1].strip()
        and len(lines[n]) == len(lines[n - 1])
    ]  # fmt: skip
    return {re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") for title in titles}


def test_every_link_into_the_manual_page_names_a_section() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(man/git-isopatch\.rst#([^)]+)\)", text)
    assert len(links) >= 10, links
    ids = _section_ids(PAGE.read_text())
    assert {"options", "sandbox", "bringing-the-patch-home-apply"} <= ids
    missing = [link for link in links if link not in ids]
    assert not missing, (missing, sorted(ids))
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_ci_runs_the_tests_from_a_private_folder() -> None:
    """The test command passes from any folder: ``.ci/run`` clones into a
    ``mktemp -d`` folder (mode 0700) and runs it there, after the clone."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    command = lines.index(_test_command_in_ci())
    clone = next(n for n, line in enumerate(lines) if line.startswith("git clone -q . "))
    made = next(n for n, line in enumerate(lines) if line.startswith("private=$(mktemp -d)"))
    moved = next(n for n, line in enumerate(lines) if line.startswith('cd "$private/'))
    assert made < clone < moved < command
