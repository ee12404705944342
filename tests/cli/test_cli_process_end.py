"""The executable ends without the interpreter's teardown (design:
Architecture, ``entry.py``): once its output is flushed and its children
reaped.  Whatever it wrote arrives whole, through a pipe to a reader that
is slow to read, into an ``-o`` file, from ``--porcelain``, ``list``,
``prune`` and the MCP server; output it could not write is a failure, never
exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch

#: Reads nothing for a while, then everything: the writer fills the pipe
#: (64 kB) and waits, and its last bytes are written only as it ends.
SLOW_READER = "sleep 1; cat"

#: A change of about 1.5 MB of patch: more than a pipe holds many times over.
BIG_CHANGE = "seq 1 200000 > numbers.txt"


def through_slow_reader(
    argv: list[str], cwd: Path, env: dict[str, str], reader: str = SLOW_READER
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with its stdout piped into ``sh -c <reader>``; its exit
    status, what the reader passed on, its stderr."""
    with tempfile.TemporaryFile() as passed:
        read = subprocess.Popen(["sh", "-c", reader], stdin=subprocess.PIPE, stdout=passed, env=env)
        assert read.stdin is not None
        run = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=read.stdin,
            stderr=subprocess.PIPE,
        )
        read.stdin.close()  # only the tool holds the pipe's writing end now
        _, err = run.communicate(timeout=120)
        read.wait(timeout=120)
        passed.seek(0)
        return run.returncode, passed.read(), err


def test_a_patch_on_stdout_reaches_a_slow_reader_whole(env, make_repo) -> None:
    repo = make_repo()
    status, out, err = through_slow_reader(
        [str(ISOPATCH), "--no-sandbox", "--stdout", "--", "sh", "-c", BIG_CHANGE], repo, env
    )
    assert status == 0, err
    assert len(out) > 1_000_000
    git("apply", "--check", "-", cwd=repo, env=env, input=out)
    applied = git("apply", "--numstat", "-", cwd=repo, env=env, input=out)
    assert applied.split(b"\t")[:2] == [b"200000", b"0"]


def test_porcelain_reaches_a_pipe_to_its_last_record(env, make_repo) -> None:
    repo = make_repo()
    status, out, err = through_slow_reader(
        [str(ISOPATCH), "--no-sandbox", "--porcelain", "--", "sh", "-c", BIG_CHANGE], repo, env
    )
    assert status == 0, err
    keys = [line.split(" ", 1)[0] for line in out.decode().splitlines()]
    assert keys[0] == "version" and keys[-1] == "duration", out
    assert "patch" in keys and "files" in keys


def test_the_o_file_is_complete_when_the_run_ends(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    target = tmp_path / "out.patch"
    run = isopatch(
        "-q", "--no-sandbox", "-o", target, "--", "sh", "-c", BIG_CHANGE, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    numstat = git("apply", "--numstat", str(target), cwd=repo, env=env)
    assert numstat.split(b"\t")[:2] == [b"200000", b"0"]


def test_list_reaches_a_slow_reader_whole(env, make_repo) -> None:
    """``list`` writes its lines through Python's buffer: they are flushed
    before the end."""
    repo = make_repo()
    kept = []
    for _ in range(3):
        run = isopatch("--no-sandbox", "--keep", "--porcelain", "--", "true", cwd=repo, env=env)
        kept.append(run.fields()["worktree"])
    status, out, err = through_slow_reader([str(ISOPATCH), "list", "--json"], repo, env)
    assert status == 0, err
    assert sorted(entry["worktree"] for entry in json.loads(out)) == sorted(kept)
    status, out, err = through_slow_reader([str(ISOPATCH), "list"], repo, env)
    assert status == 0, err
    assert len(out.decode().splitlines()) == 3, out


def test_prune_reports_every_worktree_it_removed(env, make_repo) -> None:
    repo = make_repo()
    kept = [
        isopatch("--no-sandbox", "--keep", "--porcelain", "--", "true", cwd=repo, env=env)
        for _ in range(2)
    ]
    status, out, err = through_slow_reader([str(ISOPATCH), "prune", "-v"], repo, env)
    assert status == 0, err
    for run in kept:
        assert run.fields()["worktree"] in out.decode()


@pytest.mark.hostile
@pytest.mark.parametrize("buffered", [True, False])
def test_output_lost_to_a_closed_pipe_is_a_failure(env, make_repo, buffered) -> None:
    """The reader is gone before ``list`` writes: the run fails, never exit
    0, and without a Python message about an exception ignored.  Python
    buffers stdout to a pipe (unless ``PYTHONUNBUFFERED``): the lines reach
    the pipe as the run ends, and it says so in one fatal line."""
    repo = make_repo()
    isopatch("--no-sandbox", "--keep", "-q", "--", "true", cwd=repo, env=env)
    environ = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        environ["PYTHONUNBUFFERED"] = "1"
    gone = "exec 0<&-"  # the reader closes its end and ends
    status, out, err = through_slow_reader([str(ISOPATCH), "list"], repo, environ, reader=gone)
    assert out == b""
    assert status != 0 and b"Exception" not in err and b"Traceback" not in err, err
    if buffered:
        assert status == 128, err
        assert err.decode().splitlines() == ["fatal: could not write to stdout: Broken pipe"]


def test_the_mcp_server_answers_every_request_before_it_ends(env, make_repo) -> None:
    """JSON-RPC over a pipe, stdin closed after the last request: every
    answer is on stdout when the server has ended."""
    pytest.importorskip("mcp", reason="needs the Python package 'mcp' (the mcp extra)")
    repo = make_repo()
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "capture", "arguments": {"command": ["sh", "-c", "echo x > new"]}},
        },
    ]
    server = subprocess.Popen(
        [str(ISOPATCH), "mcp"],
        cwd=repo,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    answers = {}
    for message in messages:
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        if "id" in message:  # a request the server answers before the next
            answer = json.loads(server.stdout.readline())
            answers[answer["id"]] = answer
    rest, err = server.communicate(timeout=120)  # stdin closed: the client is done
    assert server.returncode == 0, err.decode()
    assert rest == b"" and b"Traceback" not in err, (rest, err)
    assert {tool["name"] for tool in answers[2]["result"]["tools"]} == {
        "capture",
        "apply",
        "end_session",
    }
    result = json.loads(answers[3]["result"]["content"][0]["text"])
    assert result["exit"] == 0 and result["files"] == 1, result


def test_the_children_that_ended_are_reaped_before_the_end() -> None:
    """:func:`git_isopatch.entry.reap_children` collects a child that ended
    and was never waited for (a zombie), and waits for none that runs."""
    probe = """
import os, subprocess, sys, time
from git_isopatch.entry import reap_children
ended = subprocess.Popen(["true"])
running = subprocess.Popen(["sleep", "30"])
time.sleep(0.5)
def state(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]
before = state(ended.pid)
reap_children()
gone = not os.path.exists(f"/proc/{ended.pid}")
print(before, gone, state(running.pid))
running.kill()
running.wait()
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.split() == ["Z", "True", "S"], done.stderr
