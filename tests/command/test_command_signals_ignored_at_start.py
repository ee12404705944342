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
