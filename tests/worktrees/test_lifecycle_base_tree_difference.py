"""An idle base tree moved to another commit by the difference (issue 32:
a run one commit after a kept base tree costs that commit's difference).
After the move it is what a fresh checkout of the new commit is: the same
files, modes, symbolic links, folders (emptied ones gone, a file turned
into a folder and back), gitlinks and index entries, stat data git takes
as fresh (``git diff-files`` finds nothing without reading a file), a
cache tree that gives the commit's tree, and the index table and gitlinks
its look keeps; a capture over it gives the patch a capture over a fresh
one gives.  A ``.gitattributes`` that changes moves it whole: files that
neither commit changes may then convert otherwise."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, tree_manifest, write_tree

from git_isopatch.git.partial_index import index_table
from git_isopatch.git.repo import open_user_repository
from git_isopatch.git.result import Ok
from git_isopatch.git.run import own_git_environment
from git_isopatch.git.types import CommitId
from git_isopatch.worktrees.base_look import INDEX_TABLE, look_of
from git_isopatch.worktrees.base_trees import BaseTrees
from git_isopatch.worktrees.lock import AdminLock

#: The first commit: every kind of path a move changes.
FIRST = {
    "README": "hello\n",
    "same.txt": "same\n",
    "gone.txt": "gone\n",
    "tool.sh": "#!/bin/sh\necho tool\n",
    "link": "symlink:same.txt",
    "link-to-file": "symlink:README",
    "file-to-link": "plain\n",
    "deep/a/b/c.txt": "deep\n",
    "turn": "a file first\n",
    "folder/x.txt": "x\n",
    "folder/y.txt": "y\n",
    "keep/one.txt": "one\n",
    "keep/two.txt": "two\n",
    "data.dat": "a\nb\n",
}


def _second(repo: Path) -> None:
    """The next commit's changes to :data:`FIRST` (``git add -A`` next)."""
    (repo / "README").write_text("changed\n")
    (repo / "gone.txt").unlink()
    (repo / "tool.sh").chmod(0o755)
    (repo / "link").unlink()
    os.symlink("README", repo / "link")
    (repo / "link-to-file").unlink()
    (repo / "link-to-file").write_text("now a file\n")
    (repo / "file-to-link").unlink()
    os.symlink("same.txt", repo / "file-to-link")
    shutil.rmtree(repo / "deep")
    (repo / "turn").unlink()
    write_tree(repo, {"turn/inner.txt": "a folder now\n", "new/dir/n.txt": "new\n"})
    shutil.rmtree(repo / "folder")
    (repo / "folder").write_text("a file now\n")
    (repo / "keep/two.txt").unlink()


def _commit(
    repo: Path,
    env: dict[str, str],
    message: str,
    gitlinks: dict[str, str] | None = None,
    blobs: dict[str, bytes] | None = None,
) -> CommitId:
    """Commit the work tree, with ``gitlinks`` (path: commit) and ``blobs``
    (path: content, as it is: no attribute converts it) beside it."""
    git("add", "-A", cwd=repo, env=env)
    entries = [f"160000,{commit},{path}" for path, commit in (gitlinks or {}).items()]
    for path, data in (blobs or {}).items():
        blob = git("hash-object", "-w", "--no-filters", "--stdin", cwd=repo, env=env, input=data)
        entries.append(f"100644,{blob.decode().strip()},{path}")
    for entry in entries:
        git("update-index", "--add", "--cacheinfo", entry, cwd=repo, env=env)
    git("commit", "-q", "-m", message, cwd=repo, env=env)
    return CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())


def _trees(repo: Path, env: dict[str, str]) -> BaseTrees:
    match open_user_repository(str(repo), env):
        case Ok(repository):
            pass
    return BaseTrees(repository, env=own_git_environment(env), lock=AdminLock(), limit=1)


def _folders(top: Path) -> set[str]:
    found = set()
    for folder, dirs, _ in os.walk(top):
        dirs[:] = [d for d in dirs if d != ".git"]
        found.update(os.path.relpath(os.path.join(folder, d), top) for d in dirs)
    return found


