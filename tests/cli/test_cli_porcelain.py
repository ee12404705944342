"""Porcelain v1 is pinned byte for byte (issue 3; design: Porcelain v1):
key order, git's C-style quoting of paths without `-z`, none with `-z`, the
same fields in JSON, and docs telling consumers to ignore unknown keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

from repo_helpers import git, isopatch

ROOT = Path(__file__).resolve().parents[2]

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
        rb"version 1\n"
        rb"command sh\ncommand -c\ncommand echo new > new\.txt\n"
        rb"base " + head + rb"\n"
        rb"exit 0\n"
        rb"sandbox true\n"
        rb'patch "(' + folder + rb')/isopatch\.patch"\n'
        rb"files 1\n"
        rb"path A new\.txt\n"
        rb"insertions 1\ndeletions 0\n"
        rb'stdout "\1/stdout"\n'
        rb'stderr "\1/stderr"\n'
        rb"duration [0-9]+(\.[0-9]+)?\n"
    )
    assert re.fullmatch(expected, run.stdout), run.stdout
    assert run.err == ""


def test_porcelain_z_bytes_are_raw(env, make_repo, tmp_path: Path) -> None:
    odd_env = _odd_tmpdir(env, tmp_path)
    repo = make_repo(name=f"{ODD_NAME}/repo")  # the worktree goes beside it
    head = git("rev-parse", "HEAD", cwd=repo, env=env).strip()
    # unconfined: the default sandbox adds its hint record to a failing command's
    run = isopatch(
        "--porcelain", "-z", "--keep", "--no-sandbox", "--", "sh", "-c", "exit 3",
        cwd=repo, env=odd_env,
    )  # fmt: skip
    assert run.returncode == 3, run.err
    folder = re.escape((tmp_path / ODD_NAME).as_posix().encode()) + rb"/git-isopatch-[a-z0-9_]+"
    expected = (
        rb"version 1\x00"
        rb"command sh\x00command -c\x00command exit 3\x00"
        rb"base " + head + rb"\x00"
        rb"exit 3\x00"
        rb"sandbox false\x00"
        rb"patch (" + folder + rb")/isopatch\.patch\x00"
        rb"files 0\x00"
        rb"insertions 0\x00deletions 0\x00"
        rb"stdout \1/stdout\x00"
        rb"stderr \1/stderr\x00"
        rb"worktree "
        + re.escape((tmp_path / ODD_NAME).as_posix().encode())
        + rb"/repo\.isopatch-[a-z0-9_]{8}/repo\x00"
        rb"duration [0-9]+(\.[0-9]+)?\x00"
    )
    assert re.fullmatch(expected, run.stdout), run.stdout
    records = dict(r.split(b" ", 1) for r in run.stdout.split(b"\0") if r)
    assert (Path(records[b"worktree"].decode()) / ".git").is_file()


def test_error_records_come_last_in_order(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--base", "nosuch", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.stdout == (
        b"version 1\nerror unknown revision 'nosuch'\nerror-code unknown-revision\n"
    )
    run = isopatch("--json", "--base", "nosuch", "--", "true", cwd=repo, env=env)
    assert (
        run.stdout == b'{"version": 1, "error": "unknown revision \'nosuch\'", '
        b'"error-code": "unknown-revision"}\n'
    )


def test_json_has_the_porcelain_fields_in_the_same_order(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch(
        "--json", "--keep", "--", "sh", "-c", "echo a > a; echo b > b", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.stdout.endswith(b"}\n") and run.stdout.count(b"\n") == 1
    fields = json.loads(run.stdout)
    assert list(fields) == [
        "version", "command", "base", "exit", "sandbox", "patch", "files", "path",
        "insertions", "deletions", "stdout", "stderr", "stdout-text", "stderr-text",
        "worktree", "duration",
    ]  # fmt: skip
    assert fields["exit"] == 0 and fields["files"] == 2
    assert all(isinstance(fields[k], str) for k in ("base", "patch", "stdout", "stderr"))


def test_shared_writes_then_checkout_changes_then_nothing_else(env, make_repo) -> None:
    """The repeated keys, one record per value, after ``worktree`` and before
    ``error``; arrays in JSON."""
    repo = make_repo()
    script = 'git tag v1 && git config x.y 1 && echo x > "$1/b" && echo y > "$1/a"'
    run = isopatch(
        "--porcelain", "--keep", "--no-sandbox", "--", "sh", "-c", script, "sh", str(repo),
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    keys = [line.split(" ", 1)[0] for line in run.out.splitlines()]
    assert keys == [
        "version", "command", "command", "command", "command", "command",
        "base", "exit", "sandbox", "patch", "files", "insertions", "deletions", "stdout",
        "stderr", "worktree", "shared-write", "shared-write", "checkout-change", "checkout-change",
        "duration", "hint",
    ]  # fmt: skip  # the hint: "$1" led into the checkout
    assert "\ncheckout-change a\ncheckout-change b\nduration " in run.out
    script = 'git tag v2 && echo z >> "$1/a"'
    run = isopatch(
        "--json", "--no-sandbox", "--", "sh", "-c", script, "sh", str(repo), cwd=repo, env=env
    )
    fields = json.loads(run.stdout)
    assert list(fields)[-4:] == ["shared-write", "checkout-change", "duration", "hint"]
    assert fields["shared-write"] == ["refs/tags/v2 created"]
    assert fields["checkout-change"] == ["a"]


def test_docs_tell_consumers_to_ignore_unknown_keys() -> None:
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "man" / "git-isopatch.1").read_text()
    assert "Ignore keys you do not know" in readme
    output = page.split(".SH OUTPUT")[1].split(".SH EXIT STATUS")[0]
    assert "must ignore keys they do not know" in output
    for key in ("base", "exit", "patch", "files", "stdout", "stderr", "worktree",
                "shared\\-write", "checkout\\-change", "error", "error\\-code"):  # fmt: skip
        assert f"\\fB{key}\\fP" in output, key


SHARED_WRITES = (
    "git tag v9; git branch -D gone; "
    "git commit -q --allow-empty -m x; git branch -f moved HEAD; "
    "git branch 'café'; git config user.name Mallory"
)


def test_shared_writes_are_records_in_order(env, make_repo) -> None:
    """Each write to the refs and configuration a worktree shares with the
    repository is a ``shared-write <name> <change>`` record, after
    ``worktree`` and before ``error``: refs by name, then ``config``; a ref
    name is quoted as a path is, and raw with ``-z``."""
    repo = make_repo()
    git("branch", "gone", cwd=repo, env=env)
    git("branch", "moved", cwd=repo, env=env)
    run = isopatch(
        "--porcelain", "--keep", "--no-sandbox", "--", "sh", "-c", SHARED_WRITES, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    tail = run.stdout.split(b"\nworktree ", 1)[1].split(b"\n", 1)[1]
    tail = tail.rsplit(b"duration ", 1)[0]
    assert tail == (
        b'shared-write "refs/heads/caf\\303\\251" created\n'
        b"shared-write refs/heads/gone deleted\n"
        b"shared-write refs/heads/moved changed\n"
        b"shared-write refs/tags/v9 created\n"
        b"shared-write config changed\n"
    )
    raw = isopatch(
        "--porcelain", "-z", "--no-sandbox", "--", "sh", "-c", "git branch -D 'café'",
        cwd=repo, env=env,
    )  # fmt: skip
    assert b"\0shared-write refs/heads/caf\xc3\xa9 deleted\0duration " in raw.stdout


def test_shared_writes_in_json_are_an_array(env, make_repo) -> None:
    repo = make_repo()
    script = "git tag v9; git config user.name Mallory"
    run = isopatch("--json", "--no-sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    fields = json.loads(run.stdout)
    assert list(fields)[-2:] == ["shared-write", "duration"]
    assert fields["shared-write"] == ["refs/tags/v9 created", "config changed"]
    quiet = isopatch("--json", "--", "true", cwd=repo, env=env)
    assert "shared-write" not in json.loads(quiet.stdout)


def test_list_json_has_the_list_porcelain_keys(env, make_repo) -> None:
    repo = make_repo()
    assert isopatch("list", "--json", cwd=repo, env=env).stdout == b"[]\n"
    kept = isopatch(  # no base tree kept: the kept worktree alone is listed
        "--porcelain",
        "--keep",
        "--",
        "sh",
        "-c",
        "exit 0",
        cwd=repo,
        env=env,
        git_options=("-c", "isopatch.baseTrees=0"),
    )
    worktree = kept.fields()["worktree"]
    run = isopatch("list", "--json", cwd=repo, env=env)
    assert run.returncode == 0 and run.stdout.endswith(b"]\n") and run.stdout.count(b"\n") == 1
    (entry,) = json.loads(run.stdout)
    porcelain = isopatch("list", "--porcelain", "-z", cwd=repo, env=env).stdout
    keys = [r.split(b" ", 1)[0].decode() for r in porcelain.split(b"\0") if r]
    assert list(entry) == keys
    assert entry["worktree"] == worktree and entry["state"] == "kept"
    assert entry["command"] == ["sh", "-c", "exit 0"]
    assert isinstance(entry["pid"], int) and isinstance(entry["created"], int)
    assert entry["head"] == git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    both = isopatch("list", "--json", "--porcelain", cwd=repo, env=env)
    assert both.returncode == 129 and "cannot be used together" in both.err
