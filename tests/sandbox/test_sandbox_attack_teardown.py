"""The end of a sandboxed run (design: procedure step 7): once the patch is
taken, the namespaces end (``git_isopatch.sandbox.inside.Inside.end``: the
launcher kills and reaps every other process of them and says so), and
what those processes could write (the copy-on-write layers, the run's
worktree and its registration) is removed before bubblewrap's own exit
unmounts the layers' file systems (``Inside.wait`` lets it exit);
bubblewrap is waited for last, before its cgroups and the cache layer are
let go and the result is given.

A hostile command attacks that order:

- it leaves a process that keeps writing in its copy-on-write ``/tmp``
  and home, and holds files open there: nothing of the run is left;
- the user's Ctrl-C reaches git-isopatch while the layers of a command
  that filled its ``/tmp`` are being removed: nothing of the run is left;
- the namespaces' end itself returns only once no process of them but
  the launcher is left, and nothing runs inside after it.

Real bubblewrap, real git.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, git, isopatch

from git_isopatch.sandbox import namespaces, namespaces_check
from git_isopatch.sandbox.inside import Gone
from git_isopatch.sandbox.namespaces import NamespacePolicy, Namespaces
from git_isopatch.sandbox.seccomp import seccomp_filter

pytestmark = pytest.mark.hostile


def _marker() -> str:
    """A ``sleep`` argument no other process has."""
    return f"300.{os.getpid()}{time.monotonic_ns() % 10**9}"


def _running(marker: str) -> list[int]:
    """Processes whose argv holds ``marker`` (read from ``/proc``)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{name}/cmdline", "rb") as handle:
                if marker.encode() in handle.read().split(b"\0"):
                    found.append(int(name))
    return found


def _nothing_of_the_run_left(env: dict[str, str], repo: Path) -> None:
    """No private folder in ``TMPDIR`` (``-o`` and no captured output
    leave none), no worktree folder beside the checkout, no worktree
    registered but the checkout and the kept base tree."""
    assert list(Path(env["TMPDIR"]).glob("git-isopatch-*")) == []
    assert [p.name for p in repo.parent.iterdir() if ".isopatch-" in p.name] == []
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode().splitlines()
    tops = [line.split(" ", 1)[1] for line in listed if line.startswith("worktree ")]
    base_trees = str(repo / ".git" / "isopatch") + os.sep
    assert [top for top in tops[1:] if not top.startswith(base_trees)] == []


@contextlib.contextmanager
def _served(tmp_path: Path):
    """Namespaces serving programs (no command), their writable folder
    ``work``: ``(inside, work)``; closed and discarded after."""
    found = namespaces.find_bwrap()
    assert not isinstance(found, str), found
    namespaces_check.check_available(allow_network=False)
    work, layers = tmp_path / "work", tmp_path / "layers"
    work.mkdir()
    policy = NamespacePolicy(writable=(str(work),), copy_on_write=(), protected=())
    box = Namespaces(found, policy, str(layers), seccomp_filter())
    box.prepare()
    inside = box.serve()
    try:
        yield inside, work
    finally:
        inside.close()
        box.discard()


def test_the_end_returns_once_no_process_but_the_launcher_is_left(tmp_path: Path) -> None:
    """``Inside.end`` kills what still runs inside (a served program that
    left a process of its own), returns once it is reaped, and refuses
    to run anything more; ``Inside.wait`` then reaps bubblewrap."""
    marker = _marker()
    with _served(tmp_path) as (inside, work), open(os.devnull, "r+b") as devnull:
        null = devnull.fileno()
        inside.spawn(
            ["sh", "-c", f"setsid sleep {marker} & sleep {marker}"],
            env={"PATH": os.environ["PATH"]},
            cwd=str(work),
            fds=(null, null, null),
        )
        wait_until(lambda: len(_running(marker)) == 2, what="the served program and its own")
        inside.end()
        assert _running(marker) == []
        with pytest.raises(Gone):
            inside.spawn(["true"], env={}, cwd=None, fds=(null, null, null))
        inside.wait()
        assert inside.process.returncode is not None


def test_the_namespaces_stay_mounted_until_released(tmp_path: Path) -> None:
    """Once ``Inside.end`` has returned, the launcher waits, its namespaces
    and their mounts with it, until ``Inside.wait`` closes our end of its
    socket: what the run removes meanwhile is gone before the unmounts
    sync the layers' file system.  bubblewrap then ends, reaped."""
    with _served(tmp_path) as (inside, _):
        inside.end()
        with pytest.raises(subprocess.TimeoutExpired):
            inside.process.wait(timeout=1)
        inside.wait()
        assert inside.process.returncode == 0


#: Leaves a process that writes in the copy-on-write ``/tmp`` and home
#: without end, holding a file open in each, then exits 0.
LEAVE_WRITING = """\
setsid sh -c '
  exec 3>>/tmp/held 4>>"$HOME/held"
  i=0
  while :; do i=$((i+1)); mkdir -p "/tmp/w/$i"; : > "/tmp/w/$i/f"; echo $i >&3; echo $i >&4; done
' sleep-marker </dev/null >/dev/null 2>&1 &
while [ ! -e /tmp/w/20 ]; do sleep 0.01; done
"""


def test_a_process_left_writing_in_its_layers_leaves_nothing(env, make_repo) -> None:
    """The command's leftover writes in its layers until the namespaces
    end: the run succeeds, and neither the leftover nor anything of the
    run (layers, private folder, worktree, registration) is left."""
    repo = make_repo()
    marker = _marker()
    out = repo.parent / "out.patch"
    run = isopatch(
        "-q", "-o", out, "--sandbox", "--", "sh", "-c",
        LEAVE_WRITING.replace("sleep-marker", marker), cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert out.read_bytes() == b""
    assert _running(marker) == []
    _nothing_of_the_run_left(env, repo)


#: Fills the copy-on-write ``/tmp`` (a layer whose removal takes a while),
#: changes one tracked file, and exits 0.
FILL_TMP = """\
for d in $(seq 40); do mkdir /tmp/d$d; (cd /tmp/d$d && touch $(seq 150)); done
echo changed >> README
"""


def test_ctrl_c_while_the_sandbox_ends_leaves_nothing(env, make_repo) -> None:
    """A SIGINT that reaches git-isopatch once the patch is written, while
    the layers are removed and bubblewrap ends: the run ends promptly,
    with 128 + 2 or the command's 0, and leaves nothing of itself."""
    repo = make_repo()
    out = repo.parent / "out.patch"
    process = subprocess.Popen(
        [ISOPATCH, "-q", "-o", out, "--sandbox", "--", "sh", "-c", FILL_TMP],
        cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: out.exists() or process.poll() is not None, what="the patch")
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode in (0, 128 + signal.SIGINT), stderr
    assert b"Traceback" not in stderr
    _nothing_of_the_run_left(env, repo)