def _admin(tree: Path) -> Path:
    return Path((tree / ".git").read_text().split(": ", 1)[1].strip())


def _state(tree: Path, env: dict[str, str]) -> dict[str, object]:
    """What a checkout of a commit is, as git and the file system see it."""
    index = tree.parent / "index-copy"
    shutil.copyfile(_admin(tree) / "index", index)
    with_copy = {**env, "GIT_INDEX_FILE": str(index)}
    try:
        written = git("write-tree", cwd=tree, env=with_copy)  # the cache tree's valid nodes
    finally:
        index.unlink()
    return {
        "files": tree_manifest(tree),
        "folders": _folders(tree),
        "entries": git("ls-files", "-s", cwd=tree, env=env),
        "head": git("rev-parse", "HEAD", "HEAD^{tree}", cwd=tree, env=env),
        "tree": written.strip(),
        "stale stat data": git("diff-files", "--name-only", cwd=tree, env=env),
        "status": git("status", "--porcelain", "--ignored", "-uall", cwd=tree, env=env),
        "diff": git("diff", "HEAD", "--stat", cwd=tree, env=env),
    }


def _fresh(repo: Path, env: dict[str, str], commit: str, where: Path) -> dict[str, object]:
    git("worktree", "add", "-q", "--detach", str(where), commit, cwd=repo, env=env)
    try:
        return _state(where, env)
    finally:
        git("worktree", "remove", "--force", str(where), cwd=repo, env=env)


def _look_kept(tree: Path, commit: str) -> tuple[bytes, tuple[bytes, ...]]:
    admin = _admin(tree)
    table, links = index_table((admin / "index").read_bytes(), len(commit) // 2)
    assert (admin / INDEX_TABLE).read_bytes() == table, "the table is not the index's"
    look = look_of(admin, commit)
    assert look.known and look.gitlinks == tuple(links)
    return table, look.gitlinks


def _indexes_read(trace: Path) -> set[str]:
    """The index files the git commands of ``trace`` read (one that does
    not exist is no read)."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    named = {e["msg"] for e in events if e.get("label") == "do_read_index" and "msg" in e}
    return {index for index in named if os.path.lexists(index) or "isopatch-move-" in index}


def _started(trace: Path) -> list[str]:
    """The git subcommands ``trace`` started, in order."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    return [e["name"] for e in events if e.get("event") == "cmd_name"]


def _two_commits(make_repo, env: dict[str, str]) -> tuple[Path, CommitId, CommitId]:
    repo = make_repo(FIRST)
    base = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    first = _commit(repo, env, "first", {"sub": base, "sub-gone": base})
    _second(repo)
    return repo, first, _commit(repo, env, "second", {"sub": first, "new/sub": first})


@pytest.mark.parametrize("direction", ["forward", "back", "empty"])
def test_a_moved_base_tree_is_a_fresh_checkout_of_its_commit(
    env, make_repo, tmp_path, direction
) -> None:
    repo, first, second = _two_commits(make_repo, env)
    start, goal = (first, second) if direction == "forward" else (second, first)
    if direction == "empty":
        git("commit", "-q", "--allow-empty", "-m", "empty", cwd=repo, env=env)
        start, goal = second, CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())
    trees = _trees(repo, env)
    made = trees.pin(start)
    path = Path(made.tree.path)
    untouched = os.stat(path / "same.txt")
    trees.release(made)
    trace = tmp_path / "trace"
    moved = _trees(repo, {**env, "GIT_TRACE2_EVENT": str(trace)}).pin(goal)
    try:
        assert moved.made and Path(moved.tree.path) == path, "not moved"
        read = {Path(index).name for index in _indexes_read(trace)}
        assert all(name.startswith("index.isopatch-move-") for name in read), read
        assert read or direction == "empty"
        assert _started(trace).count("diff-tree") == 1, "the difference found twice"
        assert _state(path, env) == _fresh(repo, env, goal, tmp_path / "fresh")
        links = (b"sub", b"sub-gone") if goal == first else (b"new/sub", b"sub")
        assert _look_kept(path, goal)[1] == links
        again = os.stat(path / "same.txt")
        assert (again.st_ino, again.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns)
    finally:
        trees.release(moved)


