"""A hostile sandboxed command leaves state in its worktree's private folder
(``.git/worktrees/<id>``, really writable in the sandbox) for the user's
own git in the kept worktree (design: procedure step 7, "a kept worktree
is a real folder, and nothing the command planted in it runs under the
user's own git there").

- ``HEAD`` made a symbolic ref to the user's branch, checked out in the
  user's checkout: the user's ``git commit`` in the kept worktree would move
  that branch under the checkout, whose index and files then show the
  commit undone;
- an interactive rebase "in progress" (``rebase-merge``) whose todo list
  holds an ``exec`` line: ``git status`` there says to run ``git rebase
  --continue``, which would run it with the user's rights; and a
  ``MERGE_HEAD``.

Real bubblewrap, real git.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

pytestmark = pytest.mark.hostile

PLANT = textwrap.dedent(
    """\
    A=$(git rev-parse --absolute-git-dir)
    base=$(git rev-parse HEAD)
    echo "ref: refs/heads/main" > "$A/HEAD"
    mkdir -p "$A/rebase-merge"
    echo "exec echo ran >> $MARKS/exec" > "$A/rebase-merge/git-rebase-todo"
    echo "$base" > "$A/rebase-merge/onto"
    echo "refs/heads/main" > "$A/rebase-merge/head-name"
    echo "$base" > "$A/rebase-merge/orig-head"
    touch "$A/rebase-merge/interactive"
    echo "$base" > "$A/MERGE_HEAD"
    echo change >> README
    """
)


def test_the_kept_worktree_holds_no_branch_and_no_operation_of_the_commands(
    make_repo, tmp_path: Path, env
) -> None:
    repo = make_repo()
    marks = tmp_path / "marks"
    marks.mkdir()
    base = git("rev-parse", "HEAD", cwd=repo, env=env).strip()
    assert base
    run = isopatch(
        "--porcelain", "--sandbox", "--keep", "--", "sh", "-c", PLANT,
        cwd=repo, env={**env, "MARKS": str(marks)},
    )  # fmt: skip
    assert run.returncode == 0, run.err
    kept = Path(run.fields()["worktree"])
    assert git("symbolic-ref", "-q", "HEAD", cwd=kept, env=env, check=False) == b""
    assert git("rev-parse", "HEAD", cwd=kept, env=env).strip() == base
    status = git("status", cwd=kept, env=env)
    assert b"rebas" not in status and b"merg" not in status, status
    # what the user does there: commit, and continue what status names
    git("commit", "-q", "-a", "-m", "mine", cwd=kept, env=env)
    git("rebase", "--continue", cwd=kept, env=env, check=False)
    assert git("rev-parse", "main", cwd=repo, env=env).strip() == base
    assert git("status", "--porcelain", cwd=repo, env=env) == b""
    assert list(marks.iterdir()) == []
