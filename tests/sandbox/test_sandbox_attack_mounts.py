"""A mount already present under ``$HOME`` or under the checkout's parent
folder (a tmpfs this test mounts), outside the temporary folders: the
copy-on-write layers are planned around mounts
(``git_isopatch.sandbox.layers``), and a write under one, by a hostile
command, must not reach the real file: contents, a new file, mode, times
(design: "What it does"; issue 19, "Copy-on-write outside the worktree").

Real bubblewrap, real mounts: root (the suite's usual case).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, tmpfs, tree_manifest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")

#: Writes, creates, chmods and touches under each mount given.
WRITE = """\
for m in "$@"; do
  echo pwned > "$m/file"; echo new > "$m/new"; chmod 600 "$m/file"
  touch -d 2001-01-01 "$m/file" "$m/sub"; echo pwned > "$m/sub/deep"
done
echo ok > in-worktree
"""


def _state(mount: Path) -> tuple[object, ...]:
    """The files under ``mount``, with the mode and times of two of them."""
    marks = [os.stat(mount / n) for n in ("file", "sub")]
    return tree_manifest(mount, exclude=()), [(m.st_mode, m.st_mtime_ns) for m in marks]


def test_writes_under_mounts_beside_the_checkout_and_in_home_stay_out(env) -> None:
    # outside /tmp and TMPDIR: $HOME and the checkout's parent are
    # copy-on-write there, not private temporary folders
    base = Path(tempfile.mkdtemp(prefix="isopatch-mounts-", dir="/var/lib"))
    try:
        home, parent = base / "home", base / "work"
        (home / "tmp").mkdir(parents=True)
        user_env = {**env, "HOME": str(home), "TMPDIR": str(home / "tmp")}
        repo = parent / "repo"
        repo.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=repo, env=user_env)
        (repo / "README").write_text("hello\n")
        git("add", "-A", cwd=repo, env=user_env)
        git("commit", "-q", "-m", "base", cwd=repo, env=user_env)
        with tmpfs(home / ".cache", "1m") as cache, tmpfs(parent / "side", "1m") as side:
            for mount in (cache, side):
                (mount / "file").write_text("mine\n")
                (mount / "sub").mkdir()
                (mount / "sub" / "deep").write_text("mine\n")
            before = {m: _state(m) for m in (cache, side)}
            run = isopatch(
                "--porcelain", "--sandbox", "--", "sh", "-c", WRITE, "sh", cache, side,
                cwd=repo, env=user_env,
            )  # fmt: skip
            assert run.returncode == 0, run.err
            assert {m: _state(m) for m in (cache, side)} == before
            assert (cache / "file").read_text() == "mine\n"
        assert "in-worktree" in Path(run.fields()["patch"]).read_text()
    finally:
        shutil.rmtree(base, ignore_errors=True)
