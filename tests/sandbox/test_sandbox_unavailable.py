"""Where namespaces cannot be had, ``--sandbox`` is ``fatal:`` with
error-code ``sandbox-unavailable``, naming what is missing and how to get
it (issue 19), before anything is made; it never runs the command
unconfined.  Here a ``bwrap`` on ``PATH`` (preferred to the wheel's) that
fails as bubblewrap does where the kernel refuses user namespaces."""

from __future__ import annotations

import os
from pathlib import Path

from repo_helpers import isopatch, repo_state
from sandbox_helpers import REFUSED_BWRAP


def test_a_bubblewrap_the_kernel_refuses_stops_before_anything_is_made(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(REFUSED_BWRAP)
    (bin_dir / "bwrap").chmod(0o755)
    marker = tmp_path / "ran"
    run = isopatch(
        "--porcelain", "--sandbox", "--", "touch", str(marker),
        cwd=repo, env={**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"},
    )  # fmt: skip
    assert run.returncode == 128
    first = run.err.splitlines()[0]
    assert first.startswith(
        "fatal: --sandbox is not available: bubblewrap cannot make the namespaces here "
        "(No permissions to create a new namespace"
    ), run.err
    assert "user.max_user_namespaces" in first and "a profile for bwrap" in first
    assert run.fields()["error-code"] == "sandbox-unavailable"
    assert not marker.exists()
    assert repo_state(repo, env) == before
    assert not list(Path(env["TMPDIR"]).iterdir())
