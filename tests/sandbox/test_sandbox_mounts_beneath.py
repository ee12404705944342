"""A mount beneath a copy-on-write folder (design: "What it does"; issue 19,
"Copy-on-write outside the worktree").

In the sandbox's user namespace every mount inherited from the machine is
locked, and the kernel refuses an overlay whose lower folder has a locked
mount inside ("overlayfs: failed to clone lowerpath").  Any mount under
``/tmp``, by any program, made every sandboxed run fail at set-up
("bubblewrap could not set up the sandbox") for as long as it was mounted:
the intermittent failure of the sandbox tests under ``pytest -n 2``, where
another test's bind mount or tmpfs sits under ``/tmp`` now and then.  A
temporary folder with a mount beneath becomes a private one showing its
files copy-on-write; another folder is split into its subfolders, each
copy-on-write.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_helpers import isopatch
from sandbox_helpers import run_as_nobody, run_wrapped

from git_isopatch.sandbox import layers, namespaces
from git_isopatch.sandbox.seccomp import seccomp_filter

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")


@contextlib.contextmanager
def tmpfs(where: Path) -> Iterator[Path]:
    """A small tmpfs mounted at ``where`` for the block."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _home_box(home: Path, work: Path, tmp_path: Path) -> namespaces.Namespaces:
    """The sandbox, prepared, of a command that writes ``work`` and whose
    ``home`` is copy-on-write."""
    bwrap = namespaces.find_bwrap()
    assert not isinstance(bwrap, str), bwrap
    policy = namespaces.NamespacePolicy(writable=(str(work),), copy_on_write=(str(home),))
    box = namespaces.Namespaces(bwrap, policy, str(tmp_path / "layers"), seccomp_filter())
    box.prepare()
    return box


def test_a_sandboxed_run_works_with_a_mount_under_its_temporary_folder(
    make_repo, env, tmp_path: Path
) -> None:
    """The hostile case: a mount under ``$TMPDIR`` and under the folder
    holding the checkout (both copy-on-write); the run still captures its
    patch, its writes outside are discarded and named, and bubblewrap's
    set-up does not fail."""
    repo = make_repo({"a.txt": "a\n"})
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "warm").write_text("warm\n")
    tmp = Path(env["TMPDIR"])
    with tmpfs(tmp / "mounted") as inner, tmpfs(tmp_path / "beside"):
        (inner / "theirs").write_text("theirs\n")
        script = (
            f"echo b > b.txt; echo t > {tmp}/mine; cat {tmp_path}/cache/warm; "
            f"echo new > {tmp_path}/cache/new; touch {inner}/theirs 2>/dev/null; "
            f"echo done"
        )
        run = isopatch("--sandbox", "--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        fields = run.out.splitlines()
        assert "files 1" in fields
        assert f"outside-write {tmp_path}/cache/new" in fields, run.out
        assert (inner / "theirs").read_text() == "theirs\n"
    assert not (tmp / "mine").exists()
    assert not (tmp_path / "cache" / "new").exists()
    stdout = Path(run.fields()["stdout"]).read_text()
    assert stdout == "warm\ndone\n"


def test_a_temporary_folder_with_a_mount_beneath_is_private(tmp_path: Path) -> None:
    """Private, and so is each subfolder on the way down to the mount; a
    copy-on-write folder inside it still gets its layer."""
    tmp, home, checkout = tmp_path / "tmp", tmp_path / "home", tmp_path / "tmp" / "src"
    for folder in (tmp / "x" / "m", home, checkout):
        folder.mkdir(parents=True)
    mounts = ["/", str(tmp / "x" / "m")]
    plan = layers.plan_layers([str(tmp), str(home), str(checkout)], [str(tmp)], mounts)
    assert plan == (
        layers.Layer(str(home)),
        layers.Layer(str(tmp), layers.PRIVATE),
        layers.Layer(str(tmp / "x"), layers.PRIVATE),
        layers.Layer(str(checkout)),
    )


def test_another_folder_with_a_mount_beneath_is_split_down_to_the_mount(tmp_path: Path) -> None:
    """Each folder on the way to the mount shows its own entries (a file,
    a link, the mount points of its subfolders' layers), never a socket or
    a FIFO."""
    home = tmp_path / "home"
    for name in ("a", "b/c", "b/d"):
        (home / name).mkdir(parents=True)
    (home / "file").write_text("x\n")
    (home / "link").symlink_to("file")
    os.mkfifo(home / "fifo")
    home.chmod(0o750)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(home / "b" / "sock"))
        mounts = ["/", str(home / "b" / "c")]
        plan = layers.plan_layers([str(home)], [], mounts)
    folders = (("folder", "c", ""), ("folder", "d", ""))
    assert plan == (
        layers.Layer(
            str(home),
            layers.SPLIT,
            mode=0o750,
            entries=(
                ("folder", "a", ""),
                ("folder", "b", ""),
                ("file", "file", ""),
                ("link", "link", "file"),
            ),
        ),
        layers.Layer(str(home / "a")),
        layers.Layer(str(home / "b"), layers.SPLIT, entries=folders),
        layers.Layer(str(home / "b" / "c")),
        layers.Layer(str(home / "b" / "d")),
    )


