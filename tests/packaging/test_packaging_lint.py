"""The repository keeps to its own tools: ruff checks the code, and on this
very repository, after un-formatting a file, ``git isopatch --porcelain --
ruff format .`` gives a patch that ``git apply`` reproduces, the repository
otherwise unchanged."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repo_helpers import BIN_DIR, git, isopatch, repo_state

ROOT = Path(__file__).resolve().parents[2]


def test_code_passes_the_linter() -> None:
    """ruff with the project's rules (pyproject.toml) on every Python file."""
    done = subprocess.run(
        [BIN_DIR / "ruff", "check", "--no-cache", "git_isopatch", "tests", "bench", "man"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_on_this_repository(env, tmp_path) -> None:
    clone = tmp_path / "git-isopatch"
    git("clone", "-q", "--no-hardlinks", ROOT, clone, cwd=tmp_path, env=env)
    target = clone / "git_isopatch" / "render.py"
    formatted = target.read_text()
    unformatted = formatted.replace("PATH_KEYS = frozenset(", "PATH_KEYS   =   frozenset(  ")
    assert unformatted != formatted
    target.write_text(unformatted)
    git("commit", "-qam", "un-format render.py", cwd=clone, env=env)
    (clone / "work in progress.txt").write_text("untracked\n")
    before = repo_state(clone, env)

    run = isopatch("--porcelain", "--", "ruff", "format", ".", cwd=clone, env=env)

    assert run.returncode == 0, run.err
    assert repo_state(clone, env) == before
    patch = Path(run.fields()["patch"])
    assert b"diff --git a/git_isopatch/render.py b/git_isopatch/render.py" in patch.read_bytes()
    git("apply", patch, cwd=clone, env=env)
    assert target.read_text() == formatted
