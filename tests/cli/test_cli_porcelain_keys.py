"""The result is complete and versioned, in porcelain and JSON alike
(design: Porcelain v1): every key of the table, in its order, through the
installed executable; paths and arguments that are not UTF-8 stay exact
(raw bytes with ``-z``, the ``\\udcXX`` surrogate in JSON)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

from git_isopatch.git.types import CommitId
from git_isopatch.render import PORCELAIN_KEYS, porcelain, result_fields
from git_isopatch.result import CaptureResult


def _records(stdout: bytes, *, nul: bool) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` per record, in order; a ``path`` record of a rename
    or copy with ``-z`` takes the NUL-ended field after it too."""
    parts = stdout.split(b"\0" if nul else b"\n")
    assert parts[-1] == b""
    out, at = [], 0
    while at < len(parts) - 1:
        key, _, value = parts[at].partition(b" ")
        at += 1
        if nul and key == b"path" and value[:1] in (b"R", b"C"):
            value += b"\0" + parts[at]
            at += 1
        out.append((key, value))
    return out


def _keys_in_order(records: list[tuple[bytes, bytes]]) -> list[str]:
    keys = [key.decode() for key, _ in records]
    assert keys == sorted(keys, key=PORCELAIN_KEYS.index), keys
    return keys


@pytest.fixture
def repo(make_repo) -> Path:
    return make_repo(
        {
            "keep": "1\n2\n3\n",
            "gone": "bye\n",
            "moved": "a file long enough to be found again after its rename\n" * 4,
        }
    )


SCRIPT = (
    "echo 4 >> keep; rm gone; mv moved here; printf '\\377' > bin; "
    "echo n > \"$(printf 'caf\\351')\""
)