@pytest.mark.hostile
@pytest.mark.needs("tmux")
def test_a_socket_in_a_split_home_does_not_answer(tmp_path: Path) -> None:
    """Through the mechanism itself: ``$HOME`` with a tmpfs beneath it is
    split, and the user's tmux server, its socket in the home (``tmux -S
    ~/tmux.sock``), receives nothing from the command, which still reads
    the home's files and cannot write them."""
    home, work, marks = tmp_path / "home", tmp_path / "work", tmp_path / "marks"
    for folder in (home, work, marks):
        folder.mkdir()
    (home / ".gitconfig").write_text("[core]\n")
    tmux = ["tmux", "-S", str(home / "tmux.sock")]
    with tmpfs(home / "mnt"):
        subprocess.run([*tmux, "new-session", "-d", "sh"], check=True)
        try:
            box = _home_box(home, work, tmp_path)
            script = (
                f"cat {home}/.gitconfig; echo x >> {home}/.gitconfig;"
                f" tmux -S {home}/tmux.sock send-keys 'touch {marks}/typed' Enter; true"
            )
            done, _ = run_wrapped(box, script, work)
            time.sleep(1)  # what the pane's shell would run, it runs by then
            assert done.stdout == b"[core]\n", done.stderr
            assert (home / ".gitconfig").read_text() == "[core]\n"
            assert list(marks.iterdir()) == []
        finally:
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


def test_a_split_home_keeps_its_warm_caches_and_discards_writes(tmp_path: Path) -> None:
    """Through the mechanism itself: ``$HOME`` with a tmpfs beneath it
    reads as it is, a cache write is discarded and listed, the mount's
    file reads as it is and stays as it was."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".cache").mkdir(parents=True)
    (home / ".cache" / "warm").write_text("warm\n")
    work.mkdir()
    with tmpfs(home / "mnt") as mnt:
        (mnt / "data").write_text("data\n")
        box = _home_box(home, work, tmp_path)
        script = (
            f"cat {home}/.cache/warm {mnt}/data; echo new > {home}/.cache/new; "
            f"echo changed > {mnt}/data; echo ok > {work}/out"
        )
        done, status = run_wrapped(box, script, work)
        assert done.returncode == 0, done.stderr
        assert status.get("exit-code") == 0
        assert done.stdout == b"warm\ndata\n"
        assert (mnt / "data").read_text() == "data\n"
        written = box.outside_writes()
        assert str(home / ".cache" / "new") in written
        assert str(mnt / "data") in written
    assert (work / "out").read_text() == "ok\n"
    assert not (home / ".cache" / "new").exists()


#: Connects to the unix socket ``sys.argv[1]``: prints what happened.
CONNECT = (
    "import socket, sys\n"
    "c = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    "    c.connect(sys.argv[1]); print('answered')\n"
    "except OSError as exc:\n"
    "    print(type(exc).__name__)\n"
)


@pytest.mark.hostile
def test_a_socket_past_the_split_limit_does_not_answer(tmp_path: Path) -> None:
    """A home with a tmpfs beneath it and more subfolders than
    :data:`layers.MAX_SPLIT` (a crowded home is common): the subfolders
    past the limit are not layers of their own, yet a socket in one of
    them (a tmux server's, an ssh ``ControlPath``, a gpg agent's) must not
    answer the command any more than one in the first, nor one beside a
    second mount past the limit; their files still read as they are and
    cannot be written."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    last = _crowded_home(home)
    (last / "kept").write_text("kept\n")
    mounted = home / "zz"
    with contextlib.ExitStack() as stack:
        stack.enter_context(tmpfs(home / "mnt"))
        stack.enter_context(tmpfs(mounted / "inner"))
        stack.enter_context(_listening(last / "agent.sock"))
        stack.enter_context(_listening(mounted / "agent.sock"))
        box = _home_box(home, work, tmp_path)
        script = (
            f"cat {last}/kept; echo x >> {last}/kept 2>/dev/null;"
            f' python3 -c "$CONNECT" {last}/agent.sock;'
            f' python3 -c "$CONNECT" {mounted}/agent.sock'
        )
        done, _ = run_wrapped(box, script, work, env={**os.environ, "CONNECT": CONNECT})
    said = done.stdout.decode().splitlines()
    assert said == ["kept", "ConnectionRefusedError", "FileNotFoundError"], done.stderr
    assert (last / "kept").read_text() == "kept\n"


