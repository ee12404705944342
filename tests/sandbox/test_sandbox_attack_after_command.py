"""A hostile command in the sandbox leaves, in its worktree, what
git-isopatch's own git runs after it: a nested repository with a clean
filter, a gitlink for it in the worktree's own index and a
``.gitmodules``.  The look at changed submodules in extraction (``git
status --ignore-submodules=none``) recurses into it and runs the filter
(design: "there is one boundary, not a stronger one for the command and a
weaker one after it").  The filter must run inside the command's
namespaces, like the command:

- it cannot delete the objects of the user's repository (it sees them
  copy-on-write);
- nothing it starts outlives the run: a process left to change the mode of
  a tracked file of the user's checkout after git-isopatch has exited is
  gone;
- it cannot reach the user's terminal multiplexer (``tmux send-keys`` on
  the server's socket types into the user's shell).

Real bubblewrap, real git, a real tmux server; as root and as the
unprivileged uid 65534.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: Plants the nested repository ``sub`` whose filter runs ``$FILTER_DOES``
#: (a shell line; ``$C``, ``$MARKS``, ``$VICTIM`` and ``$TMUX_SOCKET`` hold
#: what they held when it was planted), after it wrote the PID namespace
#: it runs in to ``$PROOF/pidns`` (really writable: ``--allow-write``), with
#: a gitlink and a ``.gitmodules``, so that git-isopatch's submodule look
#: recurses into it.
PLANT = textwrap.dedent(
    """\
    set -e
    C=$(git rev-parse --path-format=absolute --git-common-dir)
    WHERE="readlink /proc/self/ns/pid >> '$PROOF/pidns'"
    export C
    mkdir sub
    cd sub
    git init -q
    echo one > f
    git add f
    git -c user.name=a -c user.email=a@b.invalid commit -q -m s
    printf "#!/bin/sh\\nC='%s' MARKS='%s' VICTIM='%s' TMUX_SOCKET='%s'\\n%s\\n%s\\ncat\\n" \\
        "$C" "$MARKS" "${VICTIM-}" "${TMUX_SOCKET-}" "$WHERE" "$FILTER_DOES" > "$PWD/.git/clean"
    chmod +x .git/clean
    git config filter.x.clean "$PWD/.git/clean"
    echo '* filter=x' > .gitattributes
    echo two > f
    cd ..
    git update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub"
    printf '[submodule "sub"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules
    """
)

#: What the filter does in each attack (``$C``: the repository's git directory).
DELETE_OBJECTS = 'find "$C/objects" -type f -exec rm -f {} +; echo ran >> "$MARKS/filter"'
#: Leaves a process that changes the mode of the user's README later.
OUTLIVE = (
    'setsid sh -c \'sleep 3; chmod 600 "$VICTIM"; echo ran >> "$MARKS/later"\' '
    "</dev/null >/dev/null 2>&1 &"
)
#: Types a command into the user's tmux.
TYPE_INTO_TMUX = (
    'tmux -S "$TMUX_SOCKET" send-keys "touch $MARKS/typed" Enter; echo ran >> "$MARKS/filter"'
)


def _planted(repo: Path, tmp_path: Path, env, does: str, **more: str):
    marks, proof = tmp_path / "marks", tmp_path / "proof"
    marks.mkdir()
    proof.mkdir()
    before = repo_state(repo, env)
    run_env = {**env, "MARKS": str(marks), "PROOF": str(proof), "FILTER_DOES": does, **more}
    run = isopatch(
        "--porcelain", "--sandbox", "--allow-write", proof, "--", "sh", "-c", PLANT,
        cwd=repo, env=run_env,
    )  # fmt: skip
    assert "Traceback" not in run.err, run.err
    _ran_inside(proof)
    return repo, marks, before, run


def _ran_inside(proof: Path) -> None:
    """The filter ran, each time in a PID namespace that is not this one's."""
    seen = (proof / "pidns").read_text().split()
    assert seen and os.readlink("/proc/self/ns/pid") not in seen, seen


