"""Ctrl-C while git-isopatch starts (its imports: typer, the package's
modules, pygit2) ends the run with 130 before anything is made: no
traceback, no worktree, no result folder, the command never started,
nothing changed in the repository.  Also when a finaliser swallows the
``KeyboardInterrupt`` (CPython's "Exception ignored in ..."): the Ctrl-C
is not lost, and no run goes on to report ``exit 0`` while the process
exits 130.

Each case stops git-isopatch at a known point: a ``sitecustomize`` on
``PYTHONPATH`` (this test's, never git-isopatch's) holds the process in
the import of a given module until the test has sent SIGINT, and where
asked it holds it inside a finaliser, where the ``KeyboardInterrupt`` is
swallowed.  The signal goes to the process group, as a terminal's Ctrl-C
does; through ``git isopatch``, git passes it on once more."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import admin_dirs, wait_until
from repo_helpers import ISOPATCH, repo_state

#: Held in the import of $HOLD_AT (``import`` of a module, by a finder
#: first on sys.meta_path): $HOLD_READY is made, then the process waits
#: for $HOLD_GO.  $HOLD_HOW: ``raise`` (the signal's KeyboardInterrupt
#: comes out of the import), ``swallow`` (it comes in a ``__del__``, which
#: CPython ignores), ``mark`` (no wait: $HOLD_READY says the import began).
SITECUSTOMIZE = """
import os, sys, time

AT, HOW, READY, GO = (os.environ[k] for k in ("HOLD_AT", "HOLD_HOW", "HOLD_READY", "HOLD_GO"))


def hold():
    open(READY, "w").close()
    while HOW != "mark" and not os.path.exists(GO):
        time.sleep(0.01)


class Swallowed:
    def __del__(self):
        hold()


class Holder:
    def find_spec(self, name, path=None, target=None):
        if name == AT:
            sys.meta_path.remove(self)
            if HOW == "swallow":
                Swallowed()
            else:
                hold()
        return None


sys.meta_path.insert(0, Holder())
"""

#: The command; it would leave $RAN.
COMMAND = ["sh", "-c", 'echo ran > "$RAN"; sleep 30']


def _start(
    repo: Path, env: dict[str, str], tmp_path: Path, at: str, how: str, via_git: bool = False
) -> tuple[subprocess.Popen[bytes], Path]:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    ready = tmp_path / "ready"
    holding = {
        "PYTHONPATH": str(hook),
        "HOLD_AT": at,
        "HOLD_HOW": how,
        "HOLD_READY": str(ready),
        "HOLD_GO": str(tmp_path / "go"),
        "RAN": str(tmp_path / "ran"),
    }
    argv = ["git", "isopatch"] if via_git else [str(ISOPATCH)]
    process = subprocess.Popen(
        # unconfined: $RAN is written outside the worktree
        [*argv, "--porcelain", "--no-sandbox", "--", *COMMAND],
        cwd=repo,
        env={**env, **holding},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group, as a shell job in a terminal
    )
    wait_until(lambda: ready.exists() or process.poll() is not None, what=f"the import of {at}")
    assert process.poll() is None, process.communicate()
    return process, tmp_path / "go"


def _assert_stopped_before_anything(
    done: subprocess.Popen[bytes], out: bytes, err: bytes, status: int, repo: Path, env, before
) -> None:
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()
    assert done.returncode == status, err.decode()
    assert out == b""
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []
    assert list(Path(env["TMPDIR"]).glob("git-isopatch-*")) == []


@pytest.mark.parametrize(
    ("at", "how", "via_git"),
    [
        ("typer", "raise", False),  # the executable's imports, before the command line's try
        ("typer", "swallow", False),
        ("pygit2", "raise", False),  # imported when the run begins
        ("pygit2", "swallow", False),  # nothing checks again until the run's own handler
        ("typer", "raise", True),
        ("pygit2", "swallow", True),
    ],
)
def test_ctrl_c_during_the_imports_stops_the_run_before_anything(
    env, make_repo, tmp_path: Path, no_leftovers, at: str, how: str, via_git: bool
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    process, go = _start(repo, env, tmp_path, at, how, via_git)
    os.killpg(process.pid, signal.SIGINT)
    go.touch()
    out, err = process.communicate(timeout=120)
    # git passes the signal on, waits for git-isopatch, then dies of it (130 to a shell)
    status = -signal.SIGINT if via_git else 130
    _assert_stopped_before_anything(process, out, err, status, repo, env, before)
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("delay", [0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8])
def test_ctrl_c_at_any_moment_of_the_start_is_never_lost(
    env, make_repo, tmp_path: Path, no_leftovers, delay: float
) -> None:
    """SIGINT some time after the executable's entry point began: however
    far the run got (its imports, its checks, the worktree, the command),
    it ends with 130 and without a traceback, and a result it writes says
    so (``exit 130``, ``signal SIGINT``).  No time is asserted: every
    outcome is checked."""
    repo = make_repo()
    before = repo_state(repo, env)
    process, _ = _start(repo, env, tmp_path, "git_isopatch.cli", "mark")
    time.sleep(delay)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    if out == b"":  # stopped before the run began
        _assert_stopped_before_anything(process, out, err, 130, repo, env, before)
        return
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()
    assert process.returncode == 130, err.decode()
    fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
    assert (fields["exit"], fields["signal"]) == ("130", "SIGINT")
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


#: A ``git`` first on PATH that, for ``worktree add``, does what a Ctrl-C
#: does when it comes in the moment a git child of git-isopatch has not
#: yet left git-isopatch's process group (between fork and ``setpgid``):
#: the signal reaches git-isopatch and kills that git.
CTRL_C_IN_GIT = """#!/bin/sh
case " $* " in
*" worktree add "*) kill -INT "$PPID"; kill -INT $$ ;;
esac
exec {git} "$@"
"""


@pytest.mark.hostile
def test_ctrl_c_that_kills_a_git_of_the_start_ends_the_run_with_130(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """The Ctrl-C reached git-isopatch, and the git it was starting died of
    it: the run ends as the Ctrl-C says (130, nothing printed on stdout),
    not as a failure to make the worktree (128)."""
    import shutil

    repo = make_repo()
    before = repo_state(repo, env)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "git").write_text(CTRL_C_IN_GIT.format(git=shutil.which("git", path=env["PATH"])))
    (shim / "git").chmod(0o755)
    done = subprocess.run(
        [str(ISOPATCH), "--porcelain", "--no-sandbox", "--", *COMMAND],
        cwd=repo,
        env={**env, "PATH": f"{shim}:{env['PATH']}", "RAN": str(tmp_path / "ran")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    _assert_stopped_before_anything(done, done.stdout, done.stderr, 130, repo, env, before)
    assert b"fatal:" not in done.stderr, done.stderr.decode()
    assert not (tmp_path / "ran").exists()
