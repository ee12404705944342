"""The pool and the sandbox: a sandboxed run goes over a base tree, never
into the pool (nothing of it needs resetting: its layer is discarded);
what it committed is in its patch, its objects lived in the discarded
layer.  An unconfined run is pooled only when nothing it started runs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from repo_helpers import git, isopatch, repo_state

#: The name (argv[0]) only the leftover process of this test process has:
#: another worker, or another run of the suite on the machine, leaves its
#: own, which this one must neither count nor kill.
MARKER = f"isopatch-pool-leftover-{os.getpid()}"


def _run(repo: Path, env, *args: str):
    return isopatch("--porcelain", *args, cwd=repo, env=env, git_options=("-c", "isopatch.pool=1"))


def _pooled(repo: Path, env) -> list[str]:
    run = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    blocks = [dict(x.split(" ", 1) for x in b.splitlines()) for b in run.out.split("\n\n") if b]
    return [block["worktree"] for block in blocks if block["state"] == "pooled"]


def _state(repo: Path, env) -> dict:
    """The repository as the user sees it, the pooled worktree aside."""
    return {k: v for k, v in repo_state(repo, env).items() if k != "worktree list"}


def _leftovers() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            # argv[0] alone: the marker is also a word of the script that
            # git-isopatch (and bubblewrap, and sh) run, and they are no leftover
            if argv.split(b"\0", 1)[0] == MARKER.encode():
                found.append(int(name))
    return found


def test_a_sandboxed_run_that_commits_and_leaves_a_process_is_never_pooled(make_repo, env) -> None:
    repo = make_repo({"a.txt": "a\n"})
    before = _state(repo, env)
    script = (
        "pwd; echo b > b.txt; git add b.txt; git -c user.name=t -c user.email=t@t "
        "commit -qm inside; echo c > c.txt; "
        f"setsid sh -c 'exec -a {MARKER} sleep 300' </dev/null >/dev/null 2>&1 &"
    )
    first = _run(repo, env, "--sandbox", "--", "sh", "-c", script)
    assert first.returncode == 0, first.err
    patch = Path(first.fields()["patch"]).read_bytes()
    assert b"+++ b/b.txt" in patch and b"+++ b/c.txt" in patch
    assert _leftovers() == []
    assert _pooled(repo, env) == []
    assert _state(repo, env) == before
    # the next run, sandboxed, over the same base tree: clean, at the base
    second = _run(repo, env, "--sandbox", "--", "sh", "-c", "git status --porcelain; ls")
    assert second.returncode == 0, second.err
    assert Path(second.fields()["stdout"]).read_text().splitlines() == ["a.txt"]
    assert second.fields()["files"] == "0"
    # an unconfined one claims nothing and is pooled
    third = _run(repo, env, "--no-sandbox", "--", "sh", "-c", "pwd; echo d > d.txt")
    assert third.returncode == 0, third.err
    assert third.fields()["files"] == "1"
    assert _pooled(repo, env) == [Path(third.fields()["stdout"]).read_text().split("\n")[0]]
    git("fsck", "--strict", cwd=repo, env=env)
    assert _state(repo, env) == before


#: Leaves a daemon (double fork, a session of its own) that waits for the
#: next run to claim the worktree (its mark gone) and then writes in it.
#: The command ends once the daemon is in its own session (``started``):
#: before, the end of the command's process group could take it along.
WAITS_FOR_THE_NEXT_RUN = (
    "echo m > mark; "
    "(setsid sh -c 'touch started; while [ -e mark ]; do sleep 0.05; done; sleep 0.5; "
    f"echo planted > planted.txt; exec -a {MARKER} sleep 300' </dev/null >/dev/null 2>&1 &) & "
    "while [ ! -e started ]; do sleep 0.01; done; rm started"
)


def test_an_unconfined_run_that_leaves_a_process_is_not_pooled(make_repo, env) -> None:
    """An unconfined command leaves a process running (it forks twice and
    starts a session of its own, out of the command's process group) that
    waits for the next run to claim the worktree and writes there then:
    the worktree does not go back to the pool, so the next run, sandboxed,
    gets a fresh one and its patch holds only what its own command did."""
    repo = make_repo({"a.txt": "a\n"})
    try:
        first = _run(repo, env, "--no-sandbox", "--", "sh", "-c", WAITS_FOR_THE_NEXT_RUN)
        assert first.returncode == 0, first.err
        assert _pooled(repo, env) == []
        second = _run(repo, env, "--sandbox", "--", "sh", "-c", "sleep 1.5; echo b > b.txt")
        assert second.returncode == 0, second.err
        paths = [line for line in second.out.splitlines() if line.startswith("path ")]
        assert paths == ["path A b.txt"], second.out
    finally:
        for pid in _leftovers():
            os.kill(pid, 9)


def test_an_unconfined_run_whose_processes_all_ended_is_pooled(make_repo, env) -> None:
    """What the command started in the background and that ended before
    the run did leaves the worktree poolable."""
    repo = make_repo({"a.txt": "a\n"})
    script = "(setsid sh -c 'echo x > x.txt' </dev/null >/dev/null 2>&1 &) & sleep 0.5"
    first = _run(repo, env, "--no-sandbox", "--", "sh", "-c", script)
    assert first.returncode == 0, first.err
    assert len(_pooled(repo, env)) == 1


def _churning(spawn, threads: int) -> tuple[threading.Event, list[threading.Thread]]:
    """Threads that each start and join short-lived threads running
    ``spawn`` until the event is set."""
    done = threading.Event()

    def churn() -> None:
        while not done.is_set():
            thread = threading.Thread(target=spawn)
            thread.start()
            thread.join()

    churners = [threading.Thread(target=churn) for _ in range(threads)]
    for churner in churners:
        churner.start()
    return done, churners


def test_threads_that_come_and_go_are_not_taken_for_a_running_child() -> None:
    """A thread of git-isopatch that ends while the children are listed
    (a timer, a stream's copy: each thread has its own list in /proc)
    is not a process left running: no child, however the threads churn,
    is none (a worktree would otherwise leave the pool for nothing)."""
    from git_isopatch.sandbox.orphans import running

    done, churners = _churning(lambda: None, threads=6)
    try:
        said = [running() for _ in range(6000)]
    finally:
        done.set()
        for churner in churners:
            churner.join()
    assert not any(said), f"a running child seen {sum(said)} times of {len(said)}"


def test_a_child_whose_thread_ends_is_still_seen_running() -> None:
    """A thread that started a child and ends hands it to the main thread:
    however the threads that start children come and go, the youngest
    child, always running, is seen at every look."""
    import subprocess

    from git_isopatch.sandbox.orphans import running

    children: list[subprocess.Popen] = [subprocess.Popen(["sleep", "60"])]
    lock = threading.Lock()

    def start_child() -> None:
        child = subprocess.Popen(["sleep", "60"])
        with lock:
            children.append(child)
            if len(children) > 2:
                old = children.pop(0)
                old.kill()
                old.wait()

    done, churners = _churning(start_child, threads=2)
    try:
        said = [running() for _ in range(3000)]
    finally:
        done.set()
        for churner in churners:
            churner.join()
        for child in children:
            child.kill()
            child.wait()
    assert all(said), f"no running child seen {said.count(False)} times of {len(said)}"
