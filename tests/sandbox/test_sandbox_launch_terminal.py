"""Job control through the sandbox (design: procedure step 5): on a
terminal, a sandboxed command is a foreground job as an unconfined one is.
Ctrl-C reaches the command only, so a command that catches it (a REPL, an
editor) goes on; Ctrl-Z stops the run and ``fg`` continues it.

bubblewrap's monitor and the launcher share the command's process group;
neither may die of, or swallow, what the terminal sends the group."""

from __future__ import annotations

import signal
from pathlib import Path

#: Catches Ctrl-C, says so, and goes on reading, as a REPL does.
CATCHES = (
    'trap \'echo caught\' INT; read a; echo "ready $a"; while ! read b; do :; done; echo "$b" > got'
)


def test_ctrl_c_is_caught_by_the_command_and_the_run_goes_on(
    env, make_repo, tmp_path: Path, session_for, no_leftovers
) -> None:
    repo = make_repo()
    patch = tmp_path / "out.patch"
    session = session_for(repo, "-q", "--sandbox", "-o", str(patch), "--", "sh", "-c", CATCHES)
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x03")  # Ctrl-C: SIGINT to the foreground group
    session.shows(b"caught")
    session.type(b"two\n")
    assert session.event() == "exit 0"
    assert b"+two\n" in patch.read_bytes()


def test_ctrl_c_ends_a_command_that_does_not_catch_it(
    env, make_repo, session_for, no_leftovers
) -> None:
    repo = make_repo()
    command = 'read a; echo "ready $a"; exec sleep 600'
    session = session_for(repo, "-q", "--sandbox", "--", "sh", "-c", command)
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x03")
    assert session.event() == f"exit {128 + signal.SIGINT}"


def test_ctrl_z_stops_the_sandboxed_run_and_fg_continues_it(
    env, make_repo, tmp_path: Path, session_for, no_leftovers
) -> None:
    repo = make_repo()
    patch = tmp_path / "out.patch"
    command = 'read a; echo "ready $a"; read b; echo "$b" > got'
    session = session_for(repo, "-q", "--sandbox", "-o", str(patch), "--", "sh", "-c", command)
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x1a")
    assert session.event() == "stopped foreground=job", "git-isopatch took the terminal back"
    session.order("fg")
    session.type(b"two\n")
    assert session.event() == "exit 0"
    assert b"+two\n" in patch.read_bytes()
