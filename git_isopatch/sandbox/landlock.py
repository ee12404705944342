"""Kernel confinement of the command: Linux Landlock for writes, a network
namespace for the network, a seccomp filter for terminal input injection
(design: "What it does", ``--sandbox``).

What the command and every process it starts may do under the sandbox:

- read and execute anything, as before;
- write (create, change, truncate, remove, rename) only beneath the worktree,
  its ``TMPDIR``, its admin folder (``$GIT_COMMON_DIR/worktrees/<id>``), the
  object store (``objects/``: git cannot be told to put new objects
  elsewhere), git-lfs's store (``lfs/``: its clean filter writes there), the
  terminal and ``/dev/null``-like devices, the files its standard streams
  are, and the ``allow_write`` paths;
- reach no network but a loopback of its own, unless ``allow_network``;
- push no input into any terminal (``TIOCSTI``, ``TIOCLINUX``), below.

Everything else of the user's repository (the work tree, ``refs/``,
``packed-refs``, ``config``, hooks, the stash, the main ``HEAD`` and index)
and of the system (``$HOME``, folders brought in with ``--link``) cannot be
written.  The rules are on inodes, so a symbolic link the command plants in
its worktree and writes through reaches a denied target and fails; ``setsid``
or a double fork keep the restriction (a Landlock domain is inherited and
cannot be left).

Landlock (Documentation/userspace-api/landlock.rst in the kernel): the
ruleset is built in the parent (paths opened ``O_PATH``), the child only calls
``prctl(PR_SET_NO_NEW_PRIVS)`` and ``landlock_restrict_self`` between fork
and exec.  The handled access rights follow the kernel's ABI: ABI 3 (Linux
6.2, ``TRUNCATE``) is the least we accept, because without it ``truncate(2)``
of any file stays allowed; ``REFER`` (ABI 2) lets the command move files
within its writable folders; ``IOCTL_DEV`` (ABI 5) is handled when offered
(device ioctls only on the terminal and the harmless devices); the scopes of
ABI 6 (signals and abstract unix sockets to processes outside the sandbox)
are used when offered.

Terminal input injection: a seccomp filter (seccomp(2), ``SECCOMP_RET_ERRNO``)
makes ``ioctl(fd, TIOCSTI, ...)`` and ``ioctl(fd, TIOCLINUX, ...)`` fail with
``EPERM``, whatever the file descriptor.  ``TIOCSTI`` pushes bytes into a
terminal's input as if typed, so that the user's shell runs them after the
command ends (where ``dev.tty.legacy_tiocsti`` is 1, on the command's own
terminal; for a process with ``CAP_SYS_ADMIN``, such as root without a user
namespace, on any terminal); ``TIOCLINUX`` pastes a console's selection.
Landlock cannot stop either: its ``IOCTL_DEV`` right is checked when a file is
opened, so a terminal the command inherits as a standard stream keeps every
ioctl, and taking it from ``/dev/tty`` and ``/dev/pts`` would deny ``TCGETS``
(``isatty``) and the terminal settings of editors and pagers too.  The filter
compares only the low 32 bits of the request, as the kernel's ``unsigned int
cmd`` does, and knows the architecture's compatibility calls (i386 and x32 on
x86_64, ARM on aarch64...); a call of an architecture it does not know fails.

The network: the child enters a new network namespace (``unshare``
``CLONE_NEWNET``; where the process lacks ``CAP_SYS_ADMIN``, through a new
user namespace that maps the user and group to themselves, so that file
ownership and git's ownership checks are unchanged) and brings its own ``lo``
up with ``SIOCSIFFLAGS``.

Layering: this module knows nothing of the command line; it is a function
of (worktree, admin folder, common git directory, TMPDIR, writable paths,
network allowed).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import UNAVAILABLE as UNAVAILABLE
from ..errors import unavailable
from . import availability
from .netns import enter_network_namespace as enter_network_namespace
from .seccomp import _BPF_JEQ_K as _BPF_JEQ_K
from .seccomp import _BPF_LD_W_ABS as _BPF_LD_W_ABS
from .seccomp import _BPF_RET_K as _BPF_RET_K
from .seccomp import _PR_SET_SECCOMP as _PR_SET_SECCOMP
from .seccomp import _SECCOMP_MODE_FILTER as _SECCOMP_MODE_FILTER
from .seccomp import _SECCOMP_RET_ALLOW as _SECCOMP_RET_ALLOW
from .seccomp import _SECCOMP_RET_ERRNO as _SECCOMP_RET_ERRNO
from .seccomp import REFUSED_IOCTLS as REFUSED_IOCTLS
from .seccomp import TIOCLINUX as TIOCLINUX
from .seccomp import TIOCSTI as TIOCSTI
from .seccomp import _SockFilter as _SockFilter
from .seccomp import _SockFprog as _SockFprog
from .seccomp import install_seccomp
from .seccomp import seccomp_filter as seccomp_filter

#: The stable error-code of every failure of this module.

# Generic syscall numbers (include/uapi/asm-generic/unistd.h), the same on
# x86_64 and aarch64 and every architecture that gained the calls after 5.13.
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_ARCHITECTURES = ("x86_64", "aarch64", "riscv64", "loongarch64", "ppc64le", "s390x")

_PR_SET_NO_NEW_PRIVS = 38
_LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
_LANDLOCK_RULE_PATH_BENEATH = 1

# include/uapi/linux/landlock.h
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

#: The least ABI accepted: below it ``truncate(2)`` cannot be denied.
MINIMUM_ABI = 3

#: Every right that changes the file system (ABI 1), denied unless a rule
#: allows it.  Reading and executing are not handled: reads stay allowed.
_WRITE_RIGHTS_ABI1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
)
#: Rights that make sense on a file (not a folder) in a rule.
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

#: What the object store needs for git to add objects: new fan-out folders,
#: temporary files written, linked or renamed into place and removed (git's
#: ``finalize_object_file``), packs and ``objects/info``.  Not ``REMOVE_DIR``.
_OBJECT_RIGHTS = FS_MAKE_DIR | FS_MAKE_REG | FS_WRITE_FILE | FS_REMOVE_FILE | FS_TRUNCATE | FS_REFER

#: Devices every command may open for writing: the terminal, the null-like
#: devices.  Folders (``/dev/pts``) cover the terminals in them.
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _syscall(number: int, *args: object) -> int:
    result = _c().syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(result)


def landlock_abi() -> int:
    """The Landlock ABI version the running kernel offers.

    Returns:
        1 or more; 0 when the kernel has no Landlock (``ENOSYS``, an
        unknown architecture) or it is disabled at boot (``EOPNOTSUPP``).
    """
    system = os.uname()  # platform.uname() would import platform: some ms a run
    if system.sysname != "Linux" or system.machine not in _ARCHITECTURES:
        return 0
    try:
        return _syscall(
            _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
        )  # fmt: skip
    except OSError:
        return 0


class SandboxPolicy(NamedTuple):
    """What a sandboxed command may write, and whether it reaches the network.

    Attributes:
        worktree: the worktree's top folder.
        admin_dir: its admin folder, ``$GIT_COMMON_DIR/worktrees/<id>``.
        common_dir: the repository's common git directory (its
            ``objects/`` is writable).
        tmpdir: the private temporary folder the command gets as ``TMPDIR``.
        allow_write: more files or folders the command may write (each
            must exist).
        allow_network: leave the network as it is (no namespace).
    """

    worktree: str
    admin_dir: str
    common_dir: str
    tmpdir: str
    allow_write: tuple[str, ...] = ()
    allow_network: bool = False

    def writable(self) -> list[str]:
        """Paths of the rules, in order; the object store is separate."""
        return [self.worktree, self.tmpdir, self.admin_dir, *self.allow_write]


def _handled(abi: int) -> int:
    handled = _WRITE_RIGHTS_ABI1 | FS_REFER | FS_TRUNCATE
    if abi >= 5:
        handled |= FS_IOCTL_DEV
    return handled


def _scoped(abi: int) -> int:
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


def _create_ruleset(abi: int) -> int:
    attr = _RulesetAttr(_handled(abi), 0, _scoped(abi))
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8  # older kernels want the old size
    return _syscall(
        _SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )


def _add_rule(ruleset: int, path: str, rights: int, *, must_exist: bool = True) -> None:
    """Allow ``rights`` beneath ``path`` (a file gets only file rights).

    Raises:
        OSError: ``path`` cannot be opened (``must_exist``), or the kernel
            refuses the rule.
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        if must_exist:
            raise
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        attr = _PathBeneathAttr(rights, fd)
        _syscall(
            _SYS_LANDLOCK_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


def _stream_targets(fds: Iterable[int]) -> list[str]:
    """The files behind standard streams the command gets, as paths that
    open them (``/proc/self/fd/N``): writing ``/dev/stderr`` reopens them."""
    paths = []
    for fd in fds:
        with contextlib.suppress(OSError):
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
                paths.append(f"/proc/self/fd/{fd}")
    return paths


@dataclass
class Sandbox:
    """A ruleset made in the parent, to enforce in the child.

    Use :meth:`confine` as (part of) ``preexec_fn``; :meth:`close` when the
    command has started (the ruleset fd is close-on-exec, so the command
    never holds it).
    """

    ruleset_fd: int
    allow_network: bool
    uid: int = field(default_factory=os.geteuid)
    gid: int = field(default_factory=os.getegid)
    seccomp: bytes = field(default_factory=seccomp_filter)

    def confine(self) -> None:
        """In the child, between fork and exec: network namespace (unless
        allowed), then no new privileges, the seccomp filter that refuses
        terminal input injection, then the Landlock domain.

        Raises:
            OSError: a step failed; the command must not be run.
        """
        if not self.allow_network:
            enter_network_namespace(self.uid, self.gid)
        if _c().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
        install_seccomp(self.seccomp)
        _syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(self.ruleset_fd), ctypes.c_uint32(0))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.ruleset_fd)


