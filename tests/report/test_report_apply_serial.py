"""Report step, ``--apply``: one at a time (issue 20).  Applies to one
repository wait for one another (the apply lock, a bounded, interruptible
wait); each applies to the previous one's result, and one whose patch no
longer applies is refused whole (``apply-failed``, patch kept, 128).

The races are made deterministic: the test holds the apply lock, starts
the runs, waits until every one says it is waiting for the lock (its
command has run, its patch is made), then lets go."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from repo_helpers import ISOPATCH, git, repo_state, write_tree

from git_isopatch.git.apply.switch import JOURNAL_PREFIX, NEW_PREFIX
from git_isopatch.worktrees.lock import APPLY_LOCK_FILE

#: A large tracked file: LINES numbered lines.
LINES = 100_000
BIG = "".join(f"line {n}\n" for n in range(1, LINES + 1))
WAITING = "another git-isopatch apply to this repository is running"


@contextmanager
def _apply_lock_held(repo: Path) -> Iterator[None]:
    fd = os.open(repo / ".git" / APPLY_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)


def _start(repo: Path, env, script: str, *options: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [ISOPATCH, "--apply", "--porcelain", *options, "--", "sh", "-c", script],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )


def _wait_until_waiting(run: subprocess.Popen[bytes]) -> None:
    """Read the run's stderr until it says it waits for the lock."""
    assert run.stderr is not None
    seen = []
    for raw in run.stderr:
        line = raw.decode()
        seen.append(line)
        if WAITING in line:
            assert APPLY_LOCK_FILE in line, line
            return
    raise AssertionError(f"the run never waited for the lock: {''.join(seen)}")


def _sed(line: int, new: str) -> str:
    return f"sed -i 's/^line {line}$/{new}/' big"


def _runs_waiting_then_released(repo: Path, env, scripts: list[str]):
    runs = []
    with _apply_lock_held(repo):
        for script in scripts:
            runs.append(_start(repo, env, script))
        for run in runs:
            _wait_until_waiting(run)
    done = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        done.append((run.returncode, out.decode(), err.decode()))
    return done


def _no_leftovers(repo: Path) -> None:
    assert not [p for p in (repo / ".git").iterdir() if p.name.startswith(JOURNAL_PREFIX)]
    assert not list(repo.glob(f"{NEW_PREFIX}*"))


def test_parallel_applies_of_different_lines_all_land(env, make_repo) -> None:
    """Four runs each change another line of a large file the user has
    edited too: every run exits 0, every change is in the file, the file
    is whole, the user's edit is kept."""
    repo = make_repo({"big": BIG})
    write_tree(repo, {"big": BIG.replace("line 1\n", "the user's edit\n")})
    lines = [20_000, 40_000, 60_000, 80_000]
    done = _runs_waiting_then_released(repo, env, [_sed(n, f"run {n}") for n in lines])
    for code, out, err in done:
        assert code == 0, err
        assert "applied true" in out.splitlines()
    text = (repo / "big").read_text()
    expected = BIG.replace("line 1\n", "the user's edit\n")
    for n in lines:
        expected = expected.replace(f"\nline {n}\n", f"\nrun {n}\n")
    assert text == expected
    assert len(text.splitlines()) == LINES
    _no_leftovers(repo)


def test_parallel_applies_of_the_same_line_one_wins_the_others_are_refused_whole(
    env, make_repo
) -> None:
    """Three runs change the same line (and each a line of its own): the
    first to get the lock applies; the others no longer apply to its
    result and are refused whole, with their patches kept."""
    repo = make_repo({"big": BIG})
    write_tree(repo, {"big": BIG.replace("line 1\n", "the user's edit\n")})
    scripts = [f"{_sed(50_000, f'winner {n}')} && {_sed(n, f'own {n}')}" for n in (10, 30, 90)]
    done = _runs_waiting_then_released(repo, env, scripts)
    applied = [i for i, (code, _, _) in enumerate(done) if code == 0]
    assert len(applied) == 1, done
    text = (repo / "big").read_text()
    assert len(text.splitlines()) == LINES
    assert text.startswith("the user's edit\n")
    for i, (code, out, err) in enumerate(done):
        n = (10, 30, 90)[i]
        if i in applied:
            assert f"\nwinner {n}\n" in text and f"\nown {n}\n" in text
            continue
        assert code == 128, err
        fields = dict(line.split(" ", 1) for line in out.splitlines())
        assert fields["error-code"] == "apply-failed"
        assert fields["applied"] == "false"
        assert "patch does not apply" in fields["error"]
        assert f"\nown {n}\n" not in text  # refused whole: not even its own line
        assert Path(fields["patch"]).is_file()
    _no_leftovers(repo)


def test_sigint_while_waiting_for_another_apply_writes_nothing(env, make_repo) -> None:
    """The test holds the repository's apply lock, so the run waits (and
    says so, naming the lock); SIGINT ends the run with 130, nothing
    written, the patch kept and named."""
    repo = make_repo({"a.txt": "a\n", "z.txt": "z\n"})
    write_tree(repo, {"z.txt": "the user's edit\nz\n"})
    before = repo_state(repo, env)
    with _apply_lock_held(repo):
        run = _start(repo, env, "echo A > a.txt")
        _wait_until_waiting(run)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
    assert fields["exit"] == "130"
    assert fields["signal"] == "SIGINT"
    assert fields["applied"] == "false"
    assert b"+A" in Path(fields["patch"]).read_bytes()
    assert repo_state(repo, env) == before
    _no_leftovers(repo)


def test_the_next_apply_starts_from_the_previous_ones_result(env, make_repo) -> None:
    """Two runs add lines next to each other: the second's patch has the
    first's line in its context, so it cannot apply on top of it; refused
    whole, the first's change stays."""
    repo = make_repo({"f": "one\ntwo\nthree\n"})
    done = _runs_waiting_then_released(
        repo, env, ["sed -i 's/^two$/TWO/' f", "sed -i 's/^three$/THREE/' f"]
    )
    codes = sorted(code for code, _, _ in done)
    assert codes == [0, 128], done
    text = (repo / "f").read_text()
    assert text in ("one\nTWO\nthree\n", "one\ntwo\nTHREE\n")
    assert git("status", "--porcelain", cwd=repo, env=env) == b" M f\n"


def test_an_apply_that_waited_too_long_says_another_apply_held_the_lock(env, make_repo) -> None:
    """The lock is shared by ``--apply`` and the MCP server's ``apply``
    (which gives this message as it is): it names neither's words."""
    from git_isopatch.bring_home import bring_home
    from git_isopatch.errors import open_repository
    from git_isopatch.git.run import own_git_environment

    repo = make_repo({"a.txt": "a\n"})
    patch = repo.parent / "a.patch"
    patch.write_text("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n")
    repository = open_repository(str(repo), env)
    with _apply_lock_held(repo):
        outcome = bring_home(repository, str(patch), env=own_git_environment(env), lock_seconds=0.5)
    lock = repo / ".git" / APPLY_LOCK_FILE
    assert (outcome.applied, outcome.error) == (
        False,
        f"another git-isopatch apply to this repository held the lock '{lock}' "
        "for 0.5 seconds; nothing was written",
    )
    assert (repo / "a.txt").read_text() == "a\n"