def test_every_key_of_a_run_in_order(env, repo) -> None:
    run = isopatch(
        "--porcelain", "-z", "--keep", "--apply", "--", "sh", "-c", SCRIPT, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    records = _records(run.stdout, nul=True)
    keys = _keys_in_order(records)
    assert keys[:4] == ["version", "command", "command", "command"]
    assert records[0] == (b"version", b"1")
    assert [v for k, v in records if k == b"command"] == [b"sh", b"-c", os.fsencode(SCRIPT)]
    paths = [v for k, v in records if k == b"path"]
    assert paths == [
        b"A bin",
        b"A caf\xe9",
        b"D gone",
        b"R100 here\0moved",
        b"M keep",
    ]
    values = dict(records)
    assert values[b"files"] == b"5"
    assert (values[b"insertions"], values[b"deletions"]) == (b"3", b"1")
    assert values[b"applied"] == b"true"
    assert float(values[b"duration"]) > 0
    assert {"worktree", "stdout", "stderr", "patch", "base", "exit"} <= set(keys)
    assert (repo / "here").exists()  # applied


def test_the_same_run_in_json(env, repo) -> None:
    run = isopatch("--json", "--", "sh", "-c", SCRIPT, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = json.loads(run.stdout)
    assert list(fields) == [
        "version", "command", "base", "exit", "sandbox", "patch", "files", "path",
        "insertions", "deletions", "stdout", "stderr", "stdout-text", "stderr-text", "duration",
    ]  # fmt: skip
    assert fields["version"] == 1 and fields["command"] == ["sh", "-c", SCRIPT]
    assert fields["path"] == [
        {"status": "A", "path": "bin"},
        {"status": "A", "path": "caf\udce9"},
        {"status": "D", "path": "gone"},
        {"status": "R100", "path": "here", "old-path": "moved"},
        {"status": "M", "path": "keep"},
    ]
    assert os.fsencode(fields["path"][1]["path"]) == b"caf\xe9"  # exact, back to bytes
    assert b"caf\\udce9" in run.stdout  # ASCII JSON: the surrogate escaped
    assert isinstance(fields["duration"], float)


def test_paths_are_quoted_without_z_and_a_rename_is_tab_separated(env, repo) -> None:
    run = isopatch("--porcelain", "--", "sh", "-c", SCRIPT, cwd=repo, env=env)
    lines = run.stdout.split(b"\n")
    assert b'path A "caf\\351"' in lines
    assert b"path R100 here\tmoved" in lines
    assert b"command sh" in lines and b"command -c" in lines


def test_an_argument_with_a_newline_is_one_record(env, repo) -> None:
    run = isopatch("--porcelain", "--", "sh", "-c", "true\n", "x\udcff", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    commands = [line for line in run.stdout.split(b"\n") if line.startswith(b"command ")]
    assert commands == [b"command sh", b"command -c", b'command "true\\n"', b'command "x\\377"']


def test_an_empty_patch_has_no_path_records_and_an_empty_array(env, repo) -> None:
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    fields = run.fields()
    assert fields["files"] == "0" and "path" not in fields
    assert (fields["insertions"], fields["deletions"]) == ("0", "0")
    assert json.loads(isopatch("--json", "--", "true", cwd=repo, env=env).stdout)["path"] == []


def test_a_type_change_and_a_mode_change(env, make_repo) -> None:
    """git writes a type change as two entries (deleted, then added): one
    path, one ``path`` record, counted once in ``files`` as ``git diff
    --stat`` counts it."""
    repo = make_repo({"link": "was a file\n", "tool": "#!/bin/sh\n"})
    run = isopatch(
        "--json", "--", "sh", "-c", "rm link; ln -s tool link; chmod +x tool", cwd=repo, env=env
    )
    result = json.loads(run.stdout)
    assert result["path"] == [
        {"status": "T", "path": "link"},
        {"status": "M", "path": "tool"},
    ]
    assert result["files"] == 2


def test_a_signal_that_ended_the_command_is_named(env, repo) -> None:
    run = isopatch("--porcelain", "--", "sh", "-c", "kill -KILL $$", cwd=repo, env=env)
    assert run.returncode == 137
    fields = run.fields()
    assert fields["exit"] == "137" and fields["signal"] == "SIGKILL"
    assert "timed-out" not in fields


def test_a_timeout_says_timed_out_and_no_signal(env, repo) -> None:
    run = isopatch("--json", "--timeout", "0.3", "--", "sleep", "30", cwd=repo, env=env)
    assert run.returncode == 124
    fields = json.loads(run.stdout)
    assert fields["timed-out"] is True and "signal" not in fields


def test_a_command_that_could_not_start_says_why(env, repo) -> None:
    run = isopatch("--json", "--", "no-such-tool-here", cwd=repo, env=env)
    assert run.returncode == 127
    fields = json.loads(run.stdout)
    assert fields["command-error"] == "cannot run 'no-such-tool-here': No such file or directory"
    assert f"error: {fields['command-error']}" in run.err


def test_a_command_run_through_a_shell_by_mistake_gets_its_hint(env, repo) -> None:
    run = isopatch("--json", "--", "ruff format .", cwd=repo, env=env)
    fields = json.loads(run.stdout)
    assert fields["hint"] and "without a shell" in fields["hint"][0]
    assert all(f"hint: {line}" in run.err for line in fields["hint"])


def test_apply_not_applied_is_false(env, repo) -> None:
    run = isopatch(
        "--porcelain", "--apply", "--", "sh", "-c", "echo x > n; exit 1", cwd=repo, env=env
    )
    assert run.returncode == 1
    assert run.fields()["applied"] == "false"
    assert "applied" not in isopatch("--porcelain", "--", "true", cwd=repo, env=env).fields()


def test_a_fatal_error_is_versioned(env, repo) -> None:
    run = isopatch("--porcelain", "--base", "nosuch", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.stdout.startswith(b"version 1\nerror unknown revision 'nosuch'\n")
    fields = json.loads(
        isopatch("--json", "--base", "nosuch", "--", "true", cwd=repo, env=env).stdout
    )
    assert fields["version"] == 1 and fields["error-code"] == "unknown-revision"


def test_outside_writes_are_records_and_an_array() -> None:
    """The sandbox fills ``outside_writes``; the result shows each one, as
    a path, after ``checkout-change``."""
    result = CaptureResult(
        base=CommitId("a" * 40),
        exit_code=0,
        patch_path="/p",
        files=0,
        stdout=None,
        stderr=None,
        worktree_path=None,
        tmpdir="/t",
        command=("x",),
        outside_writes=("/home/me/.cache/x", "/tmp/new\nline"),
        duration=1.5,
    )
    fields = result_fields(result)
    assert list(fields)[-2:] == ["outside-write", "duration"]
    assert fields["outside-write"] == ["/home/me/.cache/x", "/tmp/new\nline"]
    out = porcelain(fields, nul=False)
    assert b'outside-write /home/me/.cache/x\noutside-write "/tmp/new\\nline"\n' in out
    assert out.endswith(b"duration 1.5\n")


def test_git_sees_the_same_paths_in_the_kept_worktree(env, repo) -> None:
    """``path`` records are ``git diff --name-status`` of the worktree."""
    run = isopatch("--porcelain", "-z", "--keep", "--", "sh", "-c", SCRIPT, cwd=repo, env=env)
    records = _records(run.stdout, nul=True)
    worktree = Path(os.fsdecode(dict(records)[b"worktree"]))
    base = dict(records)[b"base"].decode()
    git("add", "-N", ".", cwd=worktree, env=env)
    status = git("diff", "--name-status", "-z", "-M", base, cwd=worktree, env=env).split(b"\0")
    assert status[:2] == [b"A", b"bin"]
    assert b"R100" in status and status[status.index(b"R100") + 1 : status.index(b"R100") + 3] == [
        b"moved",
        b"here",
    ]
