"""Helpers of the tests where the command commits (from a hook, an alias or
with repository variables set): the command, and what its patch must do
to a checkout."""

from __future__ import annotations

from pathlib import Path

from repo_helpers import (
    apply_to_clean_checkout,
    git,
    tree_manifest,
)

#: What the command in the hook or alias does: rewrites a tracked file, adds
#: a file, stages everything and commits, in the worktree (``--no-verify``:
#: the hook that runs git isopatch would otherwise fire again for this
#: commit, and again, without end).
COMMAND = (
    "printf 'formatted\\n' > README; echo new > new.txt; git add -A; "
    "git commit --no-verify -qm inside"
)


def _head(repo: Path, env: dict[str, str]) -> str:
    return git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()


def _patched_checkout(repo: Path, base: str, patch: Path, dest: Path, env) -> dict:
    return tree_manifest(apply_to_clean_checkout(repo, base, patch, dest, env))


def _expected_after_command(repo: Path, base: str, tmp_path: Path, env) -> dict:
    """The tree COMMAND leaves on a clean checkout of ``base``."""
    dest = tmp_path / "expected"
    git("clone", "-q", "--shared", "--no-checkout", repo, dest, cwd=tmp_path, env=env)
    git("checkout", "-q", "--detach", base, cwd=dest, env=env)
    (dest / "README").write_text("formatted\n")
    (dest / "new.txt").write_text("new\n")
    return tree_manifest(dest)
