"""A hostile sandboxed command leaves something in its worktree for the run
that comes next (design: procedure step 3; "there is one boundary").

A sandboxed run's worktree is a layer over its base tree, discarded with
the run: it never goes to the pool, so nothing the command planted there
is claimed.  Here a repository it planted in the empty folder of a
submodule (a clone of the submodule with a smudge filter that applies to
every file), which a claim's ``read-tree`` would check out with the planted
configuration when the user's configuration says ``submodule.recurse =
true`` (a common setting): the next runs, sandboxed and unconfined, run
none of it.

Every program planted writes a mark into ``$MARKS``, a folder beside the
checkout: the sandbox makes it copy-on-write, so a mark there is a program
that ran outside.  Real bubblewrap, real git.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

pytestmark = pytest.mark.hostile

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")

#: Plants, in the submodule's empty folder of the worktree, a clone of the
#: submodule (from the user's git directory, which the command can read)
#: whose smudge and clean filters apply to every file, on a commit of its
#: own (so its HEAD differs from the gitlink's).
PLANT = textwrap.dedent(
    """\
    set -e
    C=$(git rev-parse --path-format=absolute --git-common-dir)
    rmdir sub
    git clone -q --no-checkout "$C/modules/sub" sub
    cd sub
    git config filter.x.smudge "sh -c 'echo smudge >> $MARKS/smudge; cat'"
    git config filter.x.clean "sh -c 'echo clean >> $MARKS/clean; cat'"
    mkdir -p .git/info && echo '* filter=x' > .git/info/attributes
    git -c user.name=x -c user.email=x@x commit -q --allow-empty -m moved
    cd ..
    echo change >> t
    """
)


def test_a_repository_planted_in_a_pooled_worktree_does_not_run_at_the_next_claim(
    make_repo, tmp_path: Path, env
) -> None:
    make_repo({"s": "s\n"}, name="sub-up")
    repo = make_repo({"t": "t\n"})
    git(*FILE_PROTOCOL, "submodule", "add", "-q", tmp_path / "sub-up", "sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "submodule", cwd=repo, env=env)
    git("config", "--global", "submodule.recurse", "true", cwd=repo, env=env)
    git("config", "isopatch.pool", "1", cwd=repo, env=env)
    marks = tmp_path / "marks"
    marks.mkdir()
    run_env = {**env, "MARKS": str(marks)}
    planted = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", PLANT, cwd=repo, env=run_env)
    assert planted.returncode == 0, planted.err
    assert "path M t" in planted.out.splitlines()
    # a sandboxed run goes over a base tree and never to the pool: what it
    # planted lived in its discarded layer, nothing is left for a claim
    pooled = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert "pooled" not in pooled.out, pooled.out
    seen = isopatch("--porcelain", "--sandbox", "--", "ls", "-A", "sub", cwd=repo, env=run_env)
    assert seen.returncode == 0 and seen.fields()["files"] == "0", seen.err
    assert Path(seen.fields()["stdout"]).read_text() == ""
    for options in (("--sandbox",), ("--no-sandbox",)):
        claimed = isopatch("--porcelain", *options, "--", "true", cwd=repo, env=run_env)
        assert claimed.returncode == 0, claimed.err
        assert "Traceback" not in claimed.err
        assert sorted(p.name for p in marks.iterdir()) == [], options
