"""A network namespace with only its own loopback, entered by the calling
process (:mod:`.landlock`: git-isopatch's own git calls in the worktree).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import socket
import struct


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def _bring_loopback_up() -> None:
    """``ip link set lo up`` in the current network namespace, without ``ip``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _unshare(flags: int) -> None:
    if _libc().unshare(ctypes.c_int(flags)) != 0:
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
