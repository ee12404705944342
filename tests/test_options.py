"""The options of issue 2 through the installed executable: --stdout, -o,
--json, --keep, -q, human mode, ``python -m git_isopatch`` and the API."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch, repo_state

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


def test_stdout_carries_only_the_patch(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    run = isopatch("--stdout", "-q", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0
    assert run.stdout.startswith(b"diff --git a/README b/README\n")
    assert run.err == "out\nerr\n"  # the command's stdout went to stderr
    git("apply", "--check", "-", cwd=repo, env=env, input=run.stdout)
    assert list(Path(env["TMPDIR"]).iterdir()) == []  # nothing left behind


def test_output_file(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    target = tmp_path / "out" / "change.patch"
    target.parent.mkdir()
    run = isopatch("-o", target, "--porcelain", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["patch"] == str(target)
    assert target.read_bytes().startswith(b"diff --git a/README b/README\n")
    assert list(target.parent.iterdir()) == [target]  # no temporary file beside it


def test_json_has_the_porcelain_fields(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--json", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err == ""
    result = json.loads(run.stdout)
    assert list(result) == ["base", "exit", "patch", "files", "stdout", "stderr"]
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
        b"base",
        b"exit",
        b"patch",
        b"files",
        b"stdout",
        b"stderr",
    ]


def test_keep_leaves_an_unlocked_registered_worktree(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--keep", "--porcelain", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0
    worktree = Path(run.fields()["worktree"])
    assert (worktree / "README").read_text() == "hello\nchanged\n"
    listing = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
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


def test_the_command_gets_the_terminal(env, make_repo) -> None:
    """In human mode the command inherits the terminal (issue 2): it can read
    from it, as in a shell, and is its foreground process group."""
    repo = make_repo()
    pid, fd = pty.fork()
    if pid == 0:  # child: run git-isopatch on the pseudo-terminal
        os.chdir(repo)
        os.execve(
            str(ISOPATCH),
            [
                str(ISOPATCH),
                "-q",
                "--",
                "sh",
                "-c",
                'read line; echo "got $line" > answer; echo done',
            ],
            env,
        )
    output = b""
    os.write(fd, b"typed\n")
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            os.kill(pid, 9)
            pytest.fail(f"no answer from the command on the terminal: {output!r}")
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    assert b"done" in output


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


def test_writes_to_shared_refs_and_configuration_are_reported(env, make_repo) -> None:
    """A linked worktree shares refs, the stash and configuration with the
    user's repository: git-isopatch cannot prevent a command writing there,
    so it says so (found by a new user trying lint-staged-like commands)."""
    repo = make_repo()
    script = (
        "git tag v9; git branch feature; echo s > s.txt; git add s.txt; git stash -q; "
        "git config user.name Mallory"
    )
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    warning = next(line for line in run.err.splitlines() if line.startswith("warning: "))
    assert warning == (
        "warning: your repository changed while the command ran: refs/heads/feature (created), "
        "refs/stash (created), refs/tags/v9 (created), the configuration file"
    )
    assert "hint: a worktree shares refs" in run.err


def test_nothing_is_reported_when_the_command_keeps_to_its_worktree(env, make_repo) -> None:
    repo = make_repo()
    script = "echo x > new; git add new; git commit -qm 'in the worktree'"
    run = isopatch("--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0
    assert "warning" not in run.err


def test_output_is_relative_to_dash_c_as_in_git(env, make_repo, tmp_path) -> None:
    """``-C <path>`` runs as if started in <path>, so a relative ``-o`` lands
    there (reported by a new user: it was taken from the caller's folder)."""
    repo = make_repo({"pkg/file": "x\n"})
    run = isopatch(
        "-C", repo / "pkg", "-o", "out.patch", "--porcelain", "--", "true", cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.err
    assert run.fields()["patch"] == str(repo / "pkg" / "out.patch")
    assert (repo / "pkg" / "out.patch").exists() and not (tmp_path / "out.patch").exists()
