"""The default, ``isopatch.sandbox=auto``, said in step everywhere the user
reads about the sandbox (issue 19, "Then make it the default": "README, man
page, ``-h`` and completion say all this in step"): the README's first
screen and its platforms, the manual page (source and built, the one table
of options and configuration), ``git isopatch -h``, the completion and the
agent skill."""

from __future__ import annotations

import re
from pathlib import Path

from repo_helpers import isopatch

ROOT = Path(__file__).resolve().parents[2]


def _flat(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


def test_the_readme_says_the_default() -> None:
    readme = (ROOT / "README.md").read_text()
    first_screen = " ".join(readme.splitlines()[:12])
    assert "by default the command it runs cannot either" in first_screen
    flat = " ".join(readme.split())
    assert "the command runs unconfined, with your rights, and one `warning:` says so" in flat
    assert "`isopatch.sandbox false` silences the warning" in flat
    assert "`false` (the default)" not in flat


def test_the_manual_says_the_default() -> None:
    source = _flat("man/git-isopatch.rst")
    assert "**auto** (the default): confine the command where the machine allows it" in source
    assert "The default where the machine allows it (**isopatch.sandbox=auto**)" in source
    assert "By default (**isopatch.sandbox=auto**) the command and every process it" in source
    assert "**--no-sandbox** runs the command unconfined, with the user's rights." in source
    assert "**false**: never, as **--no-sandbox**, without the warning." in source
    section = source.split("**isopatch.sandbox**")[1].split("**isopatch.allowWrite**")[0]
    assert "Default false" not in section
    built = _flat("man/git-isopatch.1")
    assert r"\fBauto\fP (the default): confine the command where the machine allows" in built
    assert r"The default where the machine allows it (\fBisopatch.sandbox=auto\fP)" in built


def test_usage_says_the_default(env, tmp_path: Path) -> None:
    run = isopatch("-h", cwd=tmp_path, env=env)
    assert run.returncode == 129
    shown = run.out + run.err
    (line,) = [line for line in shown.splitlines() if "--[no-]sandbox" in line]
    assert re.fullmatch(
        r" +--\[no-\]sandbox +confine the command \(the default where the machine allows it\)",
        line,
    ), line


def test_completion_offers_both_ways() -> None:
    words = (ROOT / "completion" / "git-isopatch.bash").read_text().split()
    assert "--sandbox" in words and "--no-sandbox" in words


def test_the_skill_says_the_default() -> None:
    skill = _flat("skills/git-isopatch/SKILL.md")
    assert "The sandbox (the default where the machine allows it)" in skill
