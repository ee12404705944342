"""The ``path`` records and the line counts of the result (design: Porcelain
v1, ``path <status> <path>``, ``insertions``, ``deletions``) are read from
the patch, in one read: for any change of a small repository they are what
``git diff --name-status`` and ``git diff --numstat`` say of the same
worktree, and what ``git apply --numstat`` says of the patch, whatever the
size of the chunks it is read by."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_helpers import git

from git_isopatch.git.diff import DIFF_OPTIONS
from git_isopatch.git.patch.headers import quote_headers
from git_isopatch.git.patch.paths import PathChange, read_patch, unquote_c_style
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

#: Lines that, once a ``+`` or ``-`` is put before them in a hunk, look like
#: the lines of a header.
TRICKY = b"-- a/x\n++ b/x\n@@ -1 +1 @@\ndiff --git a/x b/x\n\\ No newline\n"


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


def _git_apply_counts(patch: str, env) -> tuple[int, int]:
    """``git apply --numstat`` of the patch file, summed (binary: none)."""
    if not os.path.getsize(patch):
        return 0, 0
    out = git("apply", "--numstat", "-z", patch, cwd=Path("/"), env=env)
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
    quote_headers(str(patch), read_patch(str(patch))[1])  # as extraction does
    return str(patch)


CHANGES = st.lists(
    st.tuples(
        st.sampled_from(
            ["edit", "delete", "add", "chmod", "rename", "symlink", "binary", "tricky"]
        ),
        st.sampled_from(NAMES),
        st.sampled_from(NAMES),
    ),
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=CHANGES, chunk_size=st.sampled_from([1, 5, 13, 64, 1 << 20]))
def test_paths_and_counts_are_what_git_diff_says(
    env, tmp_path_factory, changes, chunk_size
) -> None:
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
        elif kind == "tricky" and exists and not os.path.islink(path):
            with open(path, "rb") as handle:
                kept = handle.read().splitlines(keepends=True)[1:]  # one line removed
            with open(path, "wb") as handle:
                handle.write(TRICKY + b"".join(kept) + TRICKY.rstrip(b"\n"))
    patch = _patch(repo, env, tmp_path_factory.mktemp("patch"))
    contents, replacements = read_patch(patch, chunk_size)
    assert replacements == []  # quoted already
    changes = _git_name_status(repo, env)
    assert list(contents.paths or ()) == changes
    counts = (contents.insertions, contents.deletions)
    assert counts == _git_counts(repo, env) == _git_apply_counts(patch, env)
    assert contents.files == len(changes)


def test_a_patch_read_from_a_subfolder_of_a_repository_counts_every_path(
    env, make_repo, tmp_path
) -> None:
    """``-o`` into the checkout: every path is counted, wherever the patch
    file is (``git apply`` run in that folder would leave out the paths
    outside it)."""
    repo = make_repo({"a": "1\n", "sub/b": "2\n"})
    (repo / "a").write_text("1\n2\n")
    (repo / "sub" / "b").write_text("2\n3\n")
    patch = repo / "sub" / "x.patch"
    patch.write_bytes(git("diff", *DIFF_OPTIONS, "HEAD", cwd=repo, env=env))
    contents = read_patch(str(patch))[0]
    assert (contents.insertions, contents.deletions) == (2, 0)
    assert [c.path for c in contents.paths or ()] == ["a", "sub/b"]


def test_an_empty_patch_has_no_paths(env, tmp_path) -> None:
    empty = tmp_path / "empty.patch"
    empty.write_bytes(b"")
    contents = read_patch(str(empty))[0]
    assert (contents.files, contents.paths, contents.insertions, contents.deletions) == (
        0,
        (),
        0,
        0,
    )


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


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1 << 20])
def test_entries_without_content_are_read_in_turn(env, make_repo, tmp_path, chunk_size) -> None:
    """A mode change, an empty new file and a rename without a change have
    a header and no hunk: the next entry's header follows at once."""
    repo = make_repo({"a": "1\n", "b": LONG.decode() * 3, "c": "3\n", "d": "4\n"})
    (repo / "a").chmod(0o755)
    (repo / "empty").write_bytes(b"")
    (repo / "b").rename(repo / "moved")
    (repo / "c").write_text("3\nmore\n")
    (repo / "d").chmod(0o755)
    patch = _patch(repo, env, tmp_path)
    contents = read_patch(patch, chunk_size)[0]
    assert list(contents.paths or ()) == _git_name_status(repo, env)
    assert [change.path for change in contents.paths or ()] == ["a", "c", "d", "empty", "moved"]
    assert (contents.files, contents.insertions, contents.deletions) == (5, 1, 0)
