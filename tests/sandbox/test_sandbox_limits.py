"""A sandboxed command has bounds on its processes and its memory
(design: "What it does"; sandbox/limits.py): a real fork bomb and a
runaway allocation, under small bounds the tests set, are stopped with an
``error:`` naming the bound, their patch still captured, nothing left
running and no cgroup left behind.  As root a cgroup of the run's own
bounds them (here cgroup v1's ``pids`` and ``memory``); an unprivileged
user without a delegated cgroup gets rlimits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, isopatch
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: Forks until the kernel refuses, and never ends on its own: only the
#: bound (or the safety --timeout) stops it.
FORK_BOMB = """\
import os
open("bomb.txt", "w").write("forked\\n")
while True:
    try:
        os.fork()
    except OSError:
        pass
"""

#: Allocates a MiB at a time, touching it, for ever.
RUNAWAY = """\
open("grew.txt", "w").write("grew\\n")
held = []
while True:
    held.append(b"x" * (1 << 20))
"""


def _cgroups_left(since: float) -> list[str]:
    """The groups a run made since ``since`` whose git-isopatch has ended
    (``git-isopatch-<pid>-<random>``): left behind.  Runs of others going
    on meanwhile have groups of their own, which are not."""
    found = []
    for top in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        for path, folders, _ in os.walk(top):
            for folder in folders:
                if not folder.startswith("git-isopatch-"):
                    continue
                where = os.path.join(path, folder)
                with contextlib.suppress(OSError):
                    pid = int(folder.split("-")[2])
                    if os.stat(where).st_mtime >= since and not os.path.exists(f"/proc/{pid}"):
                        found.append(where)
            if path.count(os.sep) > 6:
                folders.clear()
    return found


def _bounded_run(repo: Path, env, *options: str, program: str):
    """The run, bounded whatever happens: a --timeout of its own, and the
    helper's."""
    started = time.monotonic()
    run = isopatch(
        "--sandbox", "--porcelain", "--timeout", "60", *options, "--", "python3", "-c", program,
        cwd=repo, env=env, timeout=120,
    )  # fmt: skip
    return run, time.monotonic() - started


def _needs_cgroups() -> None:
    if os.geteuid() != 0:
        pytest.skip("a cgroup of the run's own needs root here")


def test_a_fork_bomb_is_stopped_at_the_process_bound(env, make_repo) -> None:
    _needs_cgroups()
    repo = make_repo()
    since = time.time() - 1
    run, took = _bounded_run(repo, env, "--max-processes", "64", program=FORK_BOMB)
    fields = run.fields()
    assert fields.get("limit-reached") == "processes", run.err
    assert "timed-out" not in fields and took < 50
    assert run.returncode == 137
    errors = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: the command reached its limit of 64 processes and was stopped "
        "(--max-processes, isopatch.maxProcesses)"
    ]
    assert "A bomb.txt" in run.out  # its patch, captured all the same
    assert _cgroups_left(since) == []


def test_a_runaway_allocation_is_stopped_at_the_memory_bound(env, make_repo) -> None:
    _needs_cgroups()
    repo = make_repo()
    since = time.time() - 1
    run, took = _bounded_run(repo, env, "--max-memory", "64m", program=RUNAWAY)
    fields = run.fields()
    assert fields.get("limit-reached") == "memory", run.err
    assert took < 50
    assert "error: the command reached its memory limit of 64 MiB and was stopped" in run.err
    assert "A grew.txt" in run.out
    assert _cgroups_left(since) == []


def test_within_its_bounds_a_command_runs_as_before(env, make_repo) -> None:
    repo = make_repo()
    script = "import subprocess; [subprocess.run(['true']) for _ in range(20)]"
    run, _ = _bounded_run(
        repo, env, "--max-processes", "64", "--max-memory", "256m", program=script
    )
    assert run.returncode == 0, run.err
    assert "limit-reached" not in run.fields()


def test_the_bounds_come_from_the_configuration_and_bad_values_are_refused(env, make_repo) -> None:
    _needs_cgroups()
    repo = make_repo()
    run = isopatch(
        "--sandbox", "--porcelain", "--timeout", "60", "--", "python3", "-c", FORK_BOMB,
        cwd=repo, env=env, git_options=("-c", "isopatch.maxProcesses=48"), timeout=120,
    )  # fmt: skip
    assert run.fields().get("limit-reached") == "processes", run.err
    assert "limit of 48 processes" in run.err
    bad = isopatch("--", "true", cwd=repo, env=env, git_options=("-c", "isopatch.maxMemory=lots"))
    assert bad.returncode == 128
    assert bad.err.splitlines()[0] == "fatal: bad config value for 'isopatch.maxMemory'"
    usage = isopatch("--max-processes", "many", "--", "true", cwd=repo, env=env)
    assert usage.returncode == 129 and "--max-processes" in usage.err


#: Prints the cgroups of the namespace's first process (the launcher), of
#: itself and of a child it forks, each as ``/proc/<pid>/cgroup`` says.
MEMBERS = """\
import json, os
said = {"launcher": open("/proc/1/cgroup").read(), "command": open("/proc/self/cgroup").read()}
read, write = os.pipe()
if os.fork() == 0:
    os.write(write, open("/proc/self/cgroup").read().encode())
    os._exit(0)
os.close(write)
said["child"] = os.read(read, 65536).decode()
os.wait()
print(json.dumps(said))
"""


