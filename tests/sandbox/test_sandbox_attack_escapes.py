"""A hostile command in the namespaces sandbox tries the ways out that do
not go through a path of the checkout (issue 19): the file system as
another process sees it (``/proc/1/root``, ``/proc/self/root``), a hard
link from the user's files into the writable worktree, a descriptor
inherited from git-isopatch or bubblewrap, an abstract unix socket of the
session, a nested user namespace, ``git config --global``, a process that
double-forks into a session of its own, and a signal to a process outside.
Each must fail or land in the discarded layer: the user's repository and
home stay bit-identical, nothing the command started outlives the run, and
the patch holds what it did in its worktree.

A repository whose path holds a space, a comma and a colon (bubblewrap's
overlay options are comma- and colon-separated) is confined as well.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state, tree_manifest

#: The argv[0] of the leftover the command starts, looked for in /proc.
SURVIVOR = "isopatch-attack-survivor"

PROBE = textwrap.dedent(
    """\
    import os, socket, subprocess, sys
    repo, home, abstract = sys.argv[1], sys.argv[2], sys.argv[3]

    def attempt(name, action):
        try:
            action()
        except Exception as exc:
            print("refused", name, type(exc).__name__)
        else:
            print("done", name)

    def append(path):
        with open(path, "a") as handle:
            handle.write("pwned\\n")

    attempt("proc-1-root", lambda: append(f"/proc/1/root{repo}/README"))
    attempt("proc-self-root", lambda: append(f"/proc/self/root{repo}/README"))
    attempt("hard-link", lambda: os.link(f"{repo}/README", "linked"))
    attempt("hard-link-config", lambda: os.link(f"{repo}/.git/config", "linked-config"))
    attempt("chmod", lambda: os.chmod(f"{repo}/README", 0o600))
    attempt("home", lambda: append(f"{home}/.profile"))

    def connect():
        peer = socket.socket(socket.AF_UNIX)
        peer.settimeout(2)
        peer.connect(b"\\0" + abstract.encode())
        print("heard", peer.recv(64))

    attempt("abstract-socket", connect)
    nested = subprocess.run(["unshare", "-U", "true"], capture_output=True)
    print("nested-userns", nested.returncode)
    config = subprocess.run(["git", "config", "--global", "user.name", "evil"])
    print("git-config-global", config.returncode)
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    print("pids", pids)
    attempt("kill-parent", lambda: os.kill(int(sys.argv[4]), 0))
    for pid in ("1", "self"):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                print("fd", os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
    subprocess.run(["sh", "-c",
        "(setsid sh -c 'exec -a SURVIVOR sleep 120' </dev/null >/dev/null 2>&1 &) &"])
    with open("work.txt", "w") as handle:
        handle.write("done in the worktree\\n")
    """
).replace("SURVIVOR", SURVIVOR)


def _survivors() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    argv0 = handle.read().split(b"\0")[0]
            except OSError:
                continue
            if argv0 == SURVIVOR.encode():
                found.append(int(entry))
    return found


def _run_probe(repo: Path, env, tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    name = f"isopatch-attack-{os.getpid()}-{tmp_path.name}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(b"\0" + name.encode())
    listener.listen(1)
    try:
        argv = [sys.executable, probe, repo, env["HOME"], name, str(os.getpid())]
        run = isopatch("--sandbox", "--porcelain", "--", *argv, cwd=repo, env=env)
        left = _survivors()
    finally:
        listener.close()
        for pid in _survivors():
            os.kill(pid, 9)
    return run, left


def _check(repo: Path, env, tmp_path: Path) -> None:
    os.chmod(repo / "README", 0o644)
    before = repo_state(repo, env)
    home_before = tree_manifest(Path(env["HOME"]), exclude=())
    mode = os.stat(repo / "README").st_mode
    run, left = _run_probe(repo, env, tmp_path)
    assert run.returncode == 0, run.err
    out = Path(run.fields()["stdout"]).read_text()
    lines = out.splitlines()
    assert left == [], "a process the command started outlived the run"
    assert repo_state(repo, env) == before
    assert os.stat(repo / "README").st_mode == mode
    assert tree_manifest(Path(env["HOME"]), exclude=()) == home_before
    for name in ("hard-link", "hard-link-config", "abstract-socket", "kill-parent"):
        assert f"refused {name} " in out + " ", out
    assert "nested-userns 0" not in lines
    # the write was made, into the discarded layer; the namespace holds
    # the launcher (its init, not dumpable: its /proc/1/root is out of
    # reach) and the probe only
    assert "done proc-self-root" in lines, out
    assert "refused proc-1-root PermissionError" in lines, out
    assert "pids [1, 2]" in lines, out
    assert any(line.startswith("fd /") for line in lines), out
    private = os.path.dirname(run.fields()["stdout"])
    for line in lines:
        if line.startswith("fd /"):
            target = line[3:]
            assert target.startswith(("/dev/", "/proc/")) or target.startswith(private), line
    outside = [v for k, v in (line.split(" ", 1) for line in run.out.splitlines())
               if k == "outside-write"]  # fmt: skip
    assert any(p.endswith("README") for p in outside), run.out
    patch = Path(run.fields()["patch"])
    check = apply_to_clean_checkout(repo, "HEAD", patch, tmp_path / "check", env)
    assert (check / "work.txt").read_text() == "done in the worktree\n"
    assert not (check / "linked").exists()
    assert (check / "README").read_text() == "hello\n"


@pytest.mark.hostile
def test_ways_out_around_the_checkout_paths_fail(env, make_repo, tmp_path, no_leftovers) -> None:
    _check(make_repo({"README": "hello\n"}), env, tmp_path)


@pytest.mark.hostile
def test_a_repository_path_with_overlay_option_syntax_is_confined(
    env, tmp_path: Path, no_leftovers
) -> None:
    repo = tmp_path / "odd, lower=:x" / "repo"
    repo.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo, env=env)
    (repo / "README").write_text("hello\n")
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "base", cwd=repo, env=env)
    _check(repo, env, tmp_path)
