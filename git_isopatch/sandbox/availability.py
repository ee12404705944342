"""What the sandbox's availability check found, kept for the runs after
(:func:`.namespaces_check.check_available`).

The check starts a process (bubblewrap making its namespaces): some 15 to
70 ms a run on a loaded machine.  Its answer depends only on the machine and on
the process that asks, so it is kept in ``$XDG_RUNTIME_DIR/git-isopatch/``
(the user's own folder, emptied at each boot) under a key of everything it
depends on (:func:`context`): the kernel's boot, the user, the namespaces
git-isopatch runs in, the sysctls that allow user namespaces, the seccomp
filters and no-new-privileges of this process, and the ``bwrap`` that
would be found (its path and file).  A change of any of them asks again.
Without ``$XDG_RUNTIME_DIR`` (or where it is not the user's own 0700
folder), as in most CI jobs and containers, the answer goes to
``$XDG_CACHE_HOME/git-isopatch/`` (default ``~/.cache``), the XDG
specification's place for what can be made again; the boot in its key
keeps an answer of an earlier boot from counting.  Where the
``git-isopatch`` folder found is not the user's own of mode 0700 (or is a
symbolic link), or lies in the work tree of the repository the run is
for (a repository of dotfiles whose work tree is ``$HOME``: git-isopatch
never writes the user's work tree), nothing is kept: every run checks.
The folder is opened once, and what is in it is read and written through
that descriptor alone (:func:`_open_folder`).

An answer that turns out wrong (bubblewrap fails to set up where it was
kept as working) is forgotten (:func:`forget`) and the run fails as
``--sandbox`` does where namespaces cannot be had.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Mapping
from typing import Any

from .layers import inside

#: The file, in ``$XDG_RUNTIME_DIR/git-isopatch/`` (or the cache's, :func:`_folder`).
FILE_NAME = "sandbox-checks.json"

#: The sysctls that decide whether an unprivileged user may make user
#: namespaces (upstream, Debian's, Ubuntu's AppArmor restriction).
SYSCTLS = (
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_unconfined",
)

#: The lines of ``/proc/self/status`` that decide what this process may do.
STATUS_LINES = (b"NoNewPrivs:", b"Seccomp:", b"Seccomp_filters:", b"CapEff:", b"CapBnd:")


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).decode("ascii", "replace").strip()
    except OSError:
        return None


def file_id(path: str | None) -> list[object] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def context(environ: Mapping[str, str] | None = None) -> str:
    """Everything the checks' answers depend on, as one string."""
    environ = os.environ if environ is None else environ
    status = (_read("/proc/self/status") or "").encode()
    lines = [line for line in status.splitlines() if line.startswith(STATUS_LINES)]
    namespaces = []
    for kind in ("user", "mnt", "pid", "net", "ipc", "cgroup"):
        with contextlib.suppress(OSError):
            namespaces.append(os.readlink(f"/proc/self/ns/{kind}"))
    found = shutil.which("bwrap", path=environ.get("PATH"))
    value = {
        "boot": _read("/proc/sys/kernel/random/boot_id"),
        "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
        "namespaces": namespaces,
        "sysctls": [_read(path) for path in SYSCTLS],
        "status": [line.decode("ascii", "replace") for line in lines],
        "bwrap": file_id(found),
    }
    return json.dumps(value, sort_keys=True)


def kept_folder(work_tree: str | None = None) -> str | None:
    """The folder the answers of this process are kept in (:func:`_open_folder`),
    by its real path, or ``None``: the sandbox keeps it read-only for the
    command (:func:`.run_policy.run_policy`)."""
    fd = _open_folder(os.environ, work_tree)
    if fd is None:
        return None
    try:
        return _real_path(fd)
    finally:
        os.close(fd)


