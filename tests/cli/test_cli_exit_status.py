"""One test per row of the design's exit-status table (issue 2), through the
installed executable, each checking what is left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, registered_worktrees, repo_state, tmpfs


def _temp_entries(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["TMPDIR"]).iterdir())


def test_the_commands_own_exit_code_with_the_patch(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--", "sh", "-c", "echo x > new; exit 3", cwd=repo, env=env)
    assert run.returncode == 3
    fields = run.fields()
    assert fields["exit"] == "3" and fields["files"] == "1"
    assert b"b/new" in Path(fields["patch"]).read_bytes()


def test_timeout_exits_124_and_still_captures(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch(
        "--porcelain",
        "--timeout",
        "0.5",
        "--",
        "sh",
        "-c",
        "echo x > new; sleep 30",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 124, run.err
    assert run.fields()["files"] == "1"
    assert "timed out" in run.err


def test_not_executable_exits_126_with_an_empty_patch(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"script.sh": "#!/bin/sh\necho hi\n"})  # committed without the exec bit
    run = isopatch("--porcelain", "--", "./script.sh", cwd=repo, env=env)
    assert run.returncode == 126
    fields = run.fields()
    assert fields["files"] == "0" and Path(fields["patch"]).read_bytes() == b""
    assert "error: cannot run './script.sh': Permission denied" in run.err


def test_not_found_exits_127_with_an_empty_patch(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--", "no-such-command-here", cwd=repo, env=env)
    assert run.returncode == 127
    assert run.fields()["files"] == "0"
    assert "error: cannot run 'no-such-command-here': No such file or directory" in run.err


def test_killed_by_a_signal_exits_128_plus_n(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch(
        "--porcelain", "--", "sh", "-c", "echo x > new; kill -TERM $$", cwd=repo, env=env
    )
    assert run.returncode == 128 + 15
    assert run.fields()["exit"] == "143" and run.fields()["files"] == "1"


def _assert_nothing_created(repo: Path | None, env: dict[str, str]) -> None:
    assert _temp_entries(env) == []
    if repo is not None:
        assert not (repo / ".git" / "worktrees").exists()


def test_plain_folder_is_fatal(env, tmp_path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    run = isopatch("--", "true", cwd=folder, env=env)
    assert run.returncode == 128
    assert run.err.startswith("fatal: not a git repository"), run.err
    assert "Traceback" not in run.err
    _assert_nothing_created(None, env)


def test_bare_repository_is_fatal(env, tmp_path, make_repo) -> None:
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", make_repo(), bare, cwd=tmp_path, env=env)
    run = isopatch("--", "true", cwd=bare, env=env)
    assert run.returncode == 128
    assert run.err == "fatal: this operation must be run in a work tree\n"
    _assert_nothing_created(None, env)
    assert not (bare / "worktrees").exists()


def test_unborn_head_is_fatal(env, tmp_path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    git("init", "-q", cwd=repo, env=env)
    run = isopatch("--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.startswith("fatal: ") and "HEAD" in run.err
    _assert_nothing_created(repo, env)


@pytest.mark.parametrize("base", ["no-such-branch", "HEAD~7", "HEAD^{tree}", "-x"])
def test_bad_base_is_fatal(env, make_repo, base: str) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    run = isopatch(f"--base={base}", "--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: ") and f"'{base}'" in run.err
    assert run.fields()["error-code"] == "unknown-revision"
    assert "base" not in run.fields()
    _assert_nothing_created(repo, env)
    assert repo_state(repo, env) == before


def test_worktree_that_cannot_be_created_is_fatal(env, make_repo, tmp_path) -> None:
    repo = make_repo({"big.bin": os.urandom(512 * 1024), "small": "x\n"})
    before = repo_state(repo, env)
    with tmpfs(tmp_path / "full", "256k") as small_tmp:
        run = isopatch(  # isopatch.tmpdir places the worktree there
            "--porcelain",
            "--",
            "true",
            cwd=repo,
            env=env,
            git_options=("-c", f"isopatch.tmpdir={small_tmp}"),
        )
        assert run.returncode == 128, run.err
        # git says only "unable to write file" (entry.c); the disk is full
        first, hint = run.err.splitlines()
        assert first.startswith("fatal: could not create worktree at "), run.err
        assert ": No space left on device (the checkout needs " in first
        assert hint.startswith("hint: git said: unable to write file") and "big.bin" in hint
        assert run.fields()["error-code"] == "no-space"
        assert list(small_tmp.iterdir()) == []
    assert registered_worktrees(repo, env) == []
    assert repo_state(repo, env) == before


def test_failed_extraction_keeps_the_worktree(env, make_repo) -> None:
    repo = make_repo()
    # The command stages a file (git reads its index, not the base tree's
    # copy) and leaves that index locked: git add -N cannot run.
    script = "echo x > new; echo y > staged; git add staged; "
    script += 'touch "$(git rev-parse --git-dir)/index.lock"'
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 128
    fields = run.fields()
    assert "patch" not in fields and "files" not in fields
    assert fields["error-code"] == "index-locked"
    worktree = Path(fields["worktree"])
    assert (worktree / "new").read_text() == "x\n"
    assert "fatal: could not mark new files intent-to-add" in run.err
    assert f"hint: the worktree is kept for inspection at '{worktree}'" in run.err
    assert registered_worktrees(repo, env) == [f"worktree {worktree}"]


def test_a_lock_left_on_an_index_the_command_never_changed_keeps_no_patch_back(
    env, make_repo
) -> None:
    """Over a base tree, the extraction reads an index of the compared
    entries alone: a lock on the run's own, unchanged index is no obstacle."""
    repo = make_repo()
    before = repo_state(repo, env)
    script = 'echo x > new; touch "$(git rev-parse --git-dir)/index.lock"'
    run = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["files"] == "1"
    assert b"+++ b/new\n" in Path(fields["patch"]).read_bytes()
    assert registered_worktrees(repo, env) == []
    assert repo_state(repo, env) == before


def test_usage_error_exits_129_and_creates_nothing(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--no-such-option", "--", "true", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.startswith("error: ") and "usage: git isopatch" in run.err
    assert run.stdout == b""
    _assert_nothing_created(repo, env)


@pytest.mark.parametrize(
    ("script", "expected"),
    [("echo x > new", 1), ("true", 0), ("echo x > new; exit 3", 3), ("exit 5", 5)],
)
def test_exit_code_option(env, make_repo, script: str, expected: int) -> None:
    repo = make_repo()
    # unconfined: a command failing in the default sandbox gets its hint
    run = isopatch("-q", "--exit-code", "--no-sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == expected, run.err
    assert run.err == ""


def test_the_usage_line_of_exit_code_says_a_failed_command_passes_through(env, make_repo) -> None:
    """``exit 5`` above exits 5, not 0 for its empty patch: ``-h`` says so."""
    usage = isopatch("-h", cwd=make_repo(), env=env).out
    (line,) = [line for line in usage.splitlines() if line.startswith("    --exit-code ")]
    assert "when the command succeeded" in line, line
