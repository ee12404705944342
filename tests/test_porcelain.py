"""Porcelain v1 is pinned byte for byte (issue 3; design: Porcelain v1):
key order, git's C-style quoting of paths without `-z`, none with `-z`, the
same fields in JSON, and docs telling consumers to ignore unknown keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

from repo_helpers import git, isopatch

ROOT = Path(__file__).resolve().parent.parent

#: A folder name that git must quote: a double quote, a tab, a backslash
#: and non-ASCII (UTF-8 bytes 0xc3 0xa9), and its quoting by hand.
ODD_NAME = 'odd "tmp"\t\\é'
ODD_QUOTED = b'odd \\"tmp\\"\\t\\\\\\303\\251'


def _odd_tmpdir(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    odd = tmp_path / ODD_NAME
    odd.mkdir()
    return {**env, "TMPDIR": str(odd)}


def test_hand_quoting_matches_gits(env, tmp_path: Path) -> None:
    """The expected bytes below are written by hand; git itself agrees."""
    repo = tmp_path / "quoting"
    repo.mkdir()
    git("init", "-q", cwd=repo, env=env)
    (repo / ODD_NAME).write_text("x")
    git("add", "--", ODD_NAME, cwd=repo, env=env)
    listed = git("-c", "core.quotePath=true", "ls-files", cwd=repo, env=env)
    assert listed == b'"' + ODD_QUOTED + b'"\n'


def test_porcelain_bytes_quote_paths_as_git_does(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    head = git("rev-parse", "HEAD", cwd=repo, env=env).strip()
    odd_env = _odd_tmpdir(env, tmp_path)
    run = isopatch("--porcelain", "--", "sh", "-c", "echo new > new.txt", cwd=repo, env=odd_env)
    assert run.returncode == 0, run.err
    folder = re.escape(str(tmp_path).encode() + b"/" + ODD_QUOTED) + rb"/git-isopatch-[a-z0-9_]+"
    expected = (
        rb"base " + head + rb"\n"
        rb"exit 0\n"
        rb'patch "(' + folder + rb')/isopatch\.patch"\n'
        rb"files 1\n"
        rb'stdout "\1/stdout"\n'
        rb'stderr "\1/stderr"\n'
    )
    assert re.fullmatch(expected, run.stdout), run.stdout
    assert run.err == ""


def test_porcelain_z_bytes_are_raw(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    head = git("rev-parse", "HEAD", cwd=repo, env=env).strip()
    odd_env = _odd_tmpdir(env, tmp_path)
    run = isopatch("--porcelain", "-z", "--keep", "--", "sh", "-c", "exit 3", cwd=repo, env=odd_env)
    assert run.returncode == 3, run.err
    folder = re.escape((tmp_path / ODD_NAME).as_posix().encode()) + rb"/git-isopatch-[a-z0-9_]+"
    expected = (
        rb"base " + head + rb"\x00"
        rb"exit 3\x00"
        rb"patch (" + folder + rb")/isopatch\.patch\x00"
        rb"files 0\x00"
        rb"stdout \1/stdout\x00"
        rb"stderr \1/stderr\x00"
        rb"worktree \1/repo\x00"
    )
    assert re.fullmatch(expected, run.stdout), run.stdout
    records = dict(r.split(b" ", 1) for r in run.stdout.split(b"\0") if r)
    assert (Path(records[b"worktree"].decode()) / ".git").is_file()


def test_error_records_come_last_in_order(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--base", "nosuch", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.stdout == b"error unknown revision 'nosuch'\nerror-code unknown-revision\n"
    run = isopatch("--json", "--base", "nosuch", "--", "true", cwd=repo, env=env)
    assert (
        run.stdout
        == b'{"error": "unknown revision \'nosuch\'", "error-code": "unknown-revision"}\n'
    )


def test_json_has_the_porcelain_fields_in_the_same_order(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch(
        "--json", "--keep", "--", "sh", "-c", "echo a > a; echo b > b", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.stdout.endswith(b"}\n") and run.stdout.count(b"\n") == 1
    fields = json.loads(run.stdout)
    assert list(fields) == ["base", "exit", "patch", "files", "stdout", "stderr", "worktree"]
    assert fields["exit"] == 0 and fields["files"] == 2
    assert all(isinstance(fields[k], str) for k in ("base", "patch", "stdout", "stderr"))


def test_docs_tell_consumers_to_ignore_unknown_keys() -> None:
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "man" / "git-isopatch.1").read_text()
    assert "Ignore keys you do not know" in readme
    output = page.split(".SH OUTPUT")[1].split(".SH EXIT STATUS")[0]
    assert "must ignore keys they do not know" in output
    for key in ("base", "exit", "patch", "files", "stdout", "stderr", "worktree", "error",
                "error\\-code"):  # fmt: skip
        assert f"\\fB{key}\\fP" in output, key
