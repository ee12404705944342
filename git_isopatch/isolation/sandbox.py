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
import fcntl
import os
import platform
import socket
import stat
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .errors import IsopatchError

#: The stable error-code of every failure of this module.
UNAVAILABLE = "sandbox-unavailable"

# Generic syscall numbers (include/uapi/asm-generic/unistd.h), the same on
# x86_64 and aarch64 and every architecture that gained the calls after 5.13.
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_ARCHITECTURES = ("x86_64", "aarch64", "riscv64", "loongarch64", "ppc64le", "s390x")

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
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

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


# Terminal requests that inject input (include/uapi/asm-generic/ioctls.h; the
# same values on every architecture of _SECCOMP_ARCHITECTURES).
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
#: ioctl requests the command can never make (:func:`seccomp_filter`).
REFUSED_IOCTLS = (TIOCSTI, TIOCLINUX)

# include/uapi/linux/audit.h and each architecture's syscall table: per
# machine, the (AUDIT_ARCH_*, ioctl numbers) of every ABI its processes can
# call the kernel with.  x32 (``__X32_SYSCALL_BIT`` | 514) shares x86_64's
# AUDIT_ARCH; ``int 0x80`` from a 64-bit process is i386.
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_ARCHITECTURES: dict[str, tuple[tuple[int, tuple[int, ...]], ...]] = {
    "x86_64": ((0xC000003E, (16, _X32_SYSCALL_BIT | 514)), (0x40000003, (54,))),
    "aarch64": ((0xC00000B7, (29,)), (0x40000028, (54,))),
    "riscv64": ((0xC00000F3, (29,)), (0x400000F3, (29,))),
    "loongarch64": ((0xC0000102, (29,)),),
    "ppc64le": ((0xC0000015, (54,)), (0x80000015, (54,)), (0x00000014, (54,))),
    "s390x": ((0x80000016, (54,)), (0x00000016, (54,))),
}
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
# Classic BPF (include/uapi/linux/filter.h).
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_RET_K = 0x06
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
_SECCOMP_NR = 0
_SECCOMP_ARCH = 4
_SECCOMP_ARG1 = 24


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


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
    if platform.system() != "Linux" or platform.machine() not in _ARCHITECTURES:
        return 0
    try:
        return _syscall(
            _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
        )  # fmt: skip
    except OSError:
        return 0


@dataclass(frozen=True)
class SandboxPolicy:
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


def seccomp_filter(machine: str | None = None, byteorder: str = sys.byteorder) -> bytes:
    """The classic BPF program that refuses :data:`REFUSED_IOCTLS`.

    For each ABI of ``machine`` (``platform.machine()``): an ``ioctl``
    whose request's low 32 bits are ``TIOCSTI`` or ``TIOCLINUX`` returns
    ``EPERM``; every other call is allowed.  A call of an architecture not
    in the table returns ``EPERM`` whatever it is.

    Returns:
        the program as ``struct sock_filter`` records (8 bytes each).
    Raises:
        KeyError: ``machine`` is not one the sandbox supports.
    """
    abis = _SECCOMP_ARCHITECTURES[machine or platform.machine()]
    # The low half of the 64-bit args[1], where the kernel's unsigned int cmd is.
    request = _SECCOMP_ARG1 + (4 if byteorder == "big" else 0)
    deny = _SECCOMP_RET_ERRNO | errno.EPERM
    # (code, k, jump-if-true label, jump-if-false label) and label positions.
    code: list[tuple[int, int, str | None, str | None]] = []
    code.append((_BPF_LD_W_ABS, _SECCOMP_ARCH, None, None))
    labels: dict[str, int] = {}
    for index, (arch, _) in enumerate(abis):
        code.append((_BPF_JEQ_K, arch, f"abi{index}", None))
    code.append((_BPF_RET_K, deny, None, None))  # an architecture we do not know
    for index, (_, numbers) in enumerate(abis):
        labels[f"abi{index}"] = len(code)
        code.append((_BPF_LD_W_ABS, _SECCOMP_NR, None, None))
        for position, number in enumerate(numbers):
            last = position == len(numbers) - 1
            code.append((_BPF_JEQ_K, number, "request", "allow" if last else None))
    labels["request"] = len(code)
    code.append((_BPF_LD_W_ABS, request, None, None))
    for position, refused in enumerate(REFUSED_IOCTLS):
        last = position == len(REFUSED_IOCTLS) - 1
        code.append((_BPF_JEQ_K, refused, "deny", "allow" if last else None))
    labels["allow"] = len(code)
    code.append((_BPF_RET_K, _SECCOMP_RET_ALLOW, None, None))
    labels["deny"] = len(code)
    code.append((_BPF_RET_K, deny, None, None))
    program = bytearray()
    for at, (op, k, true, false) in enumerate(code):
        jt = labels[true] - at - 1 if true else 0
        jf = labels[false] - at - 1 if false else 0
        program += bytes(_SockFilter(op, jt, jf, k))
    return bytes(program)