#: How the folder is opened: itself never a symbolic link, once; what is in
#: it is reached through that descriptor only, never by its path again.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _folder(environ: Mapping[str, str]) -> str | None:
    """``$XDG_RUNTIME_DIR/git-isopatch``, when ``$XDG_RUNTIME_DIR`` is an
    absolute folder of this user's, mode 0700; else
    ``$XDG_CACHE_HOME/git-isopatch`` (``$XDG_CACHE_HOME`` when it is
    absolute, as the XDG specification wants, else ``$HOME/.cache``);
    ``None`` when neither can be named."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and _private(runtime):
        return os.path.join(runtime, "git-isopatch")
    cache = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        home = environ.get("HOME", "")
        if not os.path.isabs(home):
            return None
        cache = os.path.join(home, ".cache")
    return os.path.join(cache, "git-isopatch")


def _open_folder(
    environ: Mapping[str, str], work_tree: str | None = None, *, create: bool = False
) -> int | None:
    """A descriptor of the folder of :func:`_folder` (made with mode 0700
    if missing and ``create``), or ``None`` unless it is this user's own
    folder of mode 0700, itself not a symbolic link (a folder another user
    can write, or one reached through a link, could hold an answer that
    leaves the command unconfined), and outside ``work_tree`` (looked at
    by name before anything is made, and by what was opened).  Opened
    once: a folder swapped for a link after a look at it by name would
    lead the reads and writes elsewhere."""
    folder = _folder(environ)
    if folder is None or _inside(folder, work_tree):
        return None
    if create and not os.path.lexists(folder):
        with contextlib.suppress(OSError):
            os.makedirs(folder, mode=0o700)
    try:
        fd = os.open(folder, _FOLDER_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        own = st.st_uid == os.geteuid() and not st.st_mode & 0o077
        if own and not _inside(_real_path(fd), work_tree):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _real_path(fd: int) -> str:
    """Where the folder open as ``fd`` is now."""
    return os.readlink(f"/proc/self/fd/{fd}")


def _inside(folder: str, work_tree: str | None) -> bool:
    if work_tree is None:
        return False
    return inside(os.path.realpath(folder), os.path.realpath(work_tree))


def _private(folder: str) -> bool:
    """``folder`` is an absolute folder of this user's, mode 0700."""
    if not os.path.isabs(folder):
        return False
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


_loaded: dict[str, dict[str, Any]] | None = None


def _load(folder: int) -> dict[str, dict[str, Any]]:
    """The answers kept in the folder open as ``folder`` (read once)."""
    global _loaded
    if _loaded is None:
        _loaded = {}
        with contextlib.suppress(OSError, ValueError):
            # a FIFO (or a link to one) there would block the run for ever
            flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
            with open(os.open(FILE_NAME, flags, dir_fd=folder), "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return _loaded
                value = json.loads(handle.read(65536))
            if isinstance(value, dict):
                _loaded = {k: v for k, v in value.items() if isinstance(v, dict)}
    return _loaded


def recall(
    check: str, environ: Mapping[str, str] | None = None, work_tree: str | None = None
) -> Any:
    """The answer kept for ``check`` in this context, or ``None``
    (``work_tree``: of the run's repository, where nothing is kept)."""
    environ = os.environ if environ is None else environ
    folder = _open_folder(environ, work_tree)
    if folder is None:
        return None
    try:
        kept = _load(folder).get(check)
    finally:
        os.close(folder)
    if kept is None or kept.get("context") != context(environ):
        return None
    return kept.get("answer")


def remember(
    check: str,
    answer: Any,
    environ: Mapping[str, str] | None = None,
    work_tree: str | None = None,
) -> None:
    """Keep ``answer`` (JSON) for ``check`` in this context (best effort;
    ``work_tree``: of the run's repository, where nothing is kept)."""
    environ = os.environ if environ is None else environ
    folder = _open_folder(environ, work_tree, create=True)
    if folder is None:
        return
    try:
        kept = dict(_load(folder))
        kept[check] = {"context": context(environ), "answer": answer}
        _store(folder, kept)
    finally:
        os.close(folder)


def forget(environ: Mapping[str, str] | None = None) -> None:
    """Forget every kept answer (one turned out wrong)."""
    global _loaded
    environ = os.environ if environ is None else environ
    _loaded = {}
    folder = _open_folder(environ)
    if folder is not None:
        with contextlib.suppress(OSError):
            os.unlink(FILE_NAME, dir_fd=folder)
        os.close(folder)


def _store(folder: int, kept: dict[str, dict[str, Any]]) -> None:
    """Replace the kept answers in the folder open as ``folder`` with
    ``kept``, through a temporary file of its own."""
    global _loaded
    _loaded = kept
    temporary = f".checks-{os.getpid()}-{os.urandom(6).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(temporary, flags, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(kept, handle)
            os.replace(temporary, FILE_NAME, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
