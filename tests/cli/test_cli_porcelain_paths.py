"""The ``path`` records and the line counts of the result (design: Porcelain
v1, ``path <status> <path>``, ``insertions``, ``deletions``) are read from
the patch: for any change of a small repository they are what ``git diff
--name-status`` and ``git diff --numstat`` say of the same worktree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_helpers import git

from git_isopatch.git.diff import DIFF_OPTIONS
from git_isopatch.git.patch.headers import quote_ambiguous_headers
from git_isopatch.git.patch.paths import PathChange, line_counts, patch_paths, unquote_c_style
from git_isopatch.result import CaptureResult

#: Names git quotes, names it does not quote but that hold a space before a
#: slash (ambiguous headers), a name that is not UTF-8, plain ones.
NAMES = [
    b"plain",
    b"with space",
    b"dir /file",
    b"tab\there",
    b'quote"d',
    b"new\nline",
    b"caf\xc3\xa9",
    b"not-utf8-\xff",
    b"sub/deep/file",
    b" b/trap",
]

LONG = b"a file long enough to be found again after a rename, line %d\n"


def _write(top: Path, name: bytes, data: bytes) -> None:
    path = os.path.join(os.fsencode(top), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


def _git_name_status(repo: Path, env) -> list[PathChange]:
    out = git(
        "diff", "--name-status", "-z", "--find-renames", "-l1000", "HEAD", cwd=repo, env=env
    )  # fmt: skip
    fields = out.split(b"\0")
    changes, at = [], 0
    while at < len(fields) - 1:
        status = fields[at].decode()
        if status[0] in "RC":
            old, new = fields[at + 1], fields[at + 2]
            changes.append(PathChange(status, os.fsdecode(new), os.fsdecode(old)))
            at += 3
        else:
            changes.append(PathChange(status, os.fsdecode(fields[at + 1])))
            at += 2
    return changes


def _git_counts(repo: Path, env) -> tuple[int, int]:
    out = git("diff", "--numstat", "-z", "--find-renames", "-l1000", "HEAD", cwd=repo, env=env)
    insertions = deletions = 0
    for record in out.split(b"\0"):
        parts = record.split(b"\t")
        if len(parts) >= 2 and parts[0].isdigit():
            insertions, deletions = insertions + int(parts[0]), deletions + int(parts[1])
    return insertions, deletions


def _patch(repo: Path, env, tmp_path: Path) -> str:
    patch = tmp_path / "out.patch"
    git("add", "-N", ".", cwd=repo, env=env)
    patch.write_bytes(git("diff", *DIFF_OPTIONS, "HEAD", cwd=repo, env=env))
    quote_ambiguous_headers(str(patch))  # as extraction does
    return str(patch)


CHANGES = st.lists(
    st.tuples(
        st.sampled_from(["edit", "delete", "add", "chmod", "rename", "symlink", "binary"]),
        st.sampled_from(NAMES),
        st.sampled_from(NAMES),
    ),
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=CHANGES)
def test_paths_and_counts_are_what_git_diff_says(env, tmp_path_factory, changes) -> None:
    repo = tmp_path_factory.mktemp("repo")
    git("init", "-q", cwd=repo, env=env)
    for index, name in enumerate(NAMES[:6]):
        _write(repo, name, b"".join(LONG % i for i in range(index + 5)))
    git("add", ".", cwd=repo, env=env)
    git("commit", "-qm", "start", cwd=repo, env=env)
    top = os.fsencode(repo)
    for kind, name, other in changes:
        path = os.path.join(top, name)
        exists = os.path.lexists(path) and not os.path.isdir(path)
        if kind == "edit" and exists and not os.path.islink(path):
            with open(path, "ab") as handle:
                handle.write(b"one more line\n")
        elif kind == "delete" and exists:
            os.unlink(path)
        elif kind == "add" and not os.path.lexists(path):
            try:
                _write(repo, name, b"new\n")
            except (NotADirectoryError, FileExistsError):
                pass
        elif kind == "chmod" and exists and not os.path.islink(path):
            os.chmod(path, 0o755)
        elif kind == "rename" and exists and not os.path.lexists(os.path.join(top, other)):
            try:
                os.renames(path, os.path.join(top, other))
            except OSError:
                pass
        elif kind == "symlink" and exists:
            os.unlink(path)
            os.symlink(b"plain", path)
        elif kind == "binary" and exists and not os.path.islink(path):
            with open(path, "wb") as handle:
                handle.write(bytes(range(256)))
    patch = _patch(repo, env, tmp_path_factory.mktemp("patch"))
    assert list(patch_paths(patch)) == _git_name_status(repo, env)
    assert line_counts(patch, env=env).value == _git_counts(repo, env)


def test_a_patch_read_from_a_subfolder_of_a_repository_counts_every_path(
    env, make_repo, tmp_path
) -> None:
    """``-o`` into the checkout: ``git apply`` run there would leave out the
    paths outside that folder."""
    repo = make_repo({"a": "1\n", "sub/b": "2\n"})
    (repo / "a").write_text("1\n2\n")
    (repo / "sub" / "b").write_text("2\n3\n")
    patch = repo / "sub" / "x.patch"
    patch.write_bytes(git("diff", *DIFF_OPTIONS, "HEAD", cwd=repo, env=env))
    assert line_counts(str(patch), env=env).value == (2, 0)
    assert [c.path for c in patch_paths(str(patch))] == ["a", "sub/b"]


def test_an_empty_patch_has_no_paths(env, tmp_path) -> None:
    empty = tmp_path / "empty.patch"
    empty.write_bytes(b"")
    assert patch_paths(str(empty)) == ()
    assert line_counts(str(empty), env=env).value == (0, 0)


@pytest.mark.parametrize(
    ("quoted", "name"),
    [
        (b'"a\\tb"', b"a\tb"),
        (b'"caf\\303\\251"', b"caf\xc3\xa9"),
        (b'"q\\"\\\\"', b'q"\\'),
        (b'"\\a\\b\\f\\n\\r\\v"', b"\a\b\f\n\r\v"),
    ],
)
def test_unquoting_reverses_gits_quoting(quoted: bytes, name: bytes) -> None:
    from git_isopatch.render import quote_c_style

    assert unquote_c_style(quoted) == (name, len(quoted))
    assert quote_c_style(name) == quoted


@pytest.mark.parametrize("bad", [b"plain", b'"no end', b'"bad \\q escape"'])
def test_unquoting_refuses_what_git_would_not_write(bad: bytes) -> None:
    with pytest.raises(ValueError):
        unquote_c_style(bad)


def test_the_result_has_no_paths_when_extraction_failed() -> None:
    failed = CaptureResult(
        base="0" * 40,  # type: ignore[arg-type]
        exit_code=0,
        patch_path=None,
        files=None,
        stdout=None,
        stderr=None,
        worktree_path="/w",
        tmpdir="/t",
        error="could not extract",
        error_code="extract-failed",
    )
    assert failed.paths is None and failed.insertions is None and failed.deletions is None