@contextlib.contextmanager
def _moved_like_fresh(
    repo: Path, env: dict[str, str], first: CommitId, second: CommitId, tmp_path: Path
) -> Iterator[Path]:
    """The base tree of ``first``, idle, moved to ``second`` by a run
    there: as a fresh checkout of ``second`` is, held while in use."""
    trees = _trees(repo, env)
    trees.release(trees.pin(first))
    moved = trees.pin(second)
    try:
        path = Path(moved.tree.path)
        assert _state(path, env) == _fresh(repo, env, second, tmp_path / "fresh")
        yield path
    finally:
        trees.release(moved)


def test_a_changed_gitattributes_moves_the_base_tree_whole(env, make_repo, tmp_path) -> None:
    repo, first, _ = _two_commits(make_repo, env)
    (repo / ".gitattributes").write_text("*.dat eol=crlf\n")
    third = _commit(repo, env, "attributes", {"sub": first, "new/sub": first})
    with _moved_like_fresh(repo, env, first, third, tmp_path) as path:
        assert (path / "data.dat").read_bytes() == b"a\r\nb\r\n"
        _look_kept(path, third)


def _capture(repo: Path, env: dict[str, str]) -> bytes:
    script = "echo more >> README; rm same.txt; echo t > turn/t.txt; chmod -x tool.sh"
    run = isopatch("--sandbox", "--stdout", "-q", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return run.stdout


def test_a_capture_over_a_moved_base_tree_gives_a_fresh_ones_patch(env, make_repo) -> None:
    repo, first, second = _two_commits(make_repo, env)
    git("checkout", "-q", "--detach", first, cwd=repo, env=env)
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=env).returncode == 0
    kept = sorted((repo / ".git" / "isopatch").glob("git-isopatch-*"))
    git("checkout", "-q", "--detach", second, cwd=repo, env=env)
    over_moved = _capture(repo, env)
    assert sorted((repo / ".git" / "isopatch").glob("git-isopatch-*")) == kept, "not moved"
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    over_fresh = _capture(repo, env)
    assert over_moved == over_fresh and b"turn/t.txt" in over_moved
    git("apply", "--check", "-", cwd=repo, env=env, input=over_moved)


def _diff_pathspecs(trace: Path) -> list[list[str]]:
    """The paths named to each ``git diff`` of ``trace``."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    argvs = [e["argv"] for e in events if e.get("event") == "start" and "diff" in e["argv"]]
    return [argv[argv.index("--") + 1 :] for argv in argvs if "--" in argv]


def test_a_moved_base_tree_looks_again_at_the_paths_that_differ_alone(
    env, make_repo, tmp_path
) -> None:
    """A blob holding CRLF under ``text``: its checkout does not give it
    back, so the look keeps its path (design: changes nobody made).  After
    a move, an unchanged one stays in the look without being read, a new
    one is found, a removed one is gone."""
    repo = make_repo({".gitattributes": "*.txt text\n", "README": "hello\n"})
    crlf = {"same.txt": b"same\r\n", "gone.txt": b"gone\r\n"}
    first = _commit(repo, env, "first", blobs=crlf)
    (repo / "README").write_text("changed\n")
    crlf = {"same.txt": b"same\r\n", "new.txt": b"new\r\n", "lf.txt": b"lf\n"}
    second = _commit(repo, env, "second", blobs=crlf)
    trees = _trees(repo, env)
    made = trees.pin(first)
    admin = _admin(Path(made.tree.path))
    assert look_of(admin, first).baseline == (b"gone.txt", b"same.txt")
    trees.release(made)
    trace = tmp_path / "trace"
    moved = _trees(repo, {**env, "GIT_TRACE2_EVENT": str(trace)}).pin(second)
    try:
        assert moved.made and _admin(Path(moved.tree.path)) == admin, "not moved"
        assert look_of(admin, second).baseline == (b"new.txt", b"same.txt")
        looked = _diff_pathspecs(trace)
        assert looked and all(":(top)" not in named for named in looked), looked
        assert all(":(top,literal)same.txt" not in named for named in looked), looked
    finally:
        trees.release(moved)


def test_a_whole_move_past_a_file_whose_checkout_differs(env, make_repo, tmp_path) -> None:
    """A blob holding CRLF under ``text`` looks changed in its checkout;
    a move that removes it while a ``.gitattributes`` changes (a whole
    move) does not take that for a local change to keep."""
    repo = make_repo({".gitattributes": "*.txt text\n", "README": "hello\n"})
    first = _commit(repo, env, "first", blobs={"gone.txt": b"gone\r\n"})
    (repo / ".gitattributes").write_text("*.txt text\n*.md text\n")
    second = _commit(repo, env, "second")
    with _moved_like_fresh(repo, env, first, second, tmp_path):
        pass  # the move's checks are the helper's


def test_a_folder_that_becomes_a_gitlink_leaves_no_file(env, make_repo, tmp_path) -> None:
    """A folder of files replaced by a gitlink: git checkout takes the
    gitlink's folder as it finds it, with the old files in it (their
    entries go with the gitlink's); a fresh checkout has it empty."""
    repo = make_repo({"sub/x.txt": "x\n", "sub/y.txt": "y\n", "README": "hello\n"})
    first = CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())
    shutil.rmtree(repo / "sub")
    second = _commit(repo, env, "gitlink", {"sub": first})
    with _moved_like_fresh(repo, env, first, second, tmp_path) as path:
        assert os.listdir(path / "sub") == []
        _look_kept(path, second)


