"""A kept worktree of a sandboxed command is safe to enter (design:
procedure step 7, "or keep it"): the command plants a nested repository
with a clean filter, a gitlink for it in the worktree's own index and a
``.gitmodules``, then makes extraction fail (a filter the user's
configuration requires refuses a file it wrote), or asks ``--keep``.
Before the path is handed over, the index is git-isopatch's own again
and the planted repository is disarmed and named in a ``warning:``: the
user's own ``git status``, ``git diff`` and ``git commit -a`` there run
no filter of the command's.  As root and as uid 65534."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from repo_helpers import git, isopatch
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: Plants ``sub``, a repository whose clean filter writes "$MARKS/ran",
#: with a gitlink in the worktree's index and a ``.gitmodules``; its file
#: differs from what the gitlink's commit holds, so that a status in it
#: hashes the file through the filter.  With FAIL set, a file whose
#: attribute names the user's required filter that refuses it.
PLANT = textwrap.dedent(
    """\
    set -e
    git init -q sub
    git -C sub config filter.x.clean "sh -c 'echo ran >> $MARKS/ran; cat'"
    git -C sub config filter.x.smudge cat
    echo '* filter=x' > sub/.gitattributes
    echo one > sub/f
    git -C sub add -A
    git -C sub -c user.name=a -c user.email=b commit -qm planted
    git update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub"
    printf '[submodule "sub"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules
    echo two > sub/f
    if [ -n "$FAIL" ]; then echo 'refused filter=req' > .gitattributes; echo x > refused; fi
    """
)

#: What the user then does in the kept worktree.
USER = (["status"], ["diff"], ["add", "-A"], ["commit", "-qam", "mine"], ["status"])


def _check_kept(worktree: Path, marks: Path, env, err: str) -> None:
    assert worktree.is_dir(), err
    warnings = [line for line in err.splitlines() if "made a repository at 'sub'" in line]
    assert len(warnings) == 1, err
    assert not (worktree / "sub" / ".git").exists()
    for args in USER:
        git("-c", "submodule.recurse=true", *args, cwd=worktree, env=env, check=False)
    assert not (marks / "ran").exists(), "the command's filter ran under the user's git"
    listed = git("ls-files", "-s", "sub", cwd=worktree, env=env).decode()
    assert not listed.startswith("160000"), listed


@pytest.mark.parametrize("how", ["keep", "extraction fails"])
def test_a_kept_worktree_runs_nothing_the_command_planted(env, make_repo, tmp_path, how) -> None:
    repo = make_repo()
    git("config", "filter.req.clean", "false", cwd=repo, env=env)
    git("config", "filter.req.required", "true", cwd=repo, env=env)
    marks = tmp_path / "marks"
    marks.mkdir()
    environ = {**env, "MARKS": str(marks), "FAIL": "1" if how != "keep" else ""}
    options = ("--keep",) if how == "keep" else ()
    run = isopatch(
        "--porcelain", "--sandbox", *options, "--", "sh", "-c", PLANT, cwd=repo, env=environ
    )
    fields = run.fields()
    assert ("error-code" in fields) == (how != "keep"), run.err
    assert not (marks / "ran").exists(), "the command's filter ran under git-isopatch"
    _check_kept(Path(fields["worktree"]), marks, env, run.err)


#: The same as uid 65534, with --keep.
NOBODY = f"""\
marks = os.path.join(os.environ["HOME"], "marks")
os.mkdir(marks)
env = {{**os.environ, "MARKS": marks, "FAIL": ""}}
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--json", "--sandbox", "--keep", "--",
     "sh", "-c", {PLANT!r}],
    cwd=repo, env=env, capture_output=True, timeout=120,
)
result = json.loads(done.stdout)
worktree = result["worktree"]
for args in {USER!r}:
    subprocess.run(["git", "-c", "submodule.recurse=true", *args], cwd=worktree,
                   env=env, capture_output=True)
print(json.dumps({{"err": done.stderr.decode(), "ran": os.path.exists(marks + "/ran"),
                   "dotgit": os.path.lexists(worktree + "/sub/.git")}}))
"""


def test_as_an_unprivileged_user_too(env) -> None:
    with run_as_nobody(env, NOBODY) as said:
        assert "made a repository at 'sub'" in said["err"], said["err"]
        assert said["ran"] is False and said["dotgit"] is False
    assert json  # the script's own
