"""The index read in process (``git/index_entries.index_listing``), which an
unconfined run uses where it would list the index with ``git ls-files -v``
(before the patch is taken, to clear the flags that hide a change) and a
claim where it would run ``git ls-files -v -s``: it lists what git lists,
for every index version and flag, and declines (``None``, git is asked)
what it does not read: a split index, a sparse one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git

from git_isopatch.git.index_entries import index_listing
from git_isopatch.git.types import GitDirPath


def _git_listing(repo: Path, env) -> list[tuple[bytes, bytes, bytes]]:
    out = git("ls-files", "-z", "-v", "-s", cwd=repo, env=env)
    listing = []
    for record in out.split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            fields = meta.split(b" ")
            listing.append((fields[0], fields[1], path))
    return listing


def _flagged_repo(make_repo, env) -> Path:
    repo = make_repo(
        {"plain": "1\n", "assumed": "2\n", "skipped": "3\n", "both": "4\n", "dir /name": "5\n"}
    )
    (repo / "tool").write_text("#!/bin/sh\n")
    (repo / "tool").chmod(0o755)
    os.symlink("plain", repo / "link")
    git("add", "tool", "link", cwd=repo, env=env)
    git("update-index", "--assume-unchanged", "assumed", "both", cwd=repo, env=env)
    git("update-index", "--skip-worktree", "skipped", "both", cwd=repo, env=env)
    (repo / "new").write_text("intent\n")
    git("add", "-N", "new", cwd=repo, env=env)
    return repo


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_the_listing_is_what_ls_files_lists(env, make_repo, version) -> None:
    repo = _flagged_repo(make_repo, env)
    git("update-index", "--index-version", version, cwd=repo, env=env)
    listing = index_listing(GitDirPath(str(repo / ".git")), 20)
    assert listing == _git_listing(repo, env)
    tags = {path: tag for tag, _, path in listing or ()}
    assert (tags[b"plain"], tags[b"assumed"], tags[b"skipped"], tags[b"both"]) == (
        b"H",
        b"h",
        b"S",
        b"s",
    )


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_a_path_longer_than_its_length_field_is_read_to_its_nul(env, make_repo, version) -> None:
    """A path of 4095 bytes and more has 0xFFF in its entry's flags: it
    ends at its NUL, and the entry after it is read from there."""
    repo = make_repo({"z": "after\n"})
    long = "/".join(["d" * 200] * 21) + "/f"  # in the index alone: longer than PATH_MAX
    blob = git("rev-parse", "HEAD:z", cwd=repo, env=env).decode().strip()
    info = f"100644 {blob} 0\t{long}\n".encode()
    git("update-index", "--index-info", cwd=repo, env=env, input=info)
    git("update-index", "--index-version", version, cwd=repo, env=env)
    listing = index_listing(GitDirPath(str(repo / ".git")), 20)
    assert listing == _git_listing(repo, env)
    assert [path for _, _, path in listing or ()] == [long.encode(), b"z"]


def test_unmerged_entries_are_listed_stage_by_stage(env, make_repo) -> None:
    repo = make_repo({"both": "base\n"})
    git("checkout", "-q", "-b", "other", cwd=repo, env=env)
    (repo / "both").write_text("other\n")
    git("commit", "-qam", "other", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)
    (repo / "both").write_text("main\n")
    git("commit", "-qam", "main", cwd=repo, env=env)
    git("merge", "-q", "other", cwd=repo, env=env, check=False)
    listing = index_listing(GitDirPath(str(repo / ".git")), 20)
    assert listing == _git_listing(repo, env) and len(listing or ()) == 3


def test_a_split_index_is_left_to_git(env, make_repo) -> None:
    repo = _flagged_repo(make_repo, env)
    git("update-index", "--split-index", cwd=repo, env=env)
    assert list((repo / ".git").glob("sharedindex.*"))
    assert index_listing(GitDirPath(str(repo / ".git")), 20) is None


def test_a_sparse_index_is_left_to_git(env, make_repo) -> None:
    repo = make_repo({"top": "1\n", "out/a": "2\n", "out/b": "3\n"})
    git("sparse-checkout", "init", "--cone", "--sparse-index", cwd=repo, env=env)
    git("sparse-checkout", "set", "nothing-here", cwd=repo, env=env)
    assert index_listing(GitDirPath(str(repo / ".git")), 20) is None


@pytest.mark.hostile
@pytest.mark.parametrize(
    "damage",
    [b"", b"DIRC", b"DIRC\x00\x00\x00\x02\xff\xff\xff\xff", b"not an index at all"],
)
def test_an_index_it_cannot_read_is_left_to_git(env, make_repo, damage) -> None:
    """An index a command replaced by bytes git would refuse: no listing,
    so git says what is wrong with it."""
    repo = make_repo()
    (repo / ".git" / "index").write_bytes(damage)
    assert index_listing(GitDirPath(str(repo / ".git")), 20) is None


@pytest.mark.hostile
def test_an_index_that_is_a_link_or_a_fifo_is_not_followed(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    index = repo / ".git" / "index"
    real = tmp_path / "elsewhere"
    real.write_bytes(index.read_bytes())
    index.unlink()
    index.symlink_to(real)
    assert index_listing(GitDirPath(str(repo / ".git")), 20) is None
    index.unlink()
    os.mkfifo(index)
    assert index_listing(GitDirPath(str(repo / ".git")), 20) is None
