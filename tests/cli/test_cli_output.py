"""Where the result goes (design: "Command line"): ``--stdout``, ``-o`` (a
file, ``-``, relative to ``-C``), the mode of the ``-o`` file, and an output
that cannot be written (no space, unwritable, not a patch): one ``fatal:``
line, never exit 0, and the worktree kept with its path reported."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from hostile import read_only_bind
from output_helpers import BIG_OUTPUT, _assert_kept, _run_with_umask
from repo_helpers import (
    git,
    isopatch,
    repo_state,
    tmpfs,
)

SYNOPSIS = "usage: git isopatch [<options>] [--] <command> [<arg>...]"
CHANGE = ["sh", "-c", "echo changed >> README; echo out; echo err >&2"]


@pytest.mark.hostile
@pytest.mark.parametrize("mode", ["--stdout", "--porcelain", "--json"])
def test_a_result_that_cannot_be_written_is_not_exit_0(env, make_repo, mode: str) -> None:
    repo = make_repo()
    with open("/dev/full", "wb") as full:
        fd = os.dup(full.fileno())
    try:
        from repo_helpers import ISOPATCH

        done = subprocess.run(
            [ISOPATCH, mode, "--", "sh", "-c", "echo x > y"],
            cwd=repo,
            env=env,
            stdout=fd,
            stderr=subprocess.PIPE,
            check=False,
        )
    finally:
        os.close(fd)
    assert done.returncode == 128, done.stderr
    assert b"No space left on device" in done.stderr
    assert b"Traceback" not in done.stderr


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["list"], 128),
        (["list", "--porcelain"], 128),
        (["prune", "-n"], 128),
        (["--version"], 128),
        (["-h"], 128),
        (["list", "-h"], 128),
        (["list", "--help"], 128),
    ],
)
def test_what_a_subcommand_cannot_write_is_a_fatal_line(
    env, make_repo, args: list[str], status: int
) -> None:
    """``list``, ``prune``, ``--version``, the short usage and a
    subcommand's part of the manual on a full stdout: one ``fatal:`` line,
    no traceback (a result lost is never exit 0)."""
    from repo_helpers import ISOPATCH

    repo = make_repo()
    kept = isopatch("--no-sandbox", "-q", "--keep", "--", "true", cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [ISOPATCH, *args], cwd=repo, env=env, stdout=full, stderr=subprocess.PIPE, check=False
        )
    assert done.returncode == status, done.stderr
    assert done.stderr.decode().splitlines()[-1:] == [
        "fatal: could not write to stdout: No space left on device"
    ]


@pytest.mark.hostile
@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--json"],
        ["prune", "-n"],
        ["--version"],
        ["list", "--help"],
        ["prune", "--help"],
        ["--porcelain", "--", "true"],
        ["--json", "--", "true"],
    ],
)
def test_a_closed_stdout_is_a_fatal_line(env, make_repo, args: list[str]) -> None:
    """Started with its stdout closed (``>&-``), what has a result to
    write says so in one ``fatal:`` line, 128, no traceback."""
    from repo_helpers import ISOPATCH

    repo = make_repo()
    done = subprocess.run(
        [ISOPATCH, *args],
        cwd=repo,
        env=env,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
        check=False,
    )
    assert done.returncode == 128, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fatal: stdout is closed"), lines


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_file_follows_the_umask(env, make_repo, umask: int, mode: int) -> None:
    """As ``--stdout > FILE`` would create it."""
    repo = make_repo()
    target = repo.parent / "change.patch"
    done = _run_with_umask(umask, repo, env, "-q", "-o", str(target), "--", "touch", "new")
    assert done.returncode == 0, done.stderr
    assert target.stat().st_mode & 0o777 == mode
    assert b"new file mode" in target.read_bytes()


def test_output_file_that_exists_keeps_its_mode(env, make_repo) -> None:
    """``>`` truncates a file and keeps its mode; so does ``-o``."""
    repo = make_repo()
    target = repo.parent / "change.patch"
    target.write_text("old\n")
    target.chmod(0o640)
    done = _run_with_umask(0o022, repo, env, "-q", "-o", str(target), "--", "touch", "new")
    assert done.returncode == 0, done.stderr
    assert target.stat().st_mode & 0o777 == 0o640
    assert b"new file mode" in target.read_bytes()


def test_dash_output_is_standard_output(env, make_repo) -> None:
    """``-o -`` is ``--stdout``: the patch on stdout, no file named ``-``."""
    repo = make_repo()
    run = isopatch("-o", "-", "--", "sh", "-c", "echo hi; echo new > new", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.out.startswith("diff --git a/new b/new\n")
    assert "hi" in run.err  # the command's stdout goes to stderr, as with --stdout
    assert not (repo / "-").exists()
    same = isopatch("--stdout", "--", "sh", "-c", "echo new > new", cwd=repo, env=env)
    assert same.out == run.out
    assert git("status", "--porcelain", cwd=repo, env=env) == b""


@pytest.mark.parametrize("other", ["--porcelain", "--json", "--stdout"])
def test_dash_output_with_another_output_is_a_usage_error(env, make_repo, other: str) -> None:
    repo = make_repo()
    run = isopatch("-o", "-", other, "--", "true", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.splitlines()[0] == f"error: options '-o -' and '{other}' cannot be used together"


@pytest.mark.parametrize(
    "args",
    [
        ["--stdout", "-o", "out.patch"],
        ["-o", "out.patch", "--stdout"],
        ["--stdout", "--output=out.patch"],
        ["--stdout", "-o", "-", "-o", "out.patch"],  # the last -o wins, as in git
    ],
)
def test_stdout_with_an_output_file_is_a_usage_error(
    env, make_repo, tmp_path: Path, args: list[str]
) -> None:
    """The patch goes to one place: ``--stdout`` with ``-o <file>`` is
    refused in the words of ``git format-patch --stdout --output=<file>``,
    as a usage error (129), before anything is run or written (git makes
    its empty ``<file>`` first: not in the repository, then)."""
    repo = make_repo()
    theirs = subprocess.run(
        ["git", "format-patch", "--stdout", f"--output={tmp_path / 'theirs.patch'}", "-1"],
        cwd=repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert theirs.returncode == 128
    gits = theirs.stderr.removeprefix("fatal: ").rstrip("\n")
    assert gits == "options '--stdout' and '--output' cannot be used together"
    before = repo_state(repo, env)
    run = isopatch(*args, "--", "touch", "new", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.out == ""
    assert run.err.splitlines()[:2] == [f"error: {gits}", SYNOPSIS]
    assert not (repo / "out.patch").exists()
    assert repo_state(repo, env) == before
    assert list(Path(env["TMPDIR"]).iterdir()) == []


@pytest.mark.hostile
def test_no_space_for_the_patch_at_the_output(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    with tmpfs(tmp_path / "small", "128k") as small:
        target = small / "change.patch"
        run = isopatch("--porcelain", "-o", target, "--", "sh", "-c", BIG_OUTPUT, cwd=repo, env=env)
        worktree = _assert_kept(run, repo, env, "no-space", str(target))
        assert run.fields()["exit"] == "0"
        assert list(small.iterdir()) == []  # neither the patch nor its temporary file
    assert (worktree / "random.bin").stat().st_size == 300000
    git("worktree", "remove", "--force", worktree, cwd=repo, env=env)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("target", "code", "reason"),
    [
        ("a-folder", "is-a-directory", "Is a directory"),
        ("no-such-folder/change.patch", "no-such-file", "No such file or directory"),
        ("a-file/change.patch", "not-a-directory", "Not a directory"),
        ("a-link", "bad-output", "it is a symbolic link"),
        ("a-socket", "bad-output", "it is not a regular file"),
        ("repo/.git/config", "bad-output", None),
        ("repo/.git/newfile", "bad-output", None),
    ],
)
def test_output_that_cannot_be_a_patch_is_refused_before_anything_runs(
    env, make_repo, tmp_path: Path, target: str, code: str, reason: str | None
):
    """An ``-o`` target that is a folder, a link, a socket, in a missing
    folder or inside the git directory is refused before the command runs:
    the patch is renamed over its target, which would replace a link and
    break a repository with ``-o .git/config`` (found by attacking it).
    (A FIFO or a character device takes a copy: test_cli_output_special.py.)"""
    repo = make_repo()
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("a file\n")
    os.symlink(tmp_path / "a-file", tmp_path / "a-link")
    os.mkfifo(tmp_path / "a-fifo")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "a-socket"))
    before = repo_state(repo, env)
    config = (repo / ".git" / "config").read_bytes()
    run = isopatch(
        "--porcelain", "-o", tmp_path / target, "--", "sh", "-c", "echo ran > ../../ran",
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: ") and run.err.count("\n") == 1, run.err
    if reason is not None:
        assert run.err.rstrip().endswith(reason)
    assert run.fields()["error-code"] == code
    assert not (tmp_path / "ran").exists()
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert repo_state(repo, env) == before
    assert (repo / ".git" / "config").read_bytes() == config
    assert (tmp_path / "a-link").is_symlink() and stat.S_ISFIFO(
        os.lstat(tmp_path / "a-fifo").st_mode
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("target", "code", "reason"),
    [("readonly/change.patch", "read-only", "Read-only file system")],
)
def test_unwritable_output(env, make_repo, tmp_path: Path, target: str, code: str, reason: str):
    repo = make_repo()
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("a file\n")
    (tmp_path / "readonly").mkdir()
    with read_only_bind(tmp_path / "readonly"):
        run = isopatch(
            "--porcelain", "-o", tmp_path / target, "--", "sh", "-c", "echo done > done.txt",
            cwd=repo, env=env,
        )  # fmt: skip
    worktree = _assert_kept(run, repo, env, code, str(tmp_path / target))
    assert run.err.splitlines()[0].endswith(f": {reason}")
    assert list((tmp_path / "a-folder").iterdir()) == []
    assert sorted(p.name for p in tmp_path.glob(".isopatch-*")) == []
    git("worktree", "remove", "--force", worktree, cwd=repo, env=env)


def test_stdout_carries_only_the_patch(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    run = isopatch("--stdout", "-q", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0
    assert run.stdout.startswith(b"diff --git a/README b/README\n")
    assert run.err == "out\nerr\n"  # the command's stdout went to stderr
    git("apply", "--check", "-", cwd=repo, env=env, input=run.stdout)
    assert list(Path(env["TMPDIR"]).iterdir()) == []  # nothing left behind


def test_output_file(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    target = tmp_path / "out" / "change.patch"
    target.parent.mkdir()
    run = isopatch("-o", target, "--porcelain", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["patch"] == str(target)
    assert target.read_bytes().startswith(b"diff --git a/README b/README\n")
    assert list(target.parent.iterdir()) == [target]  # no temporary file beside it


def test_output_is_relative_to_dash_c_as_in_git(env, make_repo, tmp_path) -> None:
    """``-C <path>`` runs as if started in <path>, so a relative ``-o`` lands
    there (reported by a new user: it was taken from the caller's folder)."""
    repo = make_repo({"pkg/file": "x\n"})
    run = isopatch(
        "-C", repo / "pkg", "-o", "out.patch", "--porcelain", "--", "true", cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.err
    assert run.fields()["patch"] == str(repo / "pkg" / "out.patch")
    assert (repo / "pkg" / "out.patch").exists() and not (tmp_path / "out.patch").exists()
