"""A base tree moved by the difference in odd repositories and under odd
settings of the user's: a case-only rename and two paths that differ in
case alone under ``core.ignoreCase``, a symbolic link that becomes a
folder (one to a tracked folder: nothing is written through it) and
back, ``core.symlinks=false``, a smudge filter, ``ident`` and
``export-subst``, ``core.autocrlf``, modes flipped under
``core.fileMode=false``, a file or a symbolic link that becomes a
gitlink and back, names a pathspec would read as magic or a pattern.
Each way it is what a fresh checkout is (as in
``test_lifecycle_base_tree_difference``), and moved by the difference.
One a crash left half-written is never moved."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_helpers import git, write_tree
from test_lifecycle_base_tree_difference import _commit, _fresh, _look_kept, _state, _trees

from git_isopatch.git.types import CommitId

#: A case: the user's global settings, the first commit's files, and what
#: the second changes (``git add -A`` next; a gitlink named by ``GITLINK``).
Case = tuple[dict[str, str], dict[str, str], Callable[[Path, dict[str, str]], None]]
GITLINK = "sub"


def _rename_case(repo: Path, env: dict[str, str]) -> None:
    git("mv", "A.txt", "a.txt", cwd=repo, env=env)
    git("mv", "Dir", "dir", cwd=repo, env=env)
    write_tree(repo, {"X": "upper\n", "x": "lower\n"})
    git("-c", "core.ignoreCase=false", "add", "X", "x", cwd=repo, env=env)


def _links_and_folders(repo: Path, env: dict[str, str]) -> None:
    (repo / "z").unlink()
    write_tree(repo, {"z/f": "in z\n"})
    shutil.rmtree(repo / "w")
    os.symlink("d", repo / "w")


def _links(repo: Path, env: dict[str, str]) -> None:
    (repo / "l").unlink()
    os.symlink("other", repo / "l")
    (repo / "m").unlink()
    (repo / "m").write_text("a file now\n")


def _converted(repo: Path, env: dict[str, str]) -> None:
    for name in ("a.u", "x.s", "y.i", "a.txt"):
        (repo / name).write_text((repo / name).read_text() + "more\n")


def _modes(repo: Path, env: dict[str, str]) -> None:
    git("update-index", "--chmod=+x", "tool.sh", cwd=repo, env=env)
    git("update-index", "--chmod=-x", "run.sh", cwd=repo, env=env)


def _gitlinks(repo: Path, env: dict[str, str]) -> None:
    (repo / GITLINK).unlink()


#: Names git would read as pathspec magic or patterns, as options, quoted.
MAGIC = ("*", "[ab]", ":(top)x", ":!x", "a?", "a\\b", '"q"', " lead", "trail ", "-n")


def _magic(repo: Path, env: dict[str, str]) -> None:
    for name in MAGIC:
        (repo / name).write_text(name + " changed\n")


CASES: dict[str, Case] = {
    "ignoreCase": (
        {"core.ignoreCase": "true"},
        {"A.txt": "a\n", "Dir/x.txt": "x\n", "keep": "k\n"},
        _rename_case,
    ),
    "links and folders": (
        {},
        {"d/inner": "i\n", "z": "symlink:d", "w/g": "g\n", "keep": "k\n"},
        _links_and_folders,
    ),
    "symlinks=false": (
        {"core.symlinks": "false"},
        {"l": "symlink:keep", "m": "symlink:keep", "keep": "k\n"},
        _links,
    ),
    "conversions": (
        {
            "filter.up.smudge": "tr a-z A-Z",
            "filter.up.clean": "tr A-Z a-z",
            "core.autocrlf": "true",
        },
        {
            ".gitattributes": "*.u filter=up\n*.s export-subst\n*.i ident\n",
            **{"a.u": "abc\n", "b.u": "same\n", "x.s": "$Format:%H$\n", "y.i": "$Id$\n"},
            **{"a.txt": "a\nb\n", "b.txt": "same\n"},
        },
        _converted,
    ),
    "fileMode=false": (
        {"core.fileMode": "false"},
        {"tool.sh": "#!/bin/sh\n", "run.sh": "#!/bin/sh\necho\n", "keep": "k\n"},
        _modes,
    ),
    "file to gitlink": ({}, {GITLINK: "a file\n", "keep": "k\n"}, _gitlinks),
    "link to gitlink": ({}, {GITLINK: "symlink:keep", "keep": "k\n"}, _gitlinks),
    "magic names": ({}, {**{n: n + "\n" for n in MAGIC}, "ab": "ab\n", "keep": "k\n"}, _magic),
}


def _head(repo: Path, env: dict[str, str]) -> CommitId:
    return CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())


def _by_difference(trace: Path) -> bool:
    """Whether the git commands of ``trace`` moved a base tree by the
    difference (``git checkout --no-overlay``), not whole."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    argvs = [e["argv"] for e in events if e.get("event") == "start"]
    checkouts = [argv for argv in argvs if "checkout" in argv]
    return bool(checkouts) and all("--no-overlay" in argv for argv in checkouts)


