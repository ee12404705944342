"""A new user's checkout straight in a temporary folder, with a mount beneath
it (design: "What it does", copy-on-write; issue 19, the ``auto`` default).

Found by following the README's first screen in a clone at ``/tmp/u-clone``
while another program had a tmpfs under ``/tmp``: ``ruff`` from the
checkout's ``.venv`` was gone in the default sandbox ("error: cannot run
'ruff': No such file or directory"), and the hint's ``--link .venv`` did not
help.  A temporary folder with a mount beneath becomes a private one (its
subfolders were hidden then); when it is the folder holding the checkout,
the checkout's own untracked files (its ``.venv``) vanished with it.  The mount is made in a mount
namespace of the test's own, so that no other run on the machine sees it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)"),
]


def test_the_checkout_s_own_files_stay_visible_with_a_mount_in_its_temporary_folder(
    env, tmp_path: Path
) -> None:
    tmp = Path(env["TMPDIR"])
    repo = tmp / "checkout"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo, env=env)
    (repo / "a.txt").write_text("a\n")
    (repo / ".gitignore").write_text(".venv/\n")
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "base", cwd=repo, env=env)
    tool = repo / ".venv" / "bin" / "tool"
    tool.parent.mkdir(parents=True)
    marker = repo / ".venv" / "marker"
    tool.write_text(f"#!/bin/sh\necho b > b.txt\necho x > '{marker}'\ngit branch planted\n")
    tool.chmod(0o755)
    mounted = tmp / "mounted"
    mounted.mkdir()
    script = f'mount -t tmpfs -o size=1m none "{mounted}" && exec "$@"'
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]
    done = subprocess.run(
        [*argv, str(ISOPATCH), "--porcelain", "--", str(tool)],
        cwd=repo,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert "no sandbox here" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert "files 1" in done.stdout.splitlines(), done.stdout
    # the checkout is copy-on-write still: its write there is discarded and named
    assert not marker.exists()
    assert f"outside-write {marker}" in done.stdout.splitlines(), done.stdout
    # and its git directory's layer, above the checkout's, is the one read back
    assert any(
        line.startswith("shared-write ") and "planted" in line and line.endswith(" discarded")
        for line in done.stdout.splitlines()
    ), done.stdout
    assert git("branch", "--list", "planted", cwd=repo, env=env).strip() == b""
