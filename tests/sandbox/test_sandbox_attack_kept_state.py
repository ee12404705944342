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

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from repo_helpers import git, isopatch
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

PLANT = textwrap.dedent(
    """\
    A=$(git rev-parse --absolute-git-dir)
    C=$(git rev-parse --path-format=absolute --git-common-dir)
    base=$(git rev-parse HEAD)
    branch=$(git --git-dir="$C" symbolic-ref HEAD)
    echo "ref: $branch" > "$A/HEAD"
    mkdir -p "$A/rebase-merge"
    echo "exec echo ran >> $MARKS/exec" > "$A/rebase-merge/git-rebase-todo"
    echo "$base" > "$A/rebase-merge/onto"
    echo "$branch" > "$A/rebase-merge/head-name"
    echo "$base" > "$A/rebase-merge/orig-head"
    touch "$A/rebase-merge/interactive"
    echo "$base" > "$A/MERGE_HEAD"
    echo change > changed
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
    git("add", "-A", cwd=kept, env=env)
    git("commit", "-q", "-m", "mine", cwd=kept, env=env)
    git("rebase", "--continue", cwd=kept, env=env, check=False)
    assert git("rev-parse", "main", cwd=repo, env=env).strip() == base
    assert git("status", "--porcelain", cwd=repo, env=env) == b""
    assert list(marks.iterdir()) == []


#: As uid 65534: the planting run with ``--keep``, then what the user does
#: in the kept worktree; prints what was seen.
AS_NOBODY = """
def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True).stdout.decode()
marks = os.path.join(os.environ["HOME"], "marks")
os.mkdir(marks)
base = git("rev-parse", "HEAD", cwd=repo).strip()
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--keep",
     "--", "sh", "-c", sys.argv[1]],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL,
    env={**os.environ, "MARKS": marks}, timeout=120)
fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines() if line)
seen = {"code": done.returncode, "err": done.stderr.decode(), "base": base}
kept = fields.get("worktree")
if kept:
    seen["symbolic"] = git("symbolic-ref", "-q", "HEAD", cwd=kept)
    seen["status"] = git("status", cwd=kept)
    git("add", "-A", cwd=kept)
    git("commit", "-q", "-m", "mine", cwd=kept)
    git("rebase", "--continue", cwd=kept)
seen["branch"] = git("rev-parse", "HEAD", cwd=repo).strip()
seen["marks"] = os.listdir(marks)
print(json.dumps(seen))
"""


def test_the_kept_worktree_holds_nothing_of_the_commands_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, PLANT) as seen:
        assert seen["code"] == 0, seen["err"]
        assert seen["symbolic"] == "", seen
        assert "rebas" not in seen["status"] and "merg" not in seen["status"], seen
        assert seen["branch"] == seen["base"], seen
        assert seen["marks"] == [], seen