@pytest.mark.parametrize("name", list(CASES))
def test_an_odd_repository_moved_by_the_difference_is_a_fresh_checkout(
    env, make_repo, tmp_path, name
) -> None:
    settings, files, change = CASES[name]
    for key, value in settings.items():
        git("config", "--global", key, value, cwd=tmp_path, env=env)
    repo = make_repo(files)
    if name == "fileMode=false":
        git("update-index", "--chmod=+x", "run.sh", cwd=repo, env=env)
        git("commit", "-q", "-m", "executable", cwd=repo, env=env)
    first = _head(repo, env)
    change(repo, env)
    second = _commit(repo, env, "second", {GITLINK: first} if files.get(GITLINK) else None)
    for start, goal in ((first, second), (second, first)):
        trees = _trees(repo, env)
        made = trees.pin(start)
        trees.release(made)
        trace = tmp_path / f"trace-{goal}"
        moved = _trees(repo, {**env, "GIT_TRACE2_EVENT": str(trace)}).pin(goal)
        try:
            path = Path(moved.tree.path)
            assert moved.made and path == Path(made.tree.path), "not moved"
            assert _by_difference(trace), "moved whole"
            _look_kept(path, goal)  # before git status writes the index
            assert _state(path, env) == _fresh(repo, env, goal, tmp_path / f"fresh-{goal}")
        finally:
            trees.release(moved)


def test_a_base_tree_a_crash_left_half_written_is_never_moved(env, make_repo, tmp_path) -> None:
    """A run killed while it checked out or moved a base tree leaves it
    not ready, its files half-written while its index's stat data still
    says what it held: a move by the difference would trust that stat
    data for every file it does not write.  The next run at another commit
    makes a base tree rather than move that one, which goes."""
    repo = make_repo({"README": "hello\n", "keep.txt": "kept\n", "other.txt": "o\n"})
    first = _head(repo, env)
    (repo / "other.txt").write_text("changed\n")
    second = _commit(repo, env, "second")
    trees = _trees(repo, env)
    made = trees.pin(first)
    path, admin = Path(made.tree.path), Path(made.tree.admin_dir)
    trees.release(made)
    record = json.loads((admin / "isopatch-base.json").read_text())
    (admin / "isopatch-base.json").write_text(json.dumps({**record, "ready": False}))
    stat = os.stat(path / "keep.txt")
    (path / "keep.txt").write_text("half\n")  # the size and times the index holds
    os.utime(path / "keep.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = trees.pin(second)
    try:
        assert Path(again.tree.path) != path, "the half-written base tree was moved"
        assert _state(Path(again.tree.path), env) == _fresh(repo, env, second, tmp_path / "f")
    finally:
        trees.release(again)
    assert not path.exists()