def _probe_child(action: Callable[[], None]) -> str | None:
    """Run ``action`` in a forked child; the child's error message, or
    ``None`` when it succeeded."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        status = 0
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            with contextlib.suppress(OSError):
                os.write(write_end, message.encode("utf-8", "replace")[:4000])
            status = 1
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode("utf-8", "replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return message or "the check failed"


def check_available(*, allow_network: bool, work_tree: str | None = None) -> int:
    """Check, before anything is made, that the sandbox can be enforced
    here: Landlock ABI :data:`MINIMUM_ABI` or later, a child that can be
    restricted, and (without ``allow_network``) a network namespace; the
    ABI in use, kept for later runs, outside ``work_tree`` (:mod:`.availability`).

    Raises:
        IsopatchError: ``sandbox-unavailable``, naming what is missing.
    """
    check = f"landlock-{'net' if allow_network else 'nonet'}"
    kept = availability.recall(check, work_tree=work_tree)
    if not isinstance(kept, int) or kept < MINIMUM_ABI:
        kept = _check_available(allow_network)
        availability.remember(check, kept, work_tree=work_tree)
    return kept


def _check_available(allow_network: bool) -> int:
    abi = landlock_abi()
    if abi == 0:
        raise unavailable("the kernel offers no Landlock (Linux 6.2 or later, 'landlock' in lsm=)")
    if abi < MINIMUM_ABI:
        raise unavailable(
            f"Landlock ABI {abi} cannot deny truncation; ABI {MINIMUM_ABI} (Linux 6.2) is needed"
        )
    try:
        ruleset = _create_ruleset(abi)
    except OSError as exc:
        raise unavailable(f"cannot create a Landlock ruleset: {exc.strerror}") from None
    uid, gid = os.geteuid(), os.getegid()
    sandbox = Sandbox(ruleset, allow_network, uid, gid)
    try:
        failure = _probe_child(sandbox.confine)
    finally:
        sandbox.close()
    if failure is not None:
        raise unavailable(failure)
    return abi


def prepare(
    policy: SandboxPolicy, *, abi: int | None = None, streams: Sequence[int] = ()
) -> Sandbox:
    """Build the ruleset for ``policy`` (in the parent).

    Args:
        policy: what may be written.
        abi: the ABI :func:`check_available` returned (asked again if ``None``).
        streams: file descriptors the command gets as its standard streams;
            the regular files and devices behind them stay writable by path.

    Returns:
        a :class:`Sandbox` to :meth:`~Sandbox.confine` in the child and
        :meth:`~Sandbox.close` after.
    Raises:
        IsopatchError: ``sandbox-unavailable``: Landlock is missing, or a
            path of the policy cannot be opened (named in the message).
    """
    abi = landlock_abi() if abi is None else abi
    if abi < MINIMUM_ABI:
        raise unavailable(f"Landlock ABI {abi or 'none'}; ABI {MINIMUM_ABI} (Linux 6.2) is needed")
    everything = _handled(abi)
    try:
        ruleset = _create_ruleset(abi)
    except OSError as exc:
        raise unavailable(f"cannot create a Landlock ruleset: {exc.strerror}") from None
    path = ""
    try:
        for path in policy.writable():
            _add_rule(ruleset, path, everything)
        for name, rights in (("objects", _OBJECT_RIGHTS & everything), ("lfs", everything)):
            path = os.path.join(policy.common_dir, name)  # lfs/: git-lfs's clean filter
            _add_rule(ruleset, path, rights, must_exist=name == "objects")
        device_rights = (FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV) & everything
        for path in (*DEVICES, *_stream_targets(streams)):
            _add_rule(ruleset, path, device_rights, must_exist=False)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.close(ruleset)
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise unavailable(f"cannot allow writes to '{path}': {reason}") from None
    return Sandbox(ruleset, policy.allow_network)
