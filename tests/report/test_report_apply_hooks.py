"""Report step, ``--staged --apply``: hooks that commit what they fixed
(issue 20).  The fix goes into the index git is about to commit and into
the work tree, all or nothing across both: a partially staged file gets
the fix in its staged content and keeps its unstaged edits; where the fix
cannot be merged with them nothing is written and the commit is stopped.
``--staged --exit-code`` stops the commit when the command changed
something.  Real ``git commit``, ``-a`` and ``<path>``, with a real hook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, tree_manifest, write_tree

#: The formatter of these tests: the last line "bad" becomes "good".
FIX = "sed -i 's/^bad$/good/' f"
#: The file at HEAD, with room between its first and its last line.
BASE = "".join(f"line {n}\n" for n in range(1, 10))
STAGED = BASE + "bad\n"  # what the user stages: the formatter will fix it
UNSTAGED = STAGED.replace("line 1\n", "an unstaged edit\n")  # far from the fix

APPLY_HOOK = f'#!/bin/sh\nexec git isopatch --staged --apply -q -- sh -c "{FIX}"\n'
EXIT_CODE_HOOK = f'#!/bin/sh\nexec git isopatch --staged --exit-code -q -- sh -c "{FIX}"\n'
BOTH_HOOK = f'#!/bin/sh\nexec git isopatch --staged --apply --exit-code -q -- sh -c "{FIX}"\n'


def _repo(make_repo, env, hook: str) -> Path:
    repo = make_repo({"f": BASE, "other": "o\n"})
    path = repo / ".git" / "hooks" / "pre-commit"
    path.write_text(hook)
    path.chmod(0o755)
    return repo


def _commit(repo: Path, env, *args: str) -> subprocess.CompletedProcess[bytes]:
    path = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    return subprocess.run(
        ["git", "commit", "-q", "-m", "c", *args],
        cwd=repo,
        env={**env, "PATH": path},
        capture_output=True,
    )


def _state(repo: Path, env) -> tuple[bytes, dict]:
    """The index's entries and the work tree (``git commit`` itself
    rewrites the index file, refreshed and with its cached trees, before
    the hook runs, whatever the hook does)."""
    return git("ls-files", "-s", cwd=repo, env=env), tree_manifest(repo)


def _show(repo: Path, env, what: str) -> str:
    return git("show", what, cwd=repo, env=env).decode()


def test_git_commit_commits_the_fix_of_a_partially_staged_file(env, make_repo) -> None:
    repo = _repo(make_repo, env, APPLY_HOOK)
    write_tree(repo, {"f": STAGED})
    git("add", "f", cwd=repo, env=env)
    write_tree(repo, {"f": UNSTAGED, "other": "an unstaged change\n"})
    done = _commit(repo, env)
    assert done.returncode == 0, done.stderr
    fixed = STAGED.replace("bad\n", "good\n")
    assert _show(repo, env, "HEAD:f") == fixed
    assert _show(repo, env, ":f") == fixed
    assert (repo / "f").read_text() == UNSTAGED.replace("bad\n", "good\n")
    assert _show(repo, env, "HEAD:other") == "o\n"  # never staged, never committed
    assert (repo / "other").read_text() == "an unstaged change\n"
    status = git("status", "--porcelain", cwd=repo, env=env).decode()
    assert status == " M f\n M other\n"  # only the unstaged edits are left


def test_git_commit_a_commits_the_fix(env, make_repo) -> None:
    """``-a``: git stages into ``.git/index.lock`` and names it in
    ``GIT_INDEX_FILE``; the fix goes there, and into the work tree."""
    repo = _repo(make_repo, env, APPLY_HOOK)
    write_tree(repo, {"f": UNSTAGED})
    done = _commit(repo, env, "-a")
    assert done.returncode == 0, done.stderr
    fixed = UNSTAGED.replace("bad\n", "good\n")
    assert _show(repo, env, "HEAD:f") == fixed
    assert (repo / "f").read_text() == fixed
    assert git("status", "--porcelain", cwd=repo, env=env) == b""


def test_git_commit_path_commits_the_fix(env, make_repo) -> None:
    """``git commit <path>``: git commits the work tree's ``<path>``
    through a temporary index (``GIT_INDEX_FILE``): the fix goes there and
    into the work tree.  git wrote the user's own index with ``<path>`` as
    it was before the hook ran: ``git add <path>`` brings the fix there."""
    repo = _repo(make_repo, env, APPLY_HOOK)
    write_tree(repo, {"f": STAGED})
    git("add", "f", cwd=repo, env=env)
    write_tree(repo, {"f": UNSTAGED})
    done = _commit(repo, env, "--", "f")
    assert done.returncode == 0, done.stderr
    fixed = UNSTAGED.replace("bad\n", "good\n")
    assert _show(repo, env, "HEAD:f") == fixed
    assert (repo / "f").read_text() == fixed
    assert _show(repo, env, ":f") == UNSTAGED  # what git itself did to the index
    git("add", "f", cwd=repo, env=env)
    assert git("status", "--porcelain", cwd=repo, env=env) == b""


def test_a_fix_that_cannot_be_merged_with_unstaged_edits_stops_the_commit(env, make_repo) -> None:
    """The unstaged edit is next to the fix: nothing is written (index,
    work tree), no commit, ``error:`` and ``hint:``."""
    repo = _repo(make_repo, env, APPLY_HOOK)
    write_tree(repo, {"f": STAGED})
    git("add", "f", cwd=repo, env=env)
    write_tree(repo, {"f": STAGED.replace("line 9\n", "an unstaged edit\n")})
    head = git("rev-parse", "HEAD", cwd=repo, env=env)
    before = _state(repo, env)
    done = _commit(repo, env)
    assert done.returncode != 0
    err = done.stderr.decode()
    assert "error: the fix does not apply on top of your unstaged changes" in err
    assert "hint: nothing was written" in err
    assert "hint: stage those files whole (git add)" in err
    assert git("rev-parse", "HEAD", cwd=repo, env=env) == head
    assert _state(repo, env) == before


@pytest.mark.parametrize("hook", [EXIT_CODE_HOOK, BOTH_HOOK], ids=["--exit-code", "--apply"])
def test_exit_code_stops_the_commit_when_the_command_changed_something(
    env, make_repo, hook
) -> None:
    """Without ``--apply`` nothing is written; with it the fix is staged and
    the commit still stops, so the user sees it; the next commit goes through."""
    repo = _repo(make_repo, env, hook)
    write_tree(repo, {"f": STAGED})
    git("add", "f", cwd=repo, env=env)
    head = git("rev-parse", "HEAD", cwd=repo, env=env)
    before = _state(repo, env)
    done = _commit(repo, env)
    assert done.returncode != 0, done.stderr
    assert git("rev-parse", "HEAD", cwd=repo, env=env) == head
    if hook is EXIT_CODE_HOOK:
        assert _state(repo, env) == before
        return
    fixed = STAGED.replace("bad\n", "good\n")
    assert _show(repo, env, ":f") == fixed and (repo / "f").read_text() == fixed
    again = _commit(repo, env)
    assert again.returncode == 0, again.stderr
    assert _show(repo, env, "HEAD:f") == fixed


def test_only_the_staged_paths_are_handed_to_the_command(env, make_repo) -> None:
    """The README's recipe: ``git diff --cached --name-only -z
    --diff-filter=ACMR | xargs -0 ...``: an unstaged file the formatter
    would change is neither fixed nor committed."""
    repo = make_repo({"f": BASE, "g": BASE})
    write_tree(repo, {"f": STAGED, "g": STAGED})
    git("add", "f", cwd=repo, env=env)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(
        "#!/bin/sh\ngit diff --cached --name-only -z --diff-filter=ACMR |"
        " xargs -0 -r git isopatch --staged --apply -q -- sed -i 's/^bad$/good/'\n"
    )
    hook.chmod(0o755)
    done = _commit(repo, env)
    assert done.returncode == 0, done.stderr
    assert _show(repo, env, "HEAD:f") == STAGED.replace("bad\n", "good\n")
    assert _show(repo, env, "HEAD:g") == BASE
    assert (repo / "g").read_text() == STAGED


def test_staged_apply_writes_no_file_into_the_checkout(env, make_repo) -> None:
    repo = make_repo({"f": BASE})
    write_tree(repo, {"f": STAGED})
    git("add", "f", cwd=repo, env=env)
    run = isopatch("--staged", "--apply", "-q", "--", "sh", "-c", FIX, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert git("status", "--porcelain", "--ignored", cwd=repo, env=env) == b"M  f\n"
    assert sorted(p.name for p in repo.iterdir()) == [".git", "f"]