def _install_seccomp(program: bytes) -> None:
    """Install ``program`` (from :func:`seccomp_filter`) on the calling
    thread; ``PR_SET_NO_NEW_PRIVS`` must be set.

    Raises:
        OSError: the kernel refused it (no ``CONFIG_SECCOMP_FILTER``).
    """
    count = len(program) // ctypes.sizeof(_SockFilter)
    records = (_SockFilter * count).from_buffer_copy(program)
    prog = _SockFprog(count, records)
    if _c().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot install a seccomp filter: {os.strerror(code)}")


def _unavailable(message: str) -> IsopatchError:
    return IsopatchError(
        UNAVAILABLE,
        f"--sandbox is not available: {message}",
        hint="\"Sandbox\" in 'git isopatch --help' says what it needs",
    )


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


def _bring_loopback_up() -> None:
    """``ip link set lo up`` in the current network namespace, without ``ip``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _unshare(flags: int) -> None:
    if _c().unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_network_namespace(uid: int, gid: int) -> str:
    """Move the calling process into a new network namespace with only its
    own loopback, up.

    Tries ``CLONE_NEWNET`` alone (needs ``CAP_SYS_ADMIN``), then a new user
    namespace with it, mapping ``uid``/``gid`` to themselves
    (user_namespaces(7): ``setgroups`` is denied first, as an unprivileged
    ``gid_map`` requires).

    Returns:
        ``"netns"`` or ``"userns"``: the way that worked.
    Raises:
        OSError: neither worked, or ``lo`` could not be brought up; the
            message names what failed.
    """
    try:
        _unshare(_CLONE_NEWNET)
        way = "netns"
    except OSError as direct:
        try:
            _unshare(_CLONE_NEWUSER | _CLONE_NEWNET)
        except OSError as user:
            raise OSError(
                user.errno,
                f"cannot make a network namespace ({direct.strerror}) "
                f"nor a user namespace for one ({user.strerror})",
            ) from None
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
        way = "userns"
    try:
        _bring_loopback_up()
    except OSError as exc:
        message = f"cannot bring up the loopback interface: {exc.strerror}"
        raise OSError(exc.errno, message) from None
    return way


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
        _install_seccomp(self.seccomp)
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


def check_available(*, allow_network: bool) -> int:
    """Check, before anything is made, that the sandbox can be enforced
    here: Landlock ABI :data:`MINIMUM_ABI` or later, a child that can be
    restricted, and (without ``allow_network``) a network namespace.

    Returns:
        the Landlock ABI version in use.
    Raises:
        IsopatchError: ``sandbox-unavailable``, naming what is missing.
    """
    abi = landlock_abi()
    if abi == 0:
        raise _unavailable("the kernel offers no Landlock (Linux 6.2 or later, 'landlock' in lsm=)")
    if abi < MINIMUM_ABI:
        raise _unavailable(
            f"Landlock ABI {abi} cannot deny truncation; ABI {MINIMUM_ABI} (Linux 6.2) is needed"
        )
    try:
        ruleset = _create_ruleset(abi)
    except OSError as exc:
        raise _unavailable(f"cannot create a Landlock ruleset: {exc.strerror}") from None
    uid, gid = os.geteuid(), os.getegid()
    sandbox = Sandbox(ruleset, allow_network, uid, gid)
    try:
        failure = _probe_child(sandbox.confine)
    finally:
        sandbox.close()
    if failure is not None:
        raise _unavailable(failure)
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
        raise _unavailable(f"Landlock ABI {abi or 'none'}; ABI {MINIMUM_ABI} (Linux 6.2) is needed")
    everything = _handled(abi)
    try:
        ruleset = _create_ruleset(abi)
    except OSError as exc:
        raise _unavailable(f"cannot create a Landlock ruleset: {exc.strerror}") from None
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
        raise _unavailable(f"cannot allow writes to '{path}': {reason}") from None
    return Sandbox(ruleset, policy.allow_network)
