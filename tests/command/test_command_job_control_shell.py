"""Procedure step 5, job control as a shell does: on a terminal, Ctrl-Z
stops the command and git-isopatch with it, so the user's shell gets its
terminal back; ``fg`` hands the terminal to the command again and continues
it, ``bg`` continues it in the background; when the terminal goes, the
shell's ``SIGHUP`` ends the run and its worktree goes.

Each test runs git-isopatch as a job of a small job-control shell
(``job_control_helpers.py``)
on a real pseudo-terminal, and waits only on events, never on time: the
command says it holds the terminal by reading a line from it first."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from repo_helpers import isopatch, registered_worktrees

#: Reads a line once it holds the terminal, says so, then reads another.
COMMAND = 'read a; echo "ready $a"; read b; echo "$b" > got'


def test_ctrl_z_stops_the_run_and_fg_continues_the_command(
    env, make_repo, tmp_path: Path, session_for, no_leftovers
) -> None:
    repo = make_repo()
    patch = tmp_path / "out.patch"
    session = session_for(repo, "-q", "-o", str(patch), "--", "sh", "-c", COMMAND)
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x1a")  # Ctrl-Z: SIGTSTP to the foreground group, the command's
    assert session.event() == "stopped foreground=job", "git-isopatch took the terminal back"
    session.order("fg")
    session.type(b"two\n")  # read by the command only once it holds the terminal again
    assert session.event() == "exit 0"
    assert b"+two\n" in patch.read_bytes()


def test_bg_continues_it_and_a_read_stops_it_again(
    env, make_repo, tmp_path: Path, session_for, no_leftovers
) -> None:
    repo = make_repo()
    patch = tmp_path / "out.patch"
    session = session_for(repo, "-q", "-o", str(patch), "--", "sh", "-c", COMMAND)
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x1a")
    assert session.event() == "stopped foreground=job"
    session.order("bg")  # the command reads in the background: SIGTTIN stops it
    assert session.event() == "stopped foreground=other", "the shell keeps its terminal"
    session.order("fg")
    session.type(b"two\n")
    assert session.event() == "exit 0"
    assert b"+two\n" in patch.read_bytes()


def test_ctrl_c_after_fg_reaches_the_command(env, make_repo, session_for, no_leftovers) -> None:
    repo = make_repo()
    command = 'read a; echo "ready $a"; read b; echo "again $b"; exec sleep 600'
    session = session_for(repo, "-q", "--", "sh", "-c", command)
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x1a")
    assert session.event() == "stopped foreground=job"
    session.order("fg")
    session.type(b"two\n")
    session.shows(b"again two")  # it holds the terminal again
    session.type(b"\x03")
    assert session.event() == f"exit {128 + signal.SIGINT}"


def test_the_terminal_going_ends_a_stopped_run(env, make_repo, session_for) -> None:
    repo = make_repo()
    session = session_for(repo, "--", "sh", "-c", COMMAND)  # its summary has nowhere to go
    session.type(b"one\n")
    session.shows(b"ready one")
    session.type(b"\x1a")
    assert session.event() == "stopped foreground=job"
    os.close(session.master)  # the terminal goes: the shell gets SIGHUP
    session.control.close()
    assert session.event() == f"exit {128 + signal.SIGHUP}"
    assert registered_worktrees(repo, env) == []
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    states = [line for line in listed.out.splitlines() if line.startswith("state ")]
    assert listed.returncode == 0 and set(states) <= {"state base"}, listed.out