def _bounding_groups(text: str) -> dict[str, str]:
    """The folder of each hierarchy that bounds processes or memory (v1:
    ``pids``, ``memory``; else the v2 one, ``""``), in ``/proc/<pid>/cgroup``."""
    found = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    v1 = {name: path for name, path in found.items() if name in ("pids", "memory")}
    return v1 or {"": found.get("", "")}


def test_the_launcher_and_all_it_starts_live_in_the_runs_groups(env, make_repo) -> None:
    """The launcher moves itself into the run's groups before the command
    starts (on v1 by its one thread: sandbox/limits.py): it, the command
    and the command's children are all bounded there."""
    _needs_cgroups()
    repo = make_repo()
    run = isopatch(
        "--sandbox", "--porcelain", "--max-processes", "64", "--max-memory", "256m",
        "--", "python3", "-c", MEMBERS, cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    said = json.loads(Path(run.fields()["stdout"]).read_text())
    groups = {who: _bounding_groups(text) for who, text in said.items()}
    assert groups["launcher"] == groups["command"] == groups["child"]
    for path in groups["launcher"].values():
        assert os.path.basename(path).startswith("git-isopatch-"), said["launcher"]


def _groups_of(pid: int) -> list[str]:
    """The groups the git-isopatch of process ``pid`` made."""
    found = []
    for top in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        for path, folders, _ in os.walk(top):
            found += [
                os.path.join(path, f) for f in folders if f.startswith(f"git-isopatch-{pid}-")
            ]
            if path.count(os.sep) > 6:
                folders.clear()
    return found


def _members(group: str) -> list[str]:
    with contextlib.suppress(OSError):
        return Path(group, "cgroup.procs").read_text().split()
    return []


@pytest.mark.hostile
def test_the_groups_of_a_killed_run_go_with_a_later_run(env, make_repo) -> None:
    """SIGKILL ends git-isopatch before it removes its groups: they stay
    (empty once bubblewrap's namespace died with it) until a later run
    finds them, old and their process gone, and removes them."""
    _needs_cgroups()
    repo = make_repo()
    killed = subprocess.Popen(
        [str(ISOPATCH), "--sandbox", "--timeout", "60", "--", "sleep", "60"],
        cwd=repo, env=dict(env), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(
            lambda: any(_members(g) for g in _groups_of(killed.pid)), what="the run never started"
        )
        left = _groups_of(killed.pid)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    wait_until(
        lambda: not any(_members(g) for g in left), what="the killed run's namespace lives on"
    )
    assert left and all(os.path.isdir(g) for g in left)  # left behind
    an_hour_ago = time.time() - 3600
    for group in left:
        os.utime(group, (an_hour_ago, an_hour_ago))
    later = isopatch("--sandbox", "--", "true", cwd=repo, env=env)
    assert later.returncode == 0, later.err
    assert [g for g in left if os.path.isdir(g)] == []


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


@pytest.mark.hostile
def test_a_left_group_whose_pid_was_given_again_goes_with_a_later_run(env, make_repo) -> None:
    """A killed run's group is named by its PID and start time: once the
    PID names another process (this one, here), the group still goes;
    a group of a process still running (this one, at its own start time)
    stays."""
    _needs_cgroups()
    repo = make_repo()
    running = subprocess.Popen(
        [str(ISOPATCH), "--sandbox", "--timeout", "60", "--", "sleep", "60"],
        cwd=repo, env=dict(env), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(
            lambda: any(_members(g) for g in _groups_of(running.pid)), what="the run never started"
        )
        parents = {os.path.dirname(g) for g in _groups_of(running.pid)}
    finally:
        running.send_signal(signal.SIGTERM)
        running.wait()
    me, started = os.getpid(), _start_time(os.getpid())
    reused = [os.path.join(p, f"git-isopatch-{me}-{int(started) + 7}-0badf00d") for p in parents]
    alive = [os.path.join(p, f"git-isopatch-{me}-{started}-0000beef") for p in parents]
    try:
        an_hour_ago = time.time() - 3600
        for group in reused + alive:
            os.mkdir(group)
            os.utime(group, (an_hour_ago, an_hour_ago))
        later = isopatch("--sandbox", "--", "true", cwd=repo, env=env)
        assert later.returncode == 0, later.err
        assert [g for g in reused if os.path.isdir(g)] == []
        assert all(os.path.isdir(g) for g in alive)
    finally:
        for group in reused + alive:
            with contextlib.suppress(OSError):
                os.rmdir(group)


#: As uid 65534 (no cgroup it may write here): a command that forks
#: children which wait, until the kernel refuses, and says how many.
NOBODY = """\
program = '''
import os, time
n = 0
try:
    while n < 500:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
'''
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--sandbox", "--json", "--timeout", "60",
     "--max-processes", "32", "--", sys.executable, "-c", program],
    cwd=repo, capture_output=True, timeout=120,
)
print(json.dumps({"status": done.returncode, "out": done.stdout.decode(),
                  "err": done.stderr.decode()}))
"""


def test_an_unprivileged_user_gets_the_process_bound_as_an_rlimit(env) -> None:
    with run_as_nobody(env, NOBODY) as said:
        assert said["status"] == 0, said["err"]
        result = json.loads(said["out"])
        forked = int(Path(result["stdout"]).read_text())
    assert 0 < forked < 32
