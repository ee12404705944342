"""A hostile command leaves a huge sparse file in its worktree (free to
make: ``truncate -s 32G``), so that git-isopatch's extraction, after the
command has ended, runs ``git diff --binary`` over 32 GiB of zeros for
many minutes.  The user's Ctrl-C (SIGINT) or a SIGTERM must still end the
run promptly (design: "Exit status", 128 + N when a signal reaches
git-isopatch; issue 19: waits "bounded and interruptible").

Real bubblewrap, real git.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from hostile import wait_until
from repo_helpers import ISOPATCH

#: How long git-isopatch may take to end once the signal reached it.
PROMPT_SECONDS = 30


def _processes_in(folder: Path) -> list[int]:
    """The processes whose current folder is ``folder`` or below it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.removesuffix(" (deleted)").startswith(f"{folder}{os.sep}"):
            found.append(int(entry.name))
    return found


def test_ctrl_c_ends_a_run_whose_extraction_a_sparse_file_drags_out(
    env, make_repo, tmp_path: Path
) -> None:
    """The signal stops the git streaming the patch (after the grace a
    short extraction gets), the run ends with 128 + N and
    ``error-code interrupted``, and the worktree is kept, as for any
    extraction that failed; no git is left deflating zeros."""
    repo = make_repo()
    shared = tmp_path / "shared"  # really writable in the sandbox
    shared.mkdir()
    done = shared / "done"
    out = tmp_path / "porcelain"
    with out.open("wb") as stdout:
        process = subprocess.Popen(
            [ISOPATCH, "--porcelain", "--sandbox", "--allow-write", shared, "--",
             "sh", "-c", 'truncate -s 32G big && : > "$DONE"'],
            cwd=repo, env={**env, "DONE": str(done)}, stdin=subprocess.DEVNULL,
            stdout=stdout, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: done.exists() or process.poll() is not None, what="the command")
        time.sleep(3)  # the command has ended; extraction is under way
        assert process.poll() is None, "extraction ended already: nothing to interrupt"
        os.kill(process.pid, signal.SIGINT)
        try:
            code = process.wait(timeout=PROMPT_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 128 + signal.SIGINT
        records = dict(line.split(" ", 1) for line in out.read_text().splitlines() if " " in line)
        assert records["error-code"] == "interrupted"
        assert Path(records["worktree"], "big").stat().st_size == 32 << 30
        assert _processes_in(tmp_path) == []
    finally:
        # git-isopatch and any git it started, whatever happened
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for pid in _processes_in(tmp_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
