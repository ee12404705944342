"""``git isopatch list`` (design: "Command line"): running, kept and
orphaned worktrees, made for real (a run that waits, ``--keep``, a run
killed with SIGKILL), none of the user's own, its porcelain quoting, and
the subcommands recognised only as the first word."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from lifecycle_helpers import (
    _git_list,
    _kept,
    _listed,
    _orphan,
    _start,
    _user_entries,
    _users_worktrees,
)
from repo_helpers import git, isopatch

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")


def test_list_quotes_newlines_and_control_bytes_of_a_command(env, make_repo) -> None:
    """One worktree, one line; an escape sequence never reaches the
    terminal raw; the same quoting as ``list --porcelain``."""
    repo = make_repo()
    script = "echo 'two\nlines' >/dev/null; : '\x1b[31mred'"
    kept = isopatch("--porcelain", "--keep", "--", "sh", "-c", script, cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    listed = isopatch("list", cwd=repo, env=env)
    assert listed.returncode == 0, listed.err
    (line,) = listed.out.splitlines()
    assert "\x1b" not in line and "\\033[31mred" in line and "two\\nlines" in line
    porcelain = isopatch("list", "--porcelain", cwd=repo, env=env).fields()
    assert line.endswith(porcelain["command"])
    git("worktree", "remove", "--force", kept.fields()["worktree"], cwd=repo, env=env)


def test_list_shows_running_kept_and_orphaned_and_none_of_the_users(
    env, make_repo, tmp_path
) -> None:
    repo = make_repo()
    users = _users_worktrees(repo, env, tmp_path)
    kept = _kept(repo, env)
    _orphan(repo, env, tmp_path / "orphan")
    running = _start(repo, env, tmp_path / "running")
    try:
        entries = _listed(repo, env)
        human = isopatch("list", cwd=repo, env=env)
    finally:
        assert running.finish() == 0
    assert [e["state"] for e in entries] == ["kept", "orphaned", "running"]
    assert entries[0]["worktree"] == kept
    assert entries[2]["pid"] == str(running.process.pid)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    for entry in entries:
        assert entry["head"] == head
        assert abs(int(entry["created"]) - time.time()) < 3600
        assert not entry["worktree"].startswith(str(tmp_path / "user-"))
    assert entries[0]["command"] == "true"
    assert human.returncode == 0, human.err
    rows = [re.split(r" {2,}", line) for line in human.out.splitlines()]
    assert [row[:2] for row in rows] == [
        [kept, "kept"],
        [entries[1]["worktree"], "orphaned"],
        [entries[2]["worktree"], f"running (pid {running.process.pid})"],
    ]
    assert all(re.fullmatch(r"\d+ seconds? ago|\d+ minutes? ago", row[2]) for row in rows)
    assert rows[0][3] == "true"
    assert _user_entries(_git_list(repo, env), tmp_path) == _user_entries(users, tmp_path)


def test_list_porcelain_quotes_paths_unless_z(env, make_repo) -> None:
    repo = make_repo(name='odd "name"')
    quoted_in_capture = _kept(repo, env)
    path = _listed(repo, env)[0]["worktree"]
    assert path.endswith('/odd "name"')
    run = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    quoted = '"' + path.replace('"', '\\"') + '"'
    assert quoted == quoted_in_capture
    assert run.out.splitlines()[0] == f"worktree {quoted}"
    assert run.out.endswith("\n\n")


def test_subcommands_are_only_recognised_first(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "list"
    program.write_text("#!/bin/sh\necho ran > listed\n")
    program.chmod(0o755)
    path_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    run = isopatch("--porcelain", "--", "list", cwd=repo, env=path_env)
    assert run.returncode == 0, run.err
    assert b"+++ b/listed" in Path(run.fields()["patch"]).read_bytes()
    run = isopatch("list", cwd=repo, env=path_env, via_git=True)
    assert (run.returncode, run.out, run.err) == (0, "", "")


@pytest.mark.parametrize(
    ("args", "status", "first_line"),
    [
        (["list", "-h"], 129, "usage: git isopatch list [--porcelain [-z] | --json] [-C <path>]"),
        (
            ["prune", "-h"],
            129,
            "usage: git isopatch prune [--expire <time>] [--sessions] [-n] [-v] [-C <path>]",
        ),
        (["list", "extra"], 129, "error: too many arguments: 'extra'"),
        (["list", "-z"], 129, "error: the option '-z' requires '--porcelain'"),
        (["prune", "--expire"], 129, "error: option 'expire' requires a value"),
    ],
)
def test_subcommand_usage(env, make_repo, args, status, first_line) -> None:
    repo = make_repo()
    run = isopatch(*args, cwd=repo, env=env)
    assert run.returncode == status
    text = run.out if args[-1] == "-h" else run.err
    assert text.splitlines()[0] == first_line


def test_list_outside_a_repository_is_fatal(env, tmp_path) -> None:
    run = isopatch("list", cwd=tmp_path, env=env)
    assert run.returncode == 128
    assert run.err == "fatal: not a git repository (or any of the parent directories): .git\n"
    assert run.out == ""


def test_list_outside_a_repository_under_json_or_porcelain_says_so_on_stdout(env, tmp_path) -> None:
    """A script or agent reading ``list --json`` gets the failure's object
    (its schema allows it), as from the capture: never an empty stdout."""
    said = "not a git repository (or any of the parent directories): .git"
    run = isopatch("list", "--json", cwd=tmp_path, env=env)
    assert run.returncode == 128
    fields = json.loads(run.out)
    assert (fields["error"], fields["error-code"]) == (said, "not-a-git-repository"), fields
    run = isopatch("list", "--porcelain", "-z", cwd=tmp_path, env=env)
    assert run.returncode == 128
    assert run.stdout.split(b"\0")[:2] == [b"version 1", b"error " + said.encode()], run.stdout


def test_a_kept_worktree_whose_folder_was_deleted_is_listed_prunable(env, make_repo) -> None:
    """As ``git worktree list`` says ``prunable`` of a worktree whose
    folder is gone: the line says so after its state, and the porcelain and
    JSON carry git's reason under ``prunable`` (the state stays ``kept``)."""
    repo = make_repo()
    kept = Path(_kept(repo, env))
    other = _kept(repo, env)
    shutil.rmtree(kept)
    human = isopatch("list", cwd=repo, env=env)
    assert human.returncode == 0, human.err
    rows = {row[0]: row[1] for row in (re.split(r" {2,}", line) for line in human.out.splitlines())}
    assert rows == {str(kept): "kept, prunable", other: "kept"}, human.out
    reason = "gitdir file points to non-existent location"
    (porcelain,) = [e for e in _listed(repo, env) if e["worktree"] == str(kept)]
    assert (porcelain["state"], porcelain["prunable"]) == ("kept", reason)
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    assert [(e["state"], e.get("prunable")) for e in listed] == [("kept", reason), ("kept", None)]
