"""Bringing the patch home: :func:`git_isopatch.git.apply.apply_to_work_tree`
writes the user's work tree all or nothing, never the index, and whatever
the user's ``apply.*``, ``core.autocrlf`` or current folder; and
``--apply`` on the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, repo_state, tree_manifest, write_tree

from git_isopatch.git.apply import apply_to_work_tree
from git_isopatch.git.result import Err, Ok
from git_isopatch.git.run import own_git_environment


def _patch(
    repo: Path,
    env: dict[str, str],
    change: dict[str, str | bytes],
    tmp: Path,
    executable: tuple[str, ...] = (),
) -> Path:
    """A patch (as git-isopatch writes it) of ``change`` (``"DELETE"``
    deletes) and mode changes (``executable``) on top of ``repo``'s HEAD,
    made in a clone ``tmp/clone``; ``repo`` is left as it is."""
    tmp.mkdir(exist_ok=True)
    clone = tmp / "clone"
    git("clone", "-q", repo, clone, cwd=tmp, env=env)
    write_tree(clone, {k: v for k, v in change.items() if v != "DELETE"})
    for name, value in change.items():
        if value == "DELETE":
            (clone / name).unlink()
    for name in executable:
        (clone / name).chmod(0o755)
    git("add", "-A", cwd=clone, env=env)
    patch = tmp / "change.patch"
    patch.write_bytes(git("diff", "--cached", "--binary", "--full-index", "-M", cwd=clone, env=env))
    return patch


def _apply(repo: Path, patch: Path, env: dict[str, str]):
    git_dir = git("rev-parse", "--absolute-git-dir", cwd=repo, env=env).decode().strip()
    return apply_to_work_tree(git_dir, str(repo), str(patch), env=own_git_environment(env))


def test_binary_modes_symlinks_renames_and_deletions_apply(env, make_repo, tmp_path) -> None:
    repo = make_repo(
        {
            "text": "one\ntwo\n",
            "image.bin": bytes(range(256)) * 4,
            "script": "#!/bin/sh\n",
            "old-name": "a file that moves\n" * 20,
            "gone": "bye\n",
        }
    )
    patch = _patch(
        repo,
        env,
        {
            "text": "one\n2\n",
            "image.bin": bytes(reversed(range(256))) * 4 + b"\0",
            "new.bin": b"\0\1\2\xff",
            "link": "symlink:text",
            "new-name": "a file that moves\n" * 20,
            "old-name": "DELETE",
            "gone": "DELETE",
        },
        tmp_path,
        executable=("script",),
    )
    assert b"rename from old-name" in patch.read_bytes()
    assert b"GIT binary patch" in patch.read_bytes()
    assert b"new mode 100755" in patch.read_bytes()
    index = (repo / ".git" / "index").read_bytes()
    assert isinstance(_apply(repo, patch, env), Ok)
    assert tree_manifest(repo) == tree_manifest(tmp_path / "clone")
    assert (repo / ".git" / "index").read_bytes() == index


def test_a_patch_that_does_not_apply_writes_nothing(env, make_repo, tmp_path) -> None:
    """Two files: the first applies, the second conflicts; neither is written."""
    repo = make_repo({"a": "a\n", "b": "b\n"})
    patch = _patch(repo, env, {"a": "A\n", "b": "B\n"}, tmp_path)
    (repo / "b").write_text("the user's edit\n")
    before = repo_state(repo, env)
    match _apply(repo, patch, env):
        case Err(error):
            assert "patch does not apply" in error.stderr.decode()
        case Ok():
            pytest.fail("a conflicting patch applied")
    assert repo_state(repo, env) == before
    assert not list(repo.rglob("*.rej")) and not list(repo.rglob("*.orig"))


def test_the_users_apply_configuration_does_not_change_what_is_written(
    env, make_repo, tmp_path
) -> None:
    """``apply.whitespace=error`` would refuse a trailing space the command
    wrote, ``fix`` would strip it; ``apply.ignoreWhitespace`` would let a
    patch apply on context that differs."""
    repo = make_repo({"a": "x\n", "b": "a b\ntwo\nthree\nfour\n"})
    patch = _patch(repo, env, {"a": "x  \n\ty \n"}, tmp_path)
    expected = b"x  \n\ty \n"
    for value in ("error", "fix", "error-all"):
        git("config", "apply.whitespace", value, cwd=repo, env=env)
        assert isinstance(_apply(repo, patch, env), Ok), value
        assert (repo / "a").read_bytes() == expected
        git("checkout", "--", "a", cwd=repo, env=env)
    patch = _patch(repo, env, {"b": "a b\ntwo\n3\nfour\n"}, tmp_path / "second")
    (repo / "b").write_text("a  b\ntwo\nthree\nfour\n")  # the user's edit of the context
    git("config", "apply.ignoreWhitespace", "change", cwd=repo, env=env)
    assert isinstance(_apply(repo, patch, env), Err)
    assert (repo / "b").read_text() == "a  b\ntwo\nthree\nfour\n"


def test_core_autocrlf_work_tree_keeps_its_line_endings(env, make_repo, tmp_path) -> None:
    repo = make_repo({"a": "one\ntwo\n"})
    git("config", "core.autocrlf", "true", cwd=repo, env=env)
    (repo / "a").unlink()
    git("checkout", "--", "a", cwd=repo, env=env)
    assert (repo / "a").read_bytes() == b"one\r\ntwo\r\n"
    patch = _patch(repo, env, {"a": "one\n2\n"}, tmp_path)
    assert isinstance(_apply(repo, patch, env), Ok)
    assert (repo / "a").read_bytes() == b"one\r\n2\r\n"


def test_applies_from_the_top_whatever_the_current_folder(env, make_repo, tmp_path) -> None:
    """``git apply`` in a subfolder skips the paths outside it; ours runs at
    the top."""
    repo = make_repo({"top": "t\n", "sub/inner": "i\n"})
    patch = _patch(repo, env, {"top": "T\n", "sub/inner": "I\n"}, tmp_path)
    cwd = os.getcwd()
    os.chdir(repo / "sub")
    try:
        assert isinstance(_apply(repo, patch, env), Ok)
    finally:
        os.chdir(cwd)
    assert (repo / "top").read_text() == "T\n"
    assert (repo / "sub" / "inner").read_text() == "I\n"
