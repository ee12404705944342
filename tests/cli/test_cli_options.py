"""The options through the installed executable (design: "Command line"):
human mode, ``-q``, ``--json``, ``--porcelain -z``, ``--keep``, ``--base``,
``-C``, ``git isopatch`` and ``python -m git_isopatch``, words after the
command, and the Python API."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state, worktree_list

CHANGE = ["sh", "-c", "echo changed >> README; echo out; echo err >&2"]


def test_human_mode_summary_and_inherited_output(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0
    assert run.out == "out\n"  # the command's own stdout, untouched
    lines = run.err.splitlines()
    # the command's stderr, the diffstat, the summary, the next step
    assert lines[:3] == ["err", " README | 1 +", " 1 file changed, 1 insertion(+)"]
    assert lines[3].startswith("isopatch: 1 file changed, exit 0, patch ")
    patch = Path(lines[3].split(", patch ", 1)[1])
    assert lines[4:] == [f"hint: to apply it: git apply --whitespace=nowarn {patch}"]
    assert patch.name == "isopatch.patch"
    assert stat.S_IMODE(patch.stat().st_mode) == 0o600
    assert stat.S_IMODE(patch.parent.stat().st_mode) == 0o700


def test_quiet_prints_no_summary(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("-q", "--", *CHANGE, cwd=repo, env=env)
    assert (run.returncode, run.out, run.err) == (0, "out\n", "err\n")


def test_json_has_the_porcelain_fields(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--json", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err == ""
    result = json.loads(run.stdout)
    assert list(result) == [
        "version", "command", "base", "exit", "sandbox", "patch", "files", "path",
        "insertions", "deletions", "stdout", "stderr", "stdout-text", "stderr-text", "duration",
    ]  # fmt: skip
    assert (result["stdout-text"], result["stderr-text"]) == ("out\n", "err\n")
    assert result["base"] == git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    assert (result["exit"], result["files"]) == (0, 1)
    assert Path(result["stdout"]).read_text() == "out\n"
    assert Path(result["stderr"]).read_text() == "err\n"


def test_porcelain_z_ends_records_with_nul(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "-z", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0
    records = run.stdout.split(b"\0")
    assert records[-1] == b""
    assert [r.split(b" ", 1)[0] for r in records[:-1]] == [
        b"version",
        b"command",
        b"base",
        b"exit",
        b"sandbox",
        b"patch",
        b"files",
        b"insertions",
        b"deletions",
        b"stdout",
        b"stderr",
        b"duration",
    ]


def test_keep_leaves_an_unlocked_registered_worktree(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--keep", "--porcelain", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0
    worktree = Path(run.fields()["worktree"])
    assert (worktree / "README").read_text() == "hello\nchanged\n"
    listing = worktree_list(repo, env).decode()  # the base tree is locked: a cache
    assert f"worktree {worktree}\n" in listing
    assert "\nlocked" not in listing
    git("worktree", "remove", "--force", worktree, cwd=repo, env=env)


def test_base_option_starts_from_that_commit(env, make_repo) -> None:
    repo = make_repo()
    first = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    (repo / "README").write_text("second\n")
    git("commit", "-qam", "second", cwd=repo, env=env)
    run = isopatch("--base", first, "--porcelain", "--", "cat", "README", cwd=repo, env=env)
    assert run.fields()["base"] == first
    assert Path(run.fields()["stdout"]).read_text() == "hello\n"


def test_dash_c_names_the_repository(env, make_repo, tmp_path) -> None:
    repo = make_repo({"sub/file": "x\n"})
    run = isopatch(
        "-C", repo / "sub", "--porcelain", "--", "sh", "-c", "pwd > where", cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.err
    assert b"b/sub/where" in Path(run.fields()["patch"]).read_bytes()


def test_via_git_and_python_dash_m(env, make_repo) -> None:
    repo = make_repo()
    via_git = isopatch("-q", "--porcelain", "--", "true", cwd=repo, env=env, via_git=True)
    assert via_git.returncode == 0 and via_git.fields()["files"] == "0"
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", "--porcelain", "--", "true"],
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0 and b"files 0\n" in done.stdout


def test_command_words_that_look_like_options_go_to_the_command(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "sh", "-c", "echo $0 > args", "--keep", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "worktree" not in run.fields()
    assert b"+--keep" in Path(run.fields()["patch"]).read_bytes()


def test_python_api(env, make_repo, tmp_path) -> None:
    import git_isopatch
    from git_isopatch import IsopatchError, capture

    repo = make_repo()
    before = repo_state(repo, env)
    result = capture(["sh", "-c", "echo api > new"], repo_path=str(repo), capture_output=True)
    assert isinstance(result, git_isopatch.CaptureResult)
    assert result.exit_code == 0 and result.files == 1 and result.worktree_path is None
    assert b"+api" in Path(result.patch_path).read_bytes()
    assert repo_state(repo, env) == before
    with pytest.raises(IsopatchError) as failure:
        capture(["true"], repo_path=str(tmp_path))
    assert failure.value.code == "not-a-git-repository"
    with pytest.raises(ValueError):
        capture([], repo_path=str(repo))
