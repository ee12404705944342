"""The run's private folder (design: "Placement"): mode 0700 with 0600
files whatever the umask; kept only when someone will read it, the ones
left behind expire after two weeks, automatically at most once a day per
repository; no space or no inode left for the captured output keeps the
worktree and says so.  Never a folder git-isopatch did not make, nor one
that holds a worktree."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
from hostile import admin_dirs
from lifecycle_helpers import _age, _old_result_folder
from output_helpers import BIG_OUTPUT, _assert_kept, _run_with_umask
from repo_helpers import ISOPATCH, git, isopatch, repo_state, tmpfs

from git_isopatch.worktrees import results

CHANGE = ("sh", "-c", "echo changed >> README")


def _folders(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["TMPDIR"]).glob("git-isopatch-*"))


def _stamp(repo: Path) -> Path:
    return repo / ".git" / results.STAMP


def test_private_files_stay_private_whatever_the_umask(env, make_repo) -> None:
    repo = make_repo()
    done = _run_with_umask(0o000, repo, env, "--porcelain", "--", "touch", "new")
    assert done.returncode == 0, done.stderr
    fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines())
    for key in ("patch", "stdout", "stderr"):
        assert Path(fields[key]).stat().st_mode & 0o777 == 0o600, key
    assert Path(fields["patch"]).parent.stat().st_mode & 0o777 == 0o700


@pytest.mark.hostile
def test_no_space_for_the_commands_output_and_patch(env, make_repo, tmp_path: Path) -> None:
    """``isopatch.tmpdir`` holds the checkout but not what the command
    writes: the command meets ENOSPC itself (its exit code is reported),
    then the patch cannot be written either."""
    repo = make_repo()
    with tmpfs(tmp_path / "small", "128k") as small:
        run = isopatch(
            "--porcelain",
            "--no-sandbox",  # the default sandbox adds its hint for the failing command
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


@pytest.mark.hostile
def test_private_modes_whatever_the_umask(env, make_repo, tmp_path: Path, no_leftovers) -> None:
    """Temporary folder 0700; patch, captured stdout and stderr 0600, under
    umask 000.  A patch the user names with ``-o`` is not private: it
    follows the umask, as ``--stdout > FILE`` would (issue 10; see
    tests/cli/test_cli_output.py)."""
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


@pytest.mark.hostile
def test_no_inode_left_for_the_captured_output(env, make_repo, tmp_path: Path) -> None:
    """An ``isopatch.tmpdir`` with room for the checkout of one file but not
    for the files that capture the command's output (a tmpfs of 6 inodes:
    its root, the private folder, the worktree's folder, the worktree, its
    ``.git`` file and README): one ``fatal:`` line, ``no-space``, and
    nothing left behind.  Unconfined: a worktree of its own, whose files
    these are (a sandboxed run's base tree goes there too)."""
    repo = make_repo()
    before = repo_state(repo, env)
    with tmpfs(tmp_path / "few-inodes", "1m", "nr_inodes=6") as small:
        run = isopatch(
            "--porcelain",
            "--no-sandbox",
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


def test_a_plain_run_keeps_its_patch_in_a_marked_folder(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    (folder,) = _folders(env)
    assert sorted(p.name for p in folder.iterdir()) == [results.MARKER, "isopatch.patch"]
    marker = (folder / results.MARKER).read_bytes()
    assert marker == os.fsencode(os.path.realpath(repo / ".git")) + b"\n"


def test_output_to_a_file_leaves_nothing(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    run = isopatch("-o", tmp_path / "out.patch", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (tmp_path / "out.patch").read_bytes().startswith(b"diff --git a/README b/README\n")
    assert _folders(env) == []


def test_output_with_porcelain_keeps_the_captured_output(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "-o", tmp_path / "p", "--", *CHANGE, cwd=repo, env=env)
    assert Path(run.fields()["stdout"]).is_file() and Path(run.fields()["stderr"]).is_file()


def test_stdout_leaves_nothing(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--stdout", "--", *CHANGE, cwd=repo, env=env)
    assert run.stdout.startswith(b"diff --git a/README b/README\n")
    assert _folders(env) == []


@pytest.mark.parametrize(("command", "status"), [(CHANGE, 1), (("true",), 0), (("false",), 1)])
def test_exit_code_quiet_leaves_nothing(env, make_repo, command, status: int) -> None:
    repo = make_repo()
    # unconfined: a command failing in the default sandbox gets its hint
    run = isopatch("--exit-code", "-q", "--no-sandbox", "--", *command, cwd=repo, env=env)
    assert (run.returncode, run.err) == (status, "")
    assert _folders(env) == []


@pytest.mark.parametrize(("command", "status"), [(CHANGE, 0), (("false",), 1)])
def test_quiet_leaves_nothing(env, make_repo, command, status: int) -> None:
    """Nothing names the patch of a ``-q`` run, so nothing of it stays.
    (Unconfined: a command failing in the default sandbox gets its hint.)"""
    repo = make_repo()
    run = isopatch("-q", "--no-sandbox", "--", *command, cwd=repo, env=env)
    assert (run.returncode, run.err) == (status, "")
    assert _folders(env) == []


@pytest.mark.parametrize(("command", "status"), [(("true",), 0), (("false",), 1)])
@pytest.mark.parametrize("extra", [(), ("--apply",)])
def test_an_empty_patch_is_not_named_and_leaves_nothing(env, make_repo, command, status, extra):
    """A command that changed nothing has nothing to read, as ``git diff``
    then prints nothing: the summary names no patch and no folder stays.
    (Unconfined: a command failing in the default sandbox gets its hint.)"""
    repo = make_repo()
    run = isopatch(*extra, "--no-sandbox", "--", *command, cwd=repo, env=env)
    assert (run.returncode, run.err) == (status, f"isopatch: 0 files changed, exit {status}\n")
    assert _folders(env) == []


def test_an_empty_patch_is_named_in_the_record_that_names_the_output(env, make_repo) -> None:
    """``--porcelain``: the ``patch`` record is absent only when extraction
    failed or the patch went to stdout (design: "Porcelain v1"); the folder
    holds the captured output it names anyway."""
    repo = make_repo()
    fields = isopatch("--porcelain", "--", "true", cwd=repo, env=env).fields()
    assert fields["files"] == "0" and Path(fields["patch"]).read_bytes() == b""
    assert Path(fields["stdout"]).parent == Path(fields["patch"]).parent


def test_a_session_step_to_stdout_keeps_the_session_patch_it_names(env, make_repo) -> None:
    repo = make_repo()
    first = isopatch("--session", "s", "--", *CHANGE, cwd=repo, env=env)
    assert first.returncode == 0, first.err
    for extra in ("--stdout",), ():
        run = isopatch("--session", "s", *extra, "--", "true", cwd=repo, env=env)
        assert run.returncode == 0, run.err
        line = run.err.splitlines()[1]
        assert line.startswith("isopatch: session s: 1 file changed, patch "), run.err
        whole = Path(line.split(", patch ")[1])
        assert whole.read_bytes().startswith(b"diff --git a/README b/README\n")
        assert not (whole.parent / "isopatch.patch").exists()
    isopatch("--session", "s", "--end", cwd=repo, env=env)


def test_exit_code_without_quiet_keeps_the_patch_it_names(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--exit-code", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 1
    patch = Path(run.err.split(", patch ")[1].split()[0])
    assert patch.is_file()


def test_a_kept_worktree_keeps_its_folder_with_stdout(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--keep", "--stdout", "-q", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _folders(env) == []  # the worktree lives beside the checkout
    (folder,) = repo.parent.glob("repo.isopatch-*")
    assert (folder / "repo" / ".git").is_file()
    assert not (folder / "isopatch.patch").exists()


def test_a_run_expires_old_result_folders_once_a_day(env, make_repo) -> None:
    """The time of the worktree lock, which every run opens, keeps count:
    no other file is added to the git directory."""
    repo = make_repo()
    other = make_repo(name="other")
    tmp = Path(env["TMPDIR"])
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    old = _old_result_folder(tmp, repo / ".git", "old")
    others = _old_result_folder(tmp, other / ".git", "others")
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert old.is_dir(), "the lock was made a moment ago: not yet"

    _age(_stamp(repo), 1.5)
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert not old.exists(), "a day later, expired"
    assert others.is_dir(), "another repository's folder is its own business"
    assert time.time() - _stamp(repo).stat().st_mtime < 600

    again = _old_result_folder(tmp, repo / ".git", "again")
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert again.is_dir(), "not twice in a day"

    _age(_stamp(repo), 1.5)
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert not again.exists(), "a day later, again"


def test_automatic_expiry_skips_a_repository_where_it_cannot_keep_time(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    common = repo / ".git"
    (common / results.STAMP).mkdir()  # the stamp cannot be written
    old = _old_result_folder(Path(env["TMPDIR"]), common, "old")
    assert not results.expire_automatically(str(common), env["TMPDIR"])
    assert old.is_dir()


def test_discard_refuses_what_git_isopatch_did_not_make(tmp_path: Path) -> None:
    unmarked = tmp_path / "git-isopatch-x"
    unmarked.mkdir()
    (unmarked / "file").write_text("mine")
    assert not results.discard(str(unmarked)) and (unmarked / "file").exists()
    renamed = tmp_path / "mine"
    renamed.mkdir()
    results.mark(str(renamed), str(tmp_path))
    assert not results.discard(str(renamed)) and renamed.is_dir()
    target = tmp_path / "target"
    target.mkdir()
    results.mark(str(target), str(tmp_path))
    link = tmp_path / "git-isopatch-link"
    link.symlink_to(target)
    assert not results.discard(str(link)) and target.is_dir() and link.is_symlink()
    marker_link = tmp_path / "git-isopatch-marker-link"
    marker_link.mkdir()
    (marker_link / results.MARKER).symlink_to(target / results.MARKER)
    assert not results.discard(str(marker_link)) and marker_link.is_dir()


def test_the_api_deletes_nothing_it_reports(env, make_repo, tmp_path: Path) -> None:
    from git_isopatch import capture

    repo = make_repo()
    result = capture(list(CHANGE), repo_path=str(repo), capture_output=True)
    assert Path(result.patch_path).is_file() and Path(result.stdout).is_file()
    assert results.discard(result.tmpdir) and not Path(result.tmpdir).exists()
    to_file = capture(list(CHANGE), repo_path=str(repo), output=str(tmp_path / "p"))
    assert to_file.patch_path == str(tmp_path / "p") and not Path(to_file.tmpdir).exists()


def test_temporary_names_are_tempfile_s_and_never_reuse_what_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's folders and files are named as ``tempfile`` names them (what
    placement and expiry recognize), made 0700 and 0600 whatever the umask,
    and a name already taken (by a file, a folder, a dangling link) is
    passed over, never opened."""
    import re

    from git_isopatch.git.temporary import make_file, make_folder

    old = os.umask(0)
    try:
        folder = make_folder(str(tmp_path), "git-isopatch-")
        fd, path = make_file(str(tmp_path), ".x.", ".isopatch-tmp")
    finally:
        os.umask(old)
    os.close(fd)
    assert re.fullmatch(re.escape(f"{tmp_path}/git-isopatch-") + "[a-z0-9_]{8}", folder)
    assert re.fullmatch(re.escape(f"{tmp_path}/.x.") + r"[a-z0-9_]{8}\.isopatch-tmp", path)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    draws = iter([b"\0" * 8] * 3 + [b"\1" * 8])
    monkeypatch.setattr(os, "urandom", lambda n: next(draws))
    taken = tmp_path / "t-aaaaaaaa"
    taken.symlink_to(tmp_path / "nowhere")
    assert make_folder(str(tmp_path), "t-") == str(tmp_path / "t-bbbbbbbb")
    (tmp_path / "f-aaaaaaaa").mkdir()
    draws = iter([b"\0" * 8, b"\2" * 8])
    fd, path = make_file(str(tmp_path), "f-")
    os.close(fd)
    assert path == str(tmp_path / "f-cccccccc") and not (tmp_path / "nowhere").exists()
