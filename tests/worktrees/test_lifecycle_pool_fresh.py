"""The pool hands over exactly a fresh worktree (design: procedure step 3):
whatever the last run left, the claim brings the worktree to what ``git
worktree add --detach`` gives, and trusts nothing that run could write: not
the index's stat data (a command can make a changed file look unchanged
to git), nor what git does not look at (FIFOs, sockets, modes beyond the
executable bit)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, write_tree

FILES = {
    "README": "hello\n",
    "a.txt": "alpha\n",
    "run.sh": "#!/bin/sh\necho run\n",
    "sub/c.txt": "gamma\n",
}

#: What a checkout leaves, as find(1) shows it: path, type, mode.
LISTING = (
    "find . -path ./.git -prune -o -path ./seen -prune -o -printf '%p %y %m\\n'"
    " | LC_ALL=C sort > seen"
)

POISON = Path(__file__).resolve().parents[1] / "poison_index.py"


def _repo(tmp_path: Path, env: dict[str, str]) -> Path:
    top = tmp_path / "repo"
    top.mkdir()
    git("init", "-q", "-b", "main", cwd=top, env=env)
    write_tree(top, FILES)
    (top / "run.sh").chmod(0o755)
    git("add", "-A", cwd=top, env=env)
    git("commit", "-q", "-m", "base", cwd=top, env=env)
    return top


def _pooled_run(repo: Path, env: dict[str, str], command: str):
    run = isopatch(
        "--porcelain", "--no-sandbox", "--", "sh", "-c", f"pwd; {command}",
        cwd=repo, env=env, git_options=("-c", "isopatch.pool=1"),
    )  # fmt: skip
    assert run.returncode == 0, run.err
    return run


def _where(run) -> str:
    return Path(run.fields()["stdout"]).read_text().splitlines()[0]


def _seen(run) -> bytes:
    """The listing the command wrote (``seen``), from its patch."""
    patch = Path(run.fields()["patch"]).read_bytes()
    return b"\n".join(
        line[1:] for line in patch.splitlines() if line.startswith(b"+") and b" " in line
    )


def test_a_poisoned_index_does_not_carry_content_to_the_next_run(env, tmp_path) -> None:
    repo = _repo(tmp_path, env)
    poison = (
        "printf 'poison\\n' > a.txt && echo x >> sub/c.txt"
        " && touch -d '1 hour ago' a.txt sub/c.txt"
        f" && {sys.executable} {POISON} a.txt sub/c.txt"
        ' && test -z "$(git status --porcelain)"'  # git is fooled
    )
    first = _pooled_run(repo, env, poison)
    second = _pooled_run(repo, env, "cat a.txt sub/c.txt")
    assert _where(second) == _where(first), "the second run claimed the first's worktree"
    assert Path(second.fields()["stdout"]).read_text().splitlines()[1:] == ["alpha", "gamma"]


@pytest.mark.parametrize(
    "litter",
    [
        "mkfifo pyproject.toml sub/fifo",
        f"{sys.executable} -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"",
        "mkdir -p hidden && mkfifo hidden/only-a-fifo",
        "chmod 0777 a.txt sub && chmod o+w README",
        "chmod 4755 run.sh && chmod g+s sub && chmod +t sub",
        "chmod 0700 sub && chmod 0600 a.txt",
    ],
    ids=["fifo", "socket", "fifo-in-untracked-folder", "world-writable", "setuid", "narrow"],
)
def test_what_git_does_not_look_at_is_as_a_checkout_leaves_it(env, tmp_path, litter) -> None:
    repo = _repo(tmp_path, env)
    fresh = isopatch(
        "--porcelain", "--no-sandbox", "--", "sh", "-c", LISTING, cwd=repo, env=env
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.err
    first = _pooled_run(repo, env, litter)
    second = _pooled_run(repo, env, LISTING)
    assert _where(second) == _where(first), "the second run claimed the first's worktree"
    assert _seen(second) == _seen(fresh)
    assert b"pyproject" not in _seen(second) and b"sock" not in _seen(second)
    for folder, _dirs, files in os.walk(_where(second)):
        for name in files:
            assert not Path(folder, name).is_fifo()
