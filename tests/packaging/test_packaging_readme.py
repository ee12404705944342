"""The README's first screen gives the commands CI runs (issue 2)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _test_command_in_ci() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = lines.index("# The README's test command, verbatim:")
    return next(line for line in lines[marker + 1 :] if "pytest" in line)


def test_ci_runs_the_readme_test_command() -> None:
    readme_head = (ROOT / "README.md").read_text().splitlines()[:24]
    assert _test_command_in_ci() in readme_head


def test_readme_first_screen_installs_and_runs_isopatch() -> None:
    readme_head = "\n".join((ROOT / "README.md").read_text().splitlines()[:24])
    assert "pip install" in readme_head and "git isopatch" in readme_head
