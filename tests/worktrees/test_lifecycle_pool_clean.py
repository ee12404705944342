"""The claim skips `git clean` only where it has nothing to remove (design:
procedure step 3, a claimed worktree is a fresh one): whatever untracked,
ignored or empty thing the last run left, the next run finds the tree a
fresh `git worktree add` gives, and the same worktree was claimed."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch, write_tree

FILES = {
    ".gitignore": "build/\n*.log\n",
    "README": "hello\n",
    "sub/c.txt": "gamma\n",
}

#: Every entry but .git, as find(1) prints it: path and type.
LISTING = "pwd; find . -path ./.git -prune -o -printf '%p %y\\n' | LC_ALL=C sort"


def _repo(tmp_path: Path, env: dict[str, str]) -> Path:
    top = tmp_path / "repo"
    top.mkdir()
    git("init", "-q", "-b", "main", cwd=top, env=env)
    write_tree(top, FILES)
    git("add", "-A", cwd=top, env=env)
    git("commit", "-q", "-m", "base", cwd=top, env=env)
    return top


def _run(repo: Path, env: dict[str, str], command: str, *, pool: bool = True) -> list[str]:
    """The command's stdout lines (the first: where it ran)."""
    run = isopatch(
        "--porcelain", "--no-sandbox", "--", "sh", "-c", command,
        cwd=repo, env=env, git_options=("-c", f"isopatch.pool={int(pool)}"),
    )  # fmt: skip
    assert run.returncode == 0, run.err
    return Path(run.fields()["stdout"]).read_text().splitlines()


@pytest.mark.parametrize(
    "litter",
    [
        "mkdir empty",
        "mkdir -p deep/er/est",
        "mkdir sub/empty",
        "mkdir -p build",  # an ignored folder, empty
        "mkdir -p build/out && echo x > build/out/o",
        "echo x > new.txt",
        "echo x > sub/debug.log",
        "git init -q nested && git -C nested -c user.name=a -c user.email=a@b"
        " commit -q --allow-empty -m x",
        "rm sub/c.txt && mkdir sub/c.txt",
        "rm -r sub && echo x > sub",
    ],
)
def test_what_the_last_run_left_is_gone(env, tmp_path, litter) -> None:
    repo = _repo(tmp_path, env)
    fresh = _run(repo, env, LISTING, pool=False)
    first = _run(repo, env, f"pwd; {litter}")
    second = _run(repo, env, LISTING)
    assert second[0] == first[0], "the second run claimed the first's worktree"
    assert second[1:] == fresh[1:]


def test_a_run_that_left_nothing_is_claimed_again(env, tmp_path) -> None:
    repo = _repo(tmp_path, env)
    fresh = _run(repo, env, LISTING, pool=False)
    first = _run(repo, env, "pwd")
    second = _run(repo, env, LISTING)
    assert second[0] == first[0]
    assert second[1:] == fresh[1:]
