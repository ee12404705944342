"""Limits of git and of the system that a patch meets: what git leaves out
or refuses is said, never silently lost."""

from __future__ import annotations

import sys
from pathlib import Path

from repo_helpers import isopatch

from git_isopatch.git.diff import GIT_APPLY_MAX_BYTES, apply_size_warning

#: A command that makes a file 25 folders of 200 bytes deep (5,000 bytes,
#: above Linux's PATH_MAX of 4096), each folder opened from the one above,
#: and an ordinary file beside them.
DEEP = r"""
import os
fd = os.open(".", os.O_RDONLY)
for _ in range(25):
    os.mkdir("d" * 200, dir_fd=fd)
    fd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
os.close(os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
open("shallow.txt", "w").write("shallow\n")
"""


def test_a_path_longer_than_the_system_allows_is_named(env, make_repo) -> None:
    """git cannot open the folder (ENAMETOOLONG), warns and goes on
    (dir.c); the warning reaches the user, the rest of the change is in
    the patch."""
    repo = make_repo()
    run = isopatch("--porcelain", "--", sys.executable, "-c", DEEP, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    warnings = [line for line in run.err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, run.err
    # git's own warning is cut at 4096 bytes, before its reason
    assert warnings[0].startswith("warning: left out of the patch: git could not open 'ddd")
    assert warnings[0].endswith("' (a path longer than git can name)"), warnings[0]
    assert "..." in warnings[0] and len(warnings[0]) < 200
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"+shallow" in patch and b"deep.txt" not in patch
    assert run.fields()["files"] == "1"


def test_the_size_git_apply_refuses() -> None:
    """apply.c: ``sb->len >= MAX_APPLY_SIZE`` with ``MAX_APPLY_SIZE``
    ``1024UL * 1024 * 1023``.  (A real patch of that size takes a GiB of
    disk and, in ``git apply``, of memory: not in the suite.)"""
    assert GIT_APPLY_MAX_BYTES == 1024 * 1024 * 1023
    assert apply_size_warning(GIT_APPLY_MAX_BYTES - 1) is None
    said = apply_size_warning(GIT_APPLY_MAX_BYTES)
    assert said == (
        "the patch is 1072693248 bytes (1023 MiB): git apply refuses a patch of 1023 MiB or more"
    )


def test_a_folder_git_cannot_read_is_named() -> None:
    """A shorter path git cannot open says why, in git's words (a folder
    without read permission: root, which runs the suite, reads it anyway)."""
    from git_isopatch.git.intent_to_add import unreadable_folder_warning

    said = "'a/b/': Permission denied"
    assert unreadable_folder_warning(said) == (
        "left out of the patch: git could not open 'a/b/' (Permission denied)"
    )


def test_a_new_folder_is_marked_whole_but_not_what_is_linked_into_it(env, make_repo) -> None:
    """Many new files: a new folder is given to git as one pathspec; the
    patch holds the same files as path by path (ignored ones out, a linked
    path inside the new folder out)."""
    repo = make_repo({".gitignore": "*.log\n"})
    (repo / "deps" / "node_modules").mkdir(parents=True)
    (repo / "deps" / "node_modules" / "m.js").write_text("m\n")
    script = (
        "echo n > deps/new.txt; echo l > deps/x.log; mkdir -p deps/sub new/deeper; "
        "echo s > deps/sub/s.txt; echo d > new/deeper/d.txt; echo r > README"
    )
    run = isopatch(
        "--porcelain", "--link", "deps/node_modules", "--", "sh", "-c", script, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    names = {
        line.split(b" b/", 1)[1].decode()
        for line in patch.splitlines()
        if line.startswith(b"diff --git ")
    }
    assert names == {"README", "deps/new.txt", "deps/sub/s.txt", "new/deeper/d.txt"}
