"""The launcher (``git_isopatch.sandbox.launcher``) is the one process that
says how a sandboxed command ended; when it ends before it said so,
bubblewrap's exit status is the launcher's, and must never pass as the
command's (design: "Exit status").

- SIGKILL reaches the launcher while the command runs (here the test's
  own, from outside the namespace: the command cannot, see
  ``test_sandbox_attack_launcher.py``; the kernel's OOM killer can): the
  run fails as a sandbox failure, one ``fatal:`` line, error-code
  ``sandbox-failed``, exit 128, the user's repository as it was, nothing
  left behind; not "exit 137".
- The launcher stops serving (SIGSTOP from outside, as a launcher of ours
  caught in a loop): ``--timeout`` still ends the run, as a time-out (124),
  bubblewrap killed once the launcher has not ended everything in
  ``GONE_TIMEOUT_SECONDS``.
- The launcher cannot start the command (a fork the process bound
  refuses, as the unprivileged user's ``RLIMIT_NPROC``): the command could
  not run (126, ``command-error``), not "exit 1" of the launcher's crash.

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from repo_helpers import ISOPATCH, repo_state
from sandbox_helpers import run_as_nobody

from git_isopatch.sandbox.launcher import MAIN

#: Starts git-isopatch (``argv`` in the JSON of its first argument,
#: ``{python}`` its interpreter, in
#: ``cwd`` or the ``repo`` of :func:`run_as_nobody`) on ``sleep 60``,
#: finds its launcher among its descendants (the interpreter run with
#: ``-c <launcher's program>`` whose descendant is the ``sleep``), kills it
#: with SIGKILL (or ``signal``); ``killed``: ``[returncode, stdout, stderr,
#: found]``.
KILL_THE_LAUNCHER = """
import json, os, signal, subprocess, sys, time
params = json.loads(sys.argv[1])
cwd = params.get("cwd") or globals().get("repo")
run = subprocess.Popen(
    [sys.executable if a == "{python}" else a for a in params["argv"]] + ["--", "sleep", "60"],
    cwd=cwd,
    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
)
def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\\0")
    except OSError:
        return []
def descendants(pid):
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{here}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{here}/task/{task}/children") as handle:
                    kids = [int(k) for k in handle.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found
main = params["main"].encode()
launcher, deadline = None, time.monotonic() + 60
while launcher is None and time.monotonic() < deadline and run.poll() is None:
    for pid in descendants(run.pid):
        if cmdline(pid)[3:5] == [b"-c", main] and any(
            cmdline(kid)[:2] == [b"sleep", b"60"] for kid in descendants(pid)
        ):
            launcher = pid
    time.sleep(0.02)
if launcher is not None:
    os.kill(launcher, getattr(signal, params.get("signal", "SIGKILL")))
out, err = run.communicate(timeout=90)
killed = [run.returncode, out.decode(), err.decode(), launcher is not None]
"""


def _check_lost(code: int, out: str, err: str, found: bool) -> None:
    """A sandbox failure, told as such: never the launcher's status as the command's."""
    assert found, "the launcher was never seen running the command"
    records = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "Traceback" not in err, err
    assert code == 128, (code, out, err)
    assert records.get("error-code") == "sandbox-failed", out
    assert "exit" not in records, out
    assert err.splitlines() == [
        "fatal: the sandbox failed: its launcher ended (killed by SIGKILL) "
        "before it said how 'sleep' ended"
    ], err


@pytest.mark.hostile
def test_a_launcher_killed_before_it_reported_fails_the_run(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    params = {"argv": [str(ISOPATCH), "--porcelain", "--sandbox"], "cwd": str(repo), "main": MAIN}
    done = subprocess.run(
        [sys.executable, "-c", KILL_THE_LAUNCHER + "print(json.dumps(killed))", json.dumps(params)],
        env=dict(env), capture_output=True, timeout=180, check=True,
    )  # fmt: skip
    _check_lost(*json.loads(done.stdout))
    assert repo_state(repo, env) == before


@pytest.mark.hostile
def test_a_launcher_that_stops_serving_still_ends_on_timeout(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    argv = [str(ISOPATCH), "--porcelain", "--sandbox", "--timeout", "2"]
    params = {"argv": argv, "cwd": str(repo), "main": MAIN, "signal": "SIGSTOP"}
    done = subprocess.run(
        [sys.executable, "-c", KILL_THE_LAUNCHER + "print(json.dumps(killed))", json.dumps(params)],
        env=dict(env), capture_output=True, timeout=180, check=True,
    )  # fmt: skip
    code, out, err, found = json.loads(done.stdout)
    records = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert found, "the launcher was never seen running the command"
    assert (code, records.get("exit")) == (124, "124"), (code, out, err)
    assert "error: the command timed out after 2 seconds" in err.splitlines(), err
    assert "Traceback" not in err, err
    assert repo_state(repo, env) == before


#: As uid 65534: :data:`KILL_THE_LAUNCHER`, then a run bounded to one
#: process (``RLIMIT_NPROC``: the launcher's fork for the command refused).
AS_NOBODY = (
    KILL_THE_LAUNCHER
    + """
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--max-processes", "1",
     "--", "sh", "-c", "exit 3"],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=90)
print(json.dumps({"killed": killed,
                  "bounded": [done.returncode, done.stdout.decode(), done.stderr.decode()]}))
"""
)


@pytest.mark.hostile
def test_a_lost_launcher_fails_the_run_as_an_unprivileged_user(env) -> None:
    params = {"argv": ["{python}", "-m", "git_isopatch", "--porcelain", "--sandbox"]}
    params["main"] = MAIN
    with run_as_nobody(env, AS_NOBODY, json.dumps(params)) as seen:
        _check_lost(*seen["killed"])
        code, out, err = seen["bounded"]
    records = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "Traceback" not in err, err
    assert code == 126, (code, out, err)
    assert records.get("exit") == "126", out
    assert records.get("command-error") == "cannot run 'sh': Resource temporarily unavailable", out
