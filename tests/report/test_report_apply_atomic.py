"""Report step, ``--apply``: all or nothing for real (issue 20).  Whatever
stops the apply (a conflict, a file where a folder must go, a symbolic
link or a read-only file in the way, a full disk, a signal), every path of
the user's work tree is byte for byte as before, modes included, and the
message says what happened; an apply that goes through leaves no journal
and no temporary file behind."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

import pytest
from hostile import read_only_bind
from repo_helpers import git, isopatch, repo_state, tmpfs, write_tree

from git_isopatch.bring_home import bring_home
from git_isopatch.git.apply.switch import JOURNAL_PREFIX, NEW_PREFIX
from git_isopatch.git.repo import UserRepository
from git_isopatch.git.run import own_git_environment
from git_isopatch.worktrees.lock import APPLY_LOCK_FILE, LockTimeout, held_within

#: A file with the user's uncommitted edit on its first line, far from the
#: command's change on its last.
Z_BASE = "".join(f"line {n}\n" for n in range(1, 21))
Z_EDITED = Z_BASE.replace("line 1\n", "the user's edit\n")
#: The command's change to z.txt: its last line.
EDIT_Z = "sed -i 's/^line 20$/LINE 20/' z.txt"


def _modes(repo: Path) -> dict[str, int]:
    """Every path under ``repo`` (but ``.git``) and its full ``st_mode``."""
    found = {}
    for folder, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, repo)] = os.lstat(path).st_mode
    return found


def _state(repo: Path, env) -> tuple[dict, dict]:
    return repo_state(repo, env), _modes(repo)


def _no_leftovers(repo: Path) -> None:
    """No journal in the git directory, no new content beside a target."""
    assert not [p for p in (repo / ".git").iterdir() if p.name.startswith(JOURNAL_PREFIX)]
    assert not [p for p in repo.rglob(f"{NEW_PREFIX}*")]


def _apply_run(repo: Path, env, script: str, *options: str):
    return isopatch("--apply", *options, "--", "sh", "-c", script, cwd=repo, env=env)


def test_a_file_where_the_patch_needs_a_folder_keeps_every_other_file(env, make_repo) -> None:
    """The issue's first case: the command makes ``d/new.txt`` and edits
    ``z.txt``; the user has an untracked file ``d`` and an edit in
    ``z.txt``.  ``git apply`` deleted ``z.txt`` and said nothing was written."""
    repo = make_repo({"z.txt": Z_BASE})
    write_tree(repo, {"z.txt": Z_EDITED, "d": "the user's untracked file\n"})
    os.chmod(repo / "z.txt", 0o640)
    before = _state(repo, env)
    run = _apply_run(repo, env, f"mkdir d && echo new > d/new.txt && {EDIT_Z}")
    assert run.returncode == 128, run.err
    assert "error: 'd' is a file in the work tree where the patch needs a folder" in run.err
    assert "hint: nothing was written; the patch is kept at" in run.err
    assert _state(repo, env) == before
    _no_leftovers(repo)


def test_a_symbolic_link_where_the_patch_needs_a_folder_is_refused(
    env, make_repo, tmp_path
) -> None:
    """``d`` is tracked as a folder; the user made it a link to a folder
    elsewhere: nothing is written through the link, nor beside it."""
    repo = make_repo({"d/x": "x\n", "z.txt": Z_BASE})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x").write_text("not the repository's\n")
    git("rm", "-q", "-r", "--cached", "d", cwd=repo, env=env)
    for name in os.listdir(repo / "d"):
        os.unlink(repo / "d" / name)
    os.rmdir(repo / "d")
    os.symlink(elsewhere, repo / "d")
    git("reset", "-q", cwd=repo, env=env)
    write_tree(repo, {"z.txt": Z_EDITED})
    before = _state(repo, env)
    run = _apply_run(repo, env, f"echo changed > d/x && {EDIT_Z}")
    assert run.returncode == 128, run.err
    assert "beyond a symbolic link" in run.err
    assert _state(repo, env) == before
    assert (elsewhere / "x").read_text() == "not the repository's\n"
    assert os.listdir(elsewhere) == ["x"]
    _no_leftovers(repo)


def test_a_read_only_file_in_the_way_puts_back_what_was_already_renamed(env, make_repo) -> None:
    """``a.txt`` is renamed into place before ``z.txt``, a read-only bind
    mount, refuses: ``a.txt`` is put back as it was (same bytes, mode)."""
    repo = make_repo({"a.txt": "a\n", "z.txt": Z_BASE})
    write_tree(repo, {"z.txt": Z_EDITED})
    os.chmod(repo / "a.txt", 0o600)
    before = _state(repo, env)
    inode = os.stat(repo / "a.txt").st_ino
    with read_only_bind(repo / "z.txt"):
        run = _apply_run(repo, env, f"echo A > a.txt && {EDIT_Z}")
        assert run.returncode == 128, run.err
        assert "error: all put back: cannot write 'z.txt'" in run.err
        assert _state(repo, env) == before
        assert os.stat(repo / "a.txt").st_ino == inode  # the very file, not a copy
    _no_leftovers(repo)


def test_a_read_only_folder_refuses_before_anything_changes(env, make_repo) -> None:
    repo = make_repo({"a.txt": "a\n", "ro/z.txt": Z_BASE})
    before = _state(repo, env)
    with read_only_bind(repo / "ro"):
        run = _apply_run(repo, env, "echo A > a.txt && echo Z > ro/z.txt")
        assert run.returncode == 128, run.err
        assert "error: nothing was written: cannot write" in run.err
        assert "Read-only file system" in run.err
        assert _state(repo, env) == before
    _no_leftovers(repo)


def test_a_full_disk_keeps_the_edited_file_and_writes_no_half_file(
    env, make_repo, tmp_path
) -> None:
    """The issue's other case: the repository on a small tmpfs, nearly full;
    the patch edits ``z.txt`` (with the user's edit) and makes a large new
    file.  The worktree and the patch live elsewhere (``isopatch.tmpdir``)."""
    fs = tmpfs(tmp_path / "fs", "2m")
    with fs as mount:
        top = mount / "repo"
        top.mkdir()
        git("init", "-q", "-b", "main", cwd=top, env=env)
        write_tree(top, {"z.txt": Z_BASE})
        git("add", "-A", cwd=top, env=env)
        git("commit", "-q", "-m", "base", cwd=top, env=env)
        (tmp_path / "elsewhere").mkdir()
        git("config", "isopatch.tmpdir", str(tmp_path / "elsewhere"), cwd=top, env=env)
        write_tree(top, {"z.txt": Z_EDITED})
        free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
        (mount / "filler").write_bytes(b"\0" * (free - 256 * 1024))
        before = _state(top, env)
        # 1 MiB of one repeated line: a small blob, a large file
        run = _apply_run(top, env, f"yes 'a line' | head -c 1048576 > big && {EDIT_Z}")
        assert run.returncode == 128, run.err
        assert "No space left on device" in run.err
        assert "nothing was written" in run.err
        assert _state(top, env) == before
        _no_leftovers(top)


def test_the_wait_for_the_lock_is_bounded(tmp_path) -> None:
    """Held all along by another open file: the wait gives up, naming the lock."""
    lock = tmp_path / "the.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    waited = []
    try:
        with pytest.raises(LockTimeout) as raised:
            with held_within(str(lock), 0.2, on_wait=lambda: waited.append(True)):
                pytest.fail("the lock was taken while another held it")
    finally:
        os.close(fd)
    assert raised.value.path == str(lock)
    assert waited == [True]
    with held_within(str(lock), 0.2) as held:  # free now: taken at once
        assert held


def test_an_apply_that_cannot_get_the_lock_writes_nothing_and_names_it(
    env, make_repo, tmp_path
) -> None:
    repo = make_repo({"a.txt": "a\n"})
    clone = tmp_path / "clone"
    git("clone", "-q", repo, clone, cwd=tmp_path, env=env)
    (clone / "a.txt").write_text("A\n")
    patch = tmp_path / "p.patch"
    patch.write_bytes(git("diff", "--binary", cwd=clone, env=env))
    before = _state(repo, env)
    lock = repo / ".git" / APPLY_LOCK_FILE
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        outcome = bring_home(
            UserRepository(str(repo), str(repo / ".git"), str(repo / ".git"), ""),
            str(patch),
            env=own_git_environment(env),
            lock_seconds=0.2,
        )
    finally:
        os.close(fd)
    assert not outcome.applied
    assert outcome.error is not None and f"'{lock}'" in outcome.error
    assert "nothing was written" in outcome.error
    assert _state(repo, env) == before


def test_a_successful_apply_keeps_modes_and_leaves_nothing_behind(env, make_repo) -> None:
    """Rewritten files keep their permission bits (a mode change of the
    patch sets the executable bits); new files follow the umask; folders
    the patch empties go, as ``git apply`` removes them."""
    repo = make_repo({"a.txt": "a\n", "run": "#!/bin/sh\n", "gone/only": "o\n", "z.txt": Z_BASE})
    write_tree(repo, {"z.txt": Z_EDITED})
    os.chmod(repo / "a.txt", 0o640)
    os.chmod(repo / "run", 0o640)
    script = "echo A > a.txt && chmod +x run && rm -r gone && mkdir -p n/m && echo n > n/m/f"
    script += f" && {EDIT_Z}"
    run = _apply_run(repo, env, script)
    assert run.returncode == 0, run.err
    assert stat.S_IMODE(os.stat(repo / "a.txt").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(repo / "run").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(repo / "n" / "m" / "f").st_mode) == 0o666 & ~_umask()
    assert not (repo / "gone").exists()
    assert (repo / "z.txt").read_text() == Z_EDITED.replace("line 20", "LINE 20")
    _no_leftovers(repo)


def test_a_file_that_becomes_a_folder_and_back(env, make_repo) -> None:
    """A path that changes between file and folder: the patch removes one
    and makes the other, all in one apply."""
    repo = make_repo({"f": "a file\n", "d/x": "in a folder\n"})
    run = _apply_run(repo, env, "rm f && mkdir f && echo in > f/in && rm -r d && echo file > d")
    assert run.returncode == 0, run.err
    assert (repo / "f" / "in").read_text() == "in\n"
    assert (repo / "d").read_text() == "file\n"
    _no_leftovers(repo)


def test_a_folder_with_untracked_files_where_the_patch_needs_a_file(env, make_repo) -> None:
    repo = make_repo({"d/x": "in a folder\n", "z.txt": Z_BASE})
    write_tree(repo, {"d/mine": "the user's untracked file\n", "z.txt": Z_EDITED})
    before = _state(repo, env)
    run = _apply_run(repo, env, f"rm -r d && echo file > d && {EDIT_Z}")
    assert run.returncode == 128, run.err
    assert "'d' is a folder in the work tree where the patch needs a file" in run.err
    assert _state(repo, env) == before


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_any_byte_in_a_name_applies_renames_included(env, make_repo) -> None:
    """Names git quotes in a patch (a newline, a tab, a quote, a byte that
    is not UTF-8), edited, made and renamed."""
    odd = os.fsdecode(b'odd \n\t"\xff name')
    repo = make_repo({odd: "one\n", "moved from": Z_BASE, "plain": "p\n"})
    script = (
        "printf 'two\\n' > \"$(printf 'odd \\n\\t\"\\377 name')\" && "
        "mv 'moved from' \"$(printf 'moved\\377\\nto')\" && echo n > \"$(printf 'new\\tone')\""
    )
    run = _apply_run(repo, env, script)
    assert run.returncode == 0, run.err
    assert (repo / odd).read_text() == "two\n"
    assert (repo / os.fsdecode(b"moved\xff\nto")).read_text() == Z_BASE
    assert not (repo / "moved from").exists()
    assert (repo / "new\tone").read_text() == "n\n"
    _no_leftovers(repo)