@contextlib.contextmanager
def _tmux_server(socket: Path, env: dict[str, str]) -> Iterator[None]:
    """A real tmux server, its socket at ``socket``, for the time of the
    block: the user's terminal a command must not type into."""
    tmux = ["tmux", "-S", str(socket)]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "24", "sh"], env=env, check=True)
    try:
        yield
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False, capture_output=True)


def _looked_at_the_submodule(run) -> None:
    """The submodule look ran (inside): it named the planted repository."""
    assert "submodule 'sub' has changes that are not in the patch" in run.err, run.err


def test_a_filter_of_a_planted_repository_cannot_delete_the_users_objects(
    env, make_repo, tmp_path: Path
) -> None:
    """It deletes them in the command's view, where git-isopatch's own git
    then finds no base (the run fails as extraction fails): the user's
    repository keeps them."""
    repo, marks, before, run = _planted(make_repo(), tmp_path, env, DELETE_OBJECTS)
    assert run.returncode in (0, 128), run.err
    git("cat-file", "-e", "HEAD^{tree}", cwd=repo, env=env)
    git("fsck", "--no-progress", cwd=repo, env=env)
    after = repo_state(repo, env)
    if run.returncode:  # the worktree is kept for inspection
        del before["worktree list"], after["worktree list"]
    assert after == before
    assert list(marks.iterdir()) == []  # it ran in the namespace: its mark was discarded


