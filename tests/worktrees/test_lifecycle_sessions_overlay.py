"""A sandboxed session whose worktree is placed on a file system overlayfs
keeps no upper layer on (an overlay itself, as a container's image; FUSE;
a network file system): its worktree is a kept checkout of its base, as
unconfined (man page: "Sessions"), not a sandbox that cannot be set up."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_helpers import isopatch


@contextlib.contextmanager
def _overlay(tmp_path: Path) -> Iterator[Path]:
    """An overlay mounted at ``tmp_path/ov``; unmounted afterwards."""
    parts = {name: tmp_path / name for name in ("lower", "upper", "work", "ov")}
    for folder in parts.values():
        folder.mkdir()
    options = "lowerdir={lower},upperdir={upper},workdir={work}".format(**parts)
    done = subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", options, str(parts["ov"])],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount an overlay here (needs root and mount): {done.stderr.strip()}")
    try:
        yield parts["ov"]
    finally:
        subprocess.run(["umount", "-l", str(parts["ov"])], check=False)


def test_a_session_beside_a_checkout_on_an_overlay_is_a_kept_checkout(
    make_repo, env, tmp_path: Path
) -> None:
    with _overlay(tmp_path):
        repo = make_repo({"a.txt": "a\n"}, name="ov/src/repo")
        steps = []
        for script in ("echo b > b.txt", "cat b.txt > c.txt"):
            done = isopatch(
                "--session", "s", "--sandbox", "--json", "--", "sh", "-c", script,
                cwd=repo, env=env,
            )  # fmt: skip
            assert done.returncode == 0, done.err
            steps.append(json.loads(done.out))
        assert [p["path"] for p in steps[1]["path"]] == ["c.txt"]  # b.txt was there
        assert steps[1]["sandbox"] is True
        session_patch = Path(steps[1]["session-patch"]).read_text()
        assert "+++ b/b.txt" in session_patch and "+++ b/c.txt" in session_patch
        ended = isopatch("--session", "s", "--end", cwd=repo, env=env)
        assert ended.returncode == 0, ended.err
        assert [p.name for p in repo.parent.iterdir()] == ["repo"]
