"""The signal tests hold when the test run itself started with SIGINT and
SIGHUP ignored (under ``nohup``, as a shell's background job): the
signals they send reach what they start, which a program started with
them ignored would inherit ignored (``tests/conftest.py``).  git-isopatch
itself, as git, leaves a signal ignored at its start ignored for the
command (``test_a_signal_ignored_from_the_start_stays_ignored``)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

SIGNAL_TESTS = Path(__file__).parent / "test_command_signals.py"


def _ignoring() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def test_the_signal_tests_hold_under_nohup(env) -> None:
    chosen = [f"{SIGNAL_TESTS}::test_a_signal_stops_the_whole_command[obeys-{n}]" for n in (1, 2)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *chosen],
        cwd=SIGNAL_TESTS.parents[2], preexec_fn=_ignoring, capture_output=True, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    said = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, said
    assert "2 passed" in said, said


def test_through_git_a_signal_ignored_at_the_start_makes_git_exit_128(env, make_repo) -> None:
    """What the manual's "EXIT STATUS" says of git itself: started with
    SIGINT ignored (a script's background job), ``git isopatch`` runs to
    its end, but git, whose handler for cleaning up its child replaced
    the ignored SIGINT, says "waitpid ... failed" and exits 128 once a
    SIGINT reached it; ``git-isopatch``, the dashed name, exits as the
    command did."""
    import os

    from hostile import wait_until

    repo = make_repo()
    script = ': > "$READY"; sleep 1; echo done > done.txt'
    command = ["--porcelain", "--no-sandbox", "--", "sh", "-c", script]
    statuses = {}
    for argv in (["git", "isopatch"], ["git-isopatch"]):
        ready = repo.parent / f"ready-{argv[0]}"
        process = subprocess.Popen(
            [*argv, *command], cwd=repo, env={**env, "READY": str(ready)}, preexec_fn=_ignoring,
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_until(lambda: ready.exists() or process.poll() is not None, what="the command")  # noqa: B023
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        assert b"\nexit 0\n" in out, err.decode()  # the run went on to its end
        statuses[argv[0]] = (process.returncode, err.decode())
    assert statuses["git"][0] == 128, statuses
    assert "error: waitpid for git-isopatch failed" in statuses["git"][1], statuses
    assert statuses["git-isopatch"] == (0, ""), statuses