def test_nothing_a_planted_filter_starts_outlives_the_run(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    victim = repo / "README"
    mode = victim.stat().st_mode
    _, marks, _, run = _planted(repo, tmp_path, env, OUTLIVE, VICTIM=str(victim))
    _looked_at_the_submodule(run)
    time.sleep(5)  # longer than the leftover waits
    assert victim.stat().st_mode == mode
    assert list(marks.iterdir()) == []


@pytest.mark.hostile
@pytest.mark.needs("tmux")
@pytest.mark.parametrize("in_home", [False, True], ids=["beside", "in-the-home"])
def test_a_planted_filter_cannot_type_into_the_users_tmux(
    env, make_repo, tmp_path: Path, in_home: bool
) -> None:
    """The server's socket beside the repository, or in the home (``tmux
    -S ~/.tmux.sock``; an ssh ``ControlPath`` under ``~/.ssh``, a
    ``~/.gnupg`` agent alike): git-isopatch's own git sees the real home
    (its global configuration is there), where a unix socket can be
    connected to; the filter the command planted must reach neither."""
    socket = (Path(env["HOME"]) if in_home else tmp_path) / "tmux.sock"
    with _tmux_server(socket, env):
        _, marks, _, run = _planted(
            make_repo(), tmp_path, env, TYPE_INTO_TMUX, TMUX_SOCKET=str(socket)
        )
        _looked_at_the_submodule(run)
        time.sleep(1)  # what the pane's shell would run, it runs by then
        assert not (marks / "typed").exists()
        assert list(marks.iterdir()) == []


#: As uid 65534: the delete-objects attack; prints whether the repository
#: still has its objects, the run's exit and stderr, and the marks left.
AS_NOBODY = """
marks = os.path.join(os.environ["HOME"], "marks")
proof = os.path.join(os.environ["HOME"], "proof")
victim = os.path.join(os.environ["HOME"], "victim")
os.mkdir(marks)
os.mkdir(proof)
with open(victim, "w") as handle:
    handle.write("mine\\n")
mode = os.stat(victim).st_mode
env = {**os.environ, "MARKS": marks, "PROOF": proof, "VICTIM": victim, "FILTER_DOES": sys.argv[1]}
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--allow-write", proof,
     "--", "sh", "-c", sys.argv[2]],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, env=env, timeout=120)
time.sleep(5)  # longer than a leftover waits
intact = subprocess.run(["git", "-C", repo, "fsck", "--no-progress"], capture_output=True)
with open(os.path.join(proof, "pidns")) as handle:
    seen = handle.read().split()
print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "seen": seen,
                  "mine": os.readlink("/proc/self/ns/pid"), "intact": intact.returncode == 0,
                  "mode": os.stat(victim).st_mode == mode, "marks": os.listdir(marks)}))
"""


@pytest.mark.parametrize("does", [DELETE_OBJECTS, OUTLIVE], ids=["delete-objects", "outlive"])
def test_a_planted_filter_is_confined_as_an_unprivileged_user(env, does: str) -> None:
    """As uid 65534: the filter cannot delete the objects, and nothing it
    starts outlives the run (a file of the user's keeps its mode)."""
    with run_as_nobody(env, "import time\n" + AS_NOBODY, does, PLANT) as seen:
        assert "Traceback" not in seen["err"], seen["err"]
        assert seen["code"] in (0, 128), seen["err"]
        assert seen["seen"] and seen["mine"] not in seen["seen"], seen
        assert seen["intact"] and seen["mode"], seen
        assert seen["marks"] == [], seen


def test_git_runs_inside_with_the_objects_the_command_added(env, make_repo) -> None:
    """The command's own commit (its objects in the copy-on-write layer)
    and a file it staged are read by the extraction inside: the patch
    holds the change against the base."""
    repo = make_repo({"a": "a\n"})
    script = "echo b > a && git add a && git commit -q -m mine && echo c > new && git add new"
    run = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    patch = Path(fields["patch"]).read_text()
    assert "+b" in patch and "+c" in patch, patch


#: Tries every socket named ``tmux.sock`` the command can find under
#: ``/run`` (where the real folders are bound for our own git) and in the
#: home: typing a command into the user's tmux.
COMMAND_TYPES_INTO_TMUX = (
    'for s in "$HOME/tmux.sock" $(find /run -name tmux.sock 2>/dev/null); do'
    ' tmux -S "$s" send-keys "touch $MARKS/typed" Enter; done; echo n > new.txt'
)


@pytest.mark.hostile
@pytest.mark.needs("tmux")
def test_the_command_cannot_reach_the_real_home_bound_for_our_own_git(
    env, make_repo, tmp_path: Path
) -> None:
    """The real home is bound read-only inside the namespaces, for our own
    git after the command; a read-only bind still lets a unix socket
    answer.  The command must not find it: the user's tmux, its socket in
    the home, receives nothing."""
    marks = tmp_path / "marks"
    marks.mkdir()
    socket = Path(env["HOME"]) / "tmux.sock"
    with _tmux_server(socket, env):
        run = isopatch(
            "--porcelain", "--sandbox", "--", "sh", "-c", COMMAND_TYPES_INTO_TMUX,
            cwd=make_repo(), env={**env, "MARKS": str(marks)},
        )  # fmt: skip
        assert run.returncode == 0, run.err
        assert "+++ b/new.txt" in Path(run.fields()["patch"]).read_text()
        time.sleep(1)  # what the pane's shell would run, it runs by then
        assert list(marks.iterdir()) == []


@pytest.mark.hostile
@pytest.mark.needs("tmux")
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")
def test_a_planted_filter_cannot_type_into_a_tmux_in_a_home_holding_a_mount(
    env, make_repo, tmp_path: Path
) -> None:
    """The same, in a home that holds a mount of the system's (a tmpfs):
    the kernel refuses an overlay over such a folder.  Our own git's view
    never binds it (the socket would answer there): it shows the real
    contents of the layers the folder is split into, none holding a mount,
    through overlays, and the folder's own files without their sockets."""
    from repo_helpers import tmpfs

    home = Path(env["HOME"])
    (home / "mnt").mkdir()
    socket = home / "tmux.sock"
    with tmpfs(home / "mnt", "1m"), _tmux_server(socket, env):
        _, marks, _, run = _planted(
            make_repo(), tmp_path, env, TYPE_INTO_TMUX, TMUX_SOCKET=str(socket)
        )
        _looked_at_the_submodule(run)
        time.sleep(1)  # what the pane's shell would run, it runs by then
        assert not (marks / "typed").exists()
