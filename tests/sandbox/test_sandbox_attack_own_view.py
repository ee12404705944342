"""Our own git's view after a sandboxed command (``own_view`` in
``git_isopatch.sandbox.launcher_main``): the real home, ``$XDG_CONFIG_HOME``
and the folder of ``$GIT_CONFIG_GLOBAL``, with the worktree, its admin
folder, the run's ``TMPDIR`` and the git directory as the command left
them (design: "one boundary").

- The worktree or the git directory is no folder at its path in the real
  view any more (a folder on the way became a link while the command ran):
  our own git would read another folder there; the run fails, saying what
  failed, and never takes a patch of that other folder.
- ``HOME=/``: the root is read-only inside; nothing can be planted there.

Real bubblewrap, real git.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, git, isopatch


@pytest.mark.hostile
def test_a_worktree_that_is_no_folder_in_the_real_view_fails_the_run(
    env, make_repo, tmp_path: Path
) -> None:
    """While the command runs, the folder holding the checkout and its
    worktree becomes a link to where it went (as a user's ``mv`` and
    ``ln -s`` would make it): at the worktree's path the real view holds
    another folder, the base tree's, so the run fails with what failed."""
    home = Path(env["HOME"])
    repo = make_repo({"a.txt": "hi\n"}, name="home/src/repo")
    signals = tmp_path / "signals"
    signals.mkdir()
    script = (
        f"touch '{signals}/ready'; while [ ! -e '{signals}/go' ]; do sleep 0.05; done;"
        " echo n > new.txt"
    )
    run = subprocess.Popen(
        [str(ISOPATCH), "--porcelain", "--sandbox", "--allow-write", str(signals),
         "--", "sh", "-c", script],
        cwd=repo, env=dict(env), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    moved = home / "src-moved"
    try:
        wait_until(
            lambda: (signals / "ready").exists() or run.poll() is not None, what="no command"
        )
        (home / "src").rename(moved)
        (home / "src").symlink_to(moved)
        (signals / "go").touch()
        out, err = (b.decode() for b in run.communicate(timeout=120))
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if moved.exists():
            (home / "src").unlink()
            moved.rename(home / "src")
    fields = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "Traceback" not in err, err
    assert run.returncode == 128, (out, err)
    assert fields.get("error-code") == "sandbox-failed", out
    fatal = [line for line in err.splitlines() if line.startswith("fatal:")]
    assert len(fatal) == 1, err
    assert fatal[0].startswith(
        "fatal: the sandbox failed: could not show our own git the real folders: "
    ), err
    assert "is no folder in the real" in fatal[0], err
    kept = fields.get("worktree")
    if kept:
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)


def test_with_home_at_the_root_nothing_can_be_planted_there(env, make_repo) -> None:
    """``HOME=/``: no folder of its own to bind; the root is read-only
    inside, so the command writes no ``/.gitconfig`` for our own git."""
    env["HOME"] = "/"
    env.pop("XDG_CONFIG_HOME", None)
    assert not os.path.exists("/.gitconfig")
    repo = make_repo({"a.txt": "hi\n"})
    script = (
        "printf '[core]\\n\\texcludesFile = /etc/hostname\\n' > /.gitconfig 2>/dev/null"
        " && echo planted; echo n > new.txt"
    )
    run = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text() == ""
    assert b"+++ b/new.txt" in Path(run.fields()["patch"]).read_bytes()
    assert not os.path.exists("/.gitconfig")