def test_a_gitlink_whose_submodule_is_ignored_moves(env, make_repo, tmp_path) -> None:
    """``ignore = all`` in ``.gitmodules`` hides a gitlink's change from
    git diff-tree; the move takes the gitlink of the new commit all the
    same."""
    gitmodules = '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tignore = all\n'
    repo = make_repo({".gitmodules": gitmodules, "README": "hello\n"})
    base = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    first = _commit(repo, env, "first", {"sub": base})
    (repo / "README").write_text("changed\n")
    second = _commit(repo, env, "second", {"sub": first})
    with _moved_like_fresh(repo, env, first, second, tmp_path) as path:
        _look_kept(path, second)


@pytest.mark.parametrize(
    "setting",
    ["global feature.manyFiles", "repository index.version=4", "git -c index.version=4"],
)
def test_the_users_index_version_leaves_the_base_tree_moved_by_difference(
    env, make_repo, tmp_path, setting
) -> None:
    """A large repository's user sets ``feature.manyFiles`` (index version
    4) or ``index.version``: their own index keeps it, while the base tree's
    (our cache, read entry by entry) is written as version 2, and so is
    moved by the difference.  Their configuration is left as it was."""
    if setting.startswith("global"):
        git("config", "--global", "feature.manyFiles", "true", cwd=tmp_path, env=env)
    repo, first, second = _two_commits(make_repo, env)
    if setting.startswith("repository"):
        git("config", "index.version", "4", cwd=repo, env=env)
        git("update-index", "--index-version", "4", cwd=repo, env=env)
    if setting.startswith("git -c"):
        env = {**env, "GIT_CONFIG_PARAMETERS": "'index.version'='4'"}
    config = (repo / ".git" / "config").read_bytes()
    users = (repo / ".git" / "index").read_bytes()[4:8]
    trees = _trees(repo, env)
    made = trees.pin(first)
    path = Path(made.tree.path)
    trees.release(made)
    assert (_admin(path) / "index").read_bytes()[4:8] == (2).to_bytes(4, "big")
    trace = tmp_path / "trace"
    moved = _trees(repo, {**env, "GIT_TRACE2_EVENT": str(trace)}).pin(second)
    try:
        assert moved.made and Path(moved.tree.path) == path, "not moved"
        read = {Path(index).name for index in _indexes_read(trace)}
        assert read and all(name.startswith("index.isopatch-move-") for name in read), read
        _look_kept(path, second)  # before git status writes the untracked cache
        assert _state(path, env) == _fresh(repo, env, second, tmp_path / "fresh")
    finally:
        trees.release(moved)
    assert (repo / ".git" / "config").read_bytes() == config
    assert (repo / ".git" / "index").read_bytes()[4:8] == users