def test_past_the_split_limit_a_folder_holding_a_mount_is_still_split(tmp_path: Path) -> None:
    """Past the limit, a subfolder with no mount beneath is shown through an
    overlay of its own (not a layer); one with a mount beneath is split as
    before, down to the mount (itself read-only past the limit): the
    kernel refuses an overlay over it, and bound as it is, a socket in it
    would answer."""
    home = tmp_path / "home"
    last = _crowded_home(home)
    (home / "zz" / "inner").mkdir(parents=True)
    plan = layers.plan_layers([str(home)], [], ["/", str(home / "mnt"), str(home / "zz" / "inner")])
    top = plan[0]
    assert top.kind == layers.SPLIT
    assert (("overlaid", last.name, "") in top.entries) and (("folder", "zz", "") in top.entries)
    assert not [e for e in top.entries if e[0] not in ("folder", "overlaid")], top.entries
    assert plan[-1] == layers.Layer(
        str(home / "zz"), layers.SPLIT, entries=(("overlaid", "inner", ""),)
    )


def _crowded_home(home: Path) -> Path:
    """More subfolders in ``home`` than :data:`layers.MAX_SPLIT`: the last one."""
    names = [f"d{n:03}" for n in range(layers.MAX_SPLIT + 6)]
    for name in names:
        (home / name).mkdir(parents=True)
    return home / names[-1]


@contextlib.contextmanager
def _listening(path: Path) -> Iterator[socket.socket]:
    """A unix socket listening at ``path`` that anyone may connect to."""
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        path.chmod(0o777)
        listening.listen(1)
        yield listening


@pytest.mark.hostile
def test_a_run_in_a_crowded_home_holding_a_mount_reaches_no_socket(make_repo, env) -> None:
    """End to end: the command connects to a socket in the last subfolder
    of a crowded home holding a tmpfs; nothing answers, and the patch is
    captured."""
    home = Path(env["HOME"])
    last = _crowded_home(home)
    script = f'python3 -c "$CONNECT" {last}/agent.sock; echo n > new.txt'
    with tmpfs(home / "mnt"), _listening(last / "agent.sock"):
        run = isopatch(
            "--porcelain", "--sandbox", "--", "sh", "-c", script,
            cwd=make_repo(), env={**env, "CONNECT": CONNECT},
        )  # fmt: skip
    assert run.returncode == 0, run.err
    assert "+++ b/new.txt" in Path(run.fields()["patch"]).read_text()
    assert Path(run.fields()["stdout"]).read_text() == "ConnectionRefusedError\n"


#: As uid 65534, the same run: prints its exit, stderr and what the command said.
CROWDED_AS_NOBODY = """
last = os.path.join(os.environ["HOME"], sys.argv[1])
script = f'python3 -c "$CONNECT" {last}/agent.sock; echo n > new.txt'
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--", "sh", "-c", script],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120,
    env={**os.environ, "CONNECT": sys.argv[2]})
fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines() if " " in line)
with open(fields.get("stdout", os.devnull)) as handle:
    said = handle.read()
print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "said": said}))
"""


@pytest.mark.hostile
def test_a_crowded_home_holding_a_mount_reaches_no_socket_as_an_unprivileged_user(env) -> None:
    """As uid 65534 (an unprivileged user namespace), the same."""

    @contextlib.contextmanager
    def crowded(home: Path) -> Iterator[None]:
        last = _crowded_home(home)
        with tmpfs(home / "mnt"), _listening(last / "agent.sock"):
            yield

    name = f"d{layers.MAX_SPLIT + 5:03}"
    with run_as_nobody(env, CROWDED_AS_NOBODY, name, CONNECT, home_holds=crowded) as seen:
        assert seen["code"] == 0, seen["err"]
        assert seen["said"] == "ConnectionRefusedError\n", seen
