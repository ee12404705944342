"""Resources and permissions (issue 4): no space left, a read-only
``$TMPDIR``, an unwritable ``-o`` target.  Each is one ``fatal:`` line with
a stable ``error-code``; when the patch cannot be written the worktree is
kept and its path reported, so nothing the command did is lost.  Private
files are 0600 and the temporary folder 0700 whatever the umask.

(A checkout that does not fit in ``$TMPDIR`` is
``test_exit_status.py::test_worktree_that_cannot_be_created_is_fatal``.)"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from hostile import admin_dirs, read_only_bind
from repo_helpers import ISOPATCH, git, isopatch, registered_worktrees, repo_state, tmpfs

#: Writes 300 kB of incompressible bytes in the worktree: more than the
#: small file systems below hold, as a file and as a patch.
BIG_OUTPUT = "echo done > done.txt; head -c 300000 /dev/urandom > random.bin"


def _assert_kept(run, repo: Path, env, code: str, target: str) -> Path:
    """One fatal line and a hint; the worktree kept, registered and
    unlocked, with the command's files in it."""
    assert run.returncode == 128, run.err
    lines = run.err.splitlines()
    assert lines[0].startswith(f"fatal: could not write patch '{target}': "), run.err
    assert len(lines) == 2 and lines[1].startswith("hint: the worktree is kept")
    fields = run.fields()
    assert fields["error-code"] == code
    assert "patch" not in fields and "files" not in fields
    worktree = Path(fields["worktree"])
    assert (worktree / "done.txt").read_text() == "done\n"
    assert registered_worktrees(repo, env) == [f"worktree {worktree}"]
    assert b"locked" not in git("worktree", "list", "--porcelain", cwd=repo, env=env)
    return worktree


def test_no_space_for_the_commands_output_and_patch(env, make_repo, tmp_path: Path) -> None:
    """``isopatch.tmpdir`` holds the checkout but not what the command
    writes: the command meets ENOSPC itself (its exit code is reported),
    then the patch cannot be written either."""
    repo = make_repo()
    with tmpfs(tmp_path / "small", "128k") as small:
        run = isopatch(
            "--porcelain",
            "--",
            "sh",
            "-c",
            BIG_OUTPUT,
            cwd=repo,
            env=env,
            git_options=("-c", f"isopatch.tmpdir={small}"),
        )
        private = [p for p in small.glob("git-isopatch-*") if not (p / "repo").exists()]
        patch = private[0] / "isopatch.patch"
        worktree = _assert_kept(run, repo, env, "no-space", str(patch))
        assert run.fields()["exit"] == "1"  # head: No space left on device
        assert "No space left on device" in run.err
        assert not patch.exists()  # no half-written patch
        git("worktree", "remove", "--force", worktree, cwd=repo, env=env)


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


@pytest.mark.parametrize("how", ["tmpfs -o ro", "read-only bind mount"])
def test_read_only_tmpdir(env, make_repo, tmp_path: Path, how: str) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    folder = tmp_path / "readonly"
    folder.mkdir()
    mount = tmpfs(folder, "64k", "ro") if how.startswith("tmpfs") else read_only_bind(folder)
    with mount:
        run = isopatch("--json", "--", "true", cwd=repo, env={**env, "TMPDIR": str(folder)})
        assert list(folder.iterdir()) == []
    assert run.returncode == 128
    assert run.err == (
        f"fatal: could not create a temporary folder in '{folder}': Read-only file system\n"
    )
    assert json.loads(run.stdout)["error-code"] == "read-only"
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


@pytest.mark.parametrize(
    ("target", "code", "reason"),
    [
        ("a-folder", "is-a-directory", "Is a directory"),
        ("no-such-folder/change.patch", "no-such-file", "No such file or directory"),
        ("a-file/change.patch", "not-a-directory", "Not a directory"),
        ("a-link", "bad-output", "it is a symbolic link"),
        ("a-fifo", "bad-output", "it is not a regular file"),
        ("repo/.git/config", "bad-output", None),
        ("repo/.git/newfile", "bad-output", None),
    ],
)
def test_output_that_cannot_be_a_patch_is_refused_before_anything_runs(
    env, make_repo, tmp_path: Path, target: str, code: str, reason: str | None
):
    """An ``-o`` target that is a folder, a link, a FIFO, in a missing folder
    or inside the git directory is refused before the command runs: the
    patch is renamed over its target, which would replace a link or a FIFO
    and break a repository with ``-o .git/config`` (found by attacking it)."""
    repo = make_repo()
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("a file\n")
    os.symlink(tmp_path / "a-file", tmp_path / "a-link")
    os.mkfifo(tmp_path / "a-fifo")
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


def test_private_modes_whatever_the_umask(env, make_repo, tmp_path: Path, no_leftovers) -> None:
    """Temporary folder 0700; patch, captured stdout and stderr 0600, under
    umask 000.  A patch the user names with ``-o`` is not private: it
    follows the umask, as ``--stdout > FILE`` would (issue 10; see
    tests/test_careful_user.py)."""
    repo = make_repo()
    out = tmp_path / "out"
    out.mkdir()
    for extra in ((), ("-o", str(out / "change.patch"))):
        done = subprocess.run(
            ["sh", "-c", 'umask 000; exec "$0" "$@"', ISOPATCH, "--porcelain", *extra, "--",
             "sh", "-c", "echo x > new"],
            cwd=repo, env=env, capture_output=True, check=True,
        )  # fmt: skip
        fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines())
        for key in ("patch", "stdout", "stderr"):
            private = key != "patch" or not extra
            mode = 0o600 if private else 0o666
            assert stat.S_IMODE(Path(fields[key]).stat().st_mode) == mode, key
        assert stat.S_IMODE(Path(fields["stdout"]).parent.stat().st_mode) == 0o700


def test_no_inode_left_for_the_captured_output(env, make_repo, tmp_path: Path) -> None:
    """An ``isopatch.tmpdir`` with room for the checkout of one file but not
    for the files that capture the command's output (a tmpfs of 6 inodes:
    its root, the private folder, the worktree's folder, the worktree, its
    ``.git`` file and README): one ``fatal:`` line, ``no-space``, and
    nothing left behind."""
    repo = make_repo()
    before = repo_state(repo, env)
    with tmpfs(tmp_path / "few-inodes", "1m", "nr_inodes=6") as small:
        run = isopatch(
            "--porcelain",
            "--",
            "true",
            cwd=repo,
            env=env,
            git_options=("-c", f"isopatch.tmpdir={small}"),
        )
        assert list(small.iterdir()) == []
    assert run.returncode == 128
    assert run.err.startswith("fatal: could not create '") and run.err.count("\n") == 1
    assert run.err.endswith("/stdout': No space left on device\n")
    assert run.fields()["error-code"] == "no-space"
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []
