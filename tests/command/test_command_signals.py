"""Signals and time (issue 4): SIGINT, SIGTERM and SIGHUP sent to
git-isopatch reach the command's whole process group, no process of the
command is left, the worktree is removed (or kept and reported when the
patch cannot be written) and the exit status is 128+N; ``--timeout`` ends
the group (SIGTERM, then SIGKILL) and still captures the patch; a
git-isopatch killed with SIGKILL leaves a worktree recognisable as
orphaned."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from hostile import admin_dirs, script, wait_until
from repo_helpers import ISOPATCH, git, isopatch, registered_worktrees, repo_state, tmpfs

from git_isopatch.git.types import GitDirPath
from git_isopatch.sandbox.command import run_command
from git_isopatch.worktrees.store import GitMetadataStore, process_is_running

pytestmark = pytest.mark.hostile

#: The command: a change in the worktree, two background grandchildren and
#: the shell itself, their pids written to $PIDS, then $READY, then wait.
#: ``$TRAP`` is a trap command run first (empty for none); ``trap ''``
#: ignores the signals, and the background processes inherit that.
COMMAND = """eval "$TRAP"
echo started > progress.txt
sleep 300 & echo $! >> "$PIDS"
sh -c 'sleep 300' & echo $! >> "$PIDS"
echo $$ >> "$PIDS"
: > "$READY"
wait
"""


def _start(repo: Path, env: dict[str, str], tmp_path: Path, *args: str, trap: str = ""):
    pids, ready = tmp_path / "pids", tmp_path / "ready"
    process = subprocess.Popen(
        # unconfined: $PIDS and $READY are written outside, and the pids are
        # looked for here (the sandbox's own promises: test_sandbox_launch*)
        [ISOPATCH, "--porcelain", "--no-sandbox", *args, "--", "sh", "-c", COMMAND],
        cwd=repo,
        env={**env, "PIDS": str(pids), "READY": str(ready), "TRAP": trap},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: ready.exists() or process.poll() is not None, what="the command")
    assert process.poll() is None, process.communicate()
    return process, pids


def _command_pids(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()]


def _fields(out: bytes) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in out.decode().splitlines())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("trap", [False, True], ids=["obeys", "traps"])
def test_a_signal_stops_the_whole_command(
    env, make_repo, tmp_path: Path, no_leftovers, signum: int, trap: bool
) -> None:
    """The signal reaches every process of the command's group; one that
    traps it is killed after a grace period; the patch is still captured
    and the worktree removed."""
    repo = make_repo()
    before = repo_state(repo, env)
    process, pids = _start(repo, env, tmp_path, trap="trap '' INT TERM HUP" if trap else "")
    os.kill(process.pid, signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, err.decode()
    fields = _fields(out)
    assert fields["exit"] == str(128 + signum)
    assert b"+++ b/progress.txt" in Path(fields["patch"]).read_bytes()
    assert [pid for pid in _command_pids(pids) if process_is_running(pid)] == []
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


def test_timeout_stops_a_command_that_traps_sigterm(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """``--timeout``: SIGTERM, then SIGKILL for a group that ignores it;
    exit 124, the patch captured, no process left."""
    repo = make_repo()
    process, pids = _start(repo, env, tmp_path, "--timeout", "1", trap="trap '' TERM")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 124, err.decode()
    assert err.decode().endswith("error: the command timed out after 1 second\n")
    fields = _fields(out)
    assert fields["exit"] == "124"
    assert b"+++ b/progress.txt" in Path(fields["patch"]).read_bytes()
    assert [pid for pid in _command_pids(pids) if process_is_running(pid)] == []
    assert admin_dirs(repo, env) == []


def test_ctrl_c_during_extraction_does_not_break_git(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """A Ctrl-C on the terminal signals the whole foreground process group.
    Here it comes while git-isopatch runs ``git diff`` (a ``git`` first on
    PATH sends it to git-isopatch's group, then runs the real git): git,
    in a group of its own, finishes; the patch is written; exit 130."""
    real_git = shutil.which("git", path=env["PATH"])
    shim = tmp_path / "shim"
    script(
        shim / "git",
        'case " $* " in *" diff --binary "*)\n'
        '    kill -INT -"$(ps -o pgid= -p "$PPID" | tr -d " ")"; sleep 0.5;;\n'
        "esac\n"
        f'exec {real_git} "$@"\n',
    )
    repo = make_repo()
    before = repo_state(repo, env)
    done = subprocess.run(
        # unconfined: in the sandbox the worktree's git runs inside it
        [ISOPATCH, "--porcelain", "--no-sandbox", "--", "sh", "-c", "echo x > new.txt"],
        cwd=repo,
        env={**env, "PATH": f"{shim}{os.pathsep}{env['PATH']}"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        start_new_session=True,  # its own group, as a shell job in a terminal
        timeout=120,
    )
    assert done.returncode == 130, done.stderr.decode()
    fields = _fields(done.stdout)
    assert fields["exit"] == "130"
    assert b"+++ b/new.txt" in Path(fields["patch"]).read_bytes()
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


def test_signal_when_the_patch_cannot_be_written(env, make_repo, tmp_path: Path) -> None:
    """The run is stopped by SIGTERM and the patch cannot be written (``-o``
    on a read-only file system): the worktree is kept and reported, and the
    exit status still says what stopped the run."""
    repo = make_repo()
    with tmpfs(tmp_path / "readonly", "64k", "ro") as readonly:
        process, _ = _start(repo, env, tmp_path, "-o", str(readonly / "x.patch"))
        os.kill(process.pid, signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, err.decode()
    fields = _fields(out)
    assert fields["error-code"] == "read-only"
    worktree = Path(fields["worktree"])
    assert (worktree / "progress.txt").read_text() == "started\n"
    assert err.decode().splitlines()[0].startswith("fatal: could not write patch ")
    assert registered_worktrees(repo, env) == [f"worktree {worktree}"]
    git("worktree", "remove", "--force", worktree, cwd=repo, env=env)


def test_sigkill_leaves_a_worktree_recognisable_as_orphaned(env, make_repo, tmp_path: Path) -> None:
    """SIGKILL cannot be caught: the worktree stays, locked with a reason
    naming the owner, and its record says the owner no longer runs (also
    before the parent reaps the killed process)."""
    repo = make_repo()
    process, pids = _start(repo, env, tmp_path)
    (admin,) = admin_dirs(repo, env)
    record = GitMetadataStore().load(GitDirPath(admin))
    assert record is not None and record.pid == process.pid
    assert record.owner_is_running()
    try:
        os.kill(process.pid, signal.SIGKILL)
        wait_until(lambda: not process_is_running(process.pid), what="the kill")
        assert not record.owner_is_running()  # a zombie: killed, not yet reaped
        process.wait()
        assert not record.owner_is_running()
        assert GitMetadataStore().load(GitDirPath(admin)) == record
        listing = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
        assert f"locked git-isopatch pid {process.pid} on " in listing
    finally:
        for pid in _command_pids(pids):  # the command's group outlives its owner
            if process_is_running(pid):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                break
        (worktree,) = registered_worktrees(repo, env)
        git(
            "worktree",
            "remove",
            "--force",
            "--force",
            worktree[len("worktree ") :],
            cwd=repo,
            env=env,
        )
        shutil.rmtree(record.tmpdir, ignore_errors=True)


def test_a_signal_before_the_command_starts_means_it_never_runs(tmp_path: Path) -> None:
    """A signal that came while the worktree was being made (recorded in
    the shared state): the command is not started at all.  (SIGINT is
    ignored here and so in a command that would start: only not starting
    it keeps it from running.)"""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        outcome = run_command(
            ["sh", "-c", "echo ran > ran.txt"],
            cwd=str(tmp_path),
            env=dict(os.environ),
            signal_state={"received": signal.SIGINT},
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert outcome.exit_code == 130 and outcome.received_signal == signal.SIGINT
    assert not (tmp_path / "ran.txt").exists()


def test_what_the_command_leaves_running_is_stopped(env, make_repo, tmp_path: Path, no_leftovers):
    """When the command exits, a background job it left in its process
    group is stopped: it stands in a worktree about to go and could still
    be writing while the patch is made.  A daemon that started a session of
    its own (``setsid``) meant to outlive the command and is not touched."""
    repo = make_repo()
    pids = tmp_path / "pids"
    # the daemon writes its pid once it has a session of its own: wait for it
    command = (
        'sleep 300 & echo $! > "$PIDS"; '
        "setsid sh -c 'echo $$ >> \"$PIDS\"; exec sleep 300' & "
        'while [ "$(wc -l < "$PIDS")" -lt 2 ]; do sleep 0.02; done; '
        "echo done > done.txt"
    )
    run = isopatch(  # unconfined: in the sandbox the daemon does not outlive the run
        "--porcelain", "--no-sandbox", "--", "sh", "-c", command,
        cwd=repo, env={**env, "PIDS": str(pids)},
    )  # fmt: skip
    job, daemon = _command_pids(pids)
    try:
        assert run.returncode == 0, run.err
        assert b"+++ b/done.txt" in Path(run.fields()["patch"]).read_bytes()
        assert not process_is_running(job)
        assert process_is_running(daemon)
    finally:
        if process_is_running(daemon):
            os.kill(daemon, signal.SIGKILL)


#: The command for an ignored signal: its own ignored signals (the
#: ``SigIgn`` mask of ``/proc``), $READY, then a change after the signal.
IGNORING_COMMAND = """grep SigIgn /proc/$$/status > "$FLAGS/ignored"
echo started > progress.txt
: > "$FLAGS/ready"
sleep 2
echo done > done.txt
"""


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("confinement", ["--sandbox", "--no-sandbox"])
def test_a_signal_ignored_from_the_start_stays_ignored(
    env, make_repo, tmp_path: Path, signum: int, confinement: str
) -> None:
    """``nohup git isopatch ...`` ignores SIGHUP, a script's background
    job SIGINT: a signal ignored when git-isopatch starts is not acted on
    nor forwarded, and the command inherits it ignored, as a shell keeps
    it ("Signals that were ignored on entry to a non-interactive shell
    cannot be trapped"); the run goes on to its end."""
    repo = make_repo()
    flags = tmp_path / "flags"
    flags.mkdir()
    name = signal.Signals(signum).name.removeprefix("SIG")
    process = subprocess.Popen(
        ["sh", "-c", f"trap '' {name}; exec \"$@\"", "sh", ISOPATCH, "--porcelain"]
        + [confinement, "--allow-write", str(flags), "--", "sh", "-c", IGNORING_COMMAND],
        cwd=repo,
        env={**env, "FLAGS": str(flags)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ready = flags / "ready"
    wait_until(lambda: ready.exists() or process.poll() is not None, what="the command")
    os.kill(process.pid, signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()
    fields = _fields(out)
    assert fields["exit"] == "0" and "signal" not in fields
    assert b"+++ b/done.txt" in Path(fields["patch"]).read_bytes()
    mask = int((flags / "ignored").read_text().split()[1], 16)
    assert mask & (1 << (signum - 1)), "the command inherits it ignored"
