"""The seccomp filter of the sandbox (:mod:`.namespaces`; bubblewrap
installs it, ``--seccomp``): the command, all it starts, and git-isopatch's
own git inside the namespaces after it, cannot push input into a terminal
(``TIOCSTI``, ``TIOCLINUX``) nor reach the user's kernel keyrings
(``add_key``, ``request_key``, ``keyctl``: namespaces give no keyring of
its own, and the session keyring holds credentials; Docker's and
Flatpak's filters refuse them alike), on any ABI its processes can call
the kernel with.  And the filter that hands the command's renames to the
launcher (:func:`rename_supervision`, :mod:`.renames`).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import errno
import os
import struct
import sys

#: How a filter is installed on a thread (prctl(2)); the tests install
#: filters of their own with them.
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


# Terminal requests that inject input (include/uapi/asm-generic/ioctls.h; the
# same values on every architecture of _SECCOMP_ARCHITECTURES).
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
#: ioctl requests the command can never make (:func:`seccomp_filter`).
REFUSED_IOCTLS = (TIOCSTI, TIOCLINUX)

# include/uapi/linux/audit.h and each architecture's syscall table: per
# machine, for every ABI its processes can call the kernel with, its
# AUDIT_ARCH_*, its ioctl numbers and its add_key, request_key and keyctl
# numbers.  x32 (``__X32_SYSCALL_BIT`` | n) shares x86_64's AUDIT_ARCH;
# ``int 0x80`` from a 64-bit process is i386.
_X32_SYSCALL_BIT = 0x40000000
_X32 = _X32_SYSCALL_BIT
_GENERIC_KEYRING = (217, 218, 219)  # include/uapi/asm-generic/unistd.h
_SECCOMP_ARCHITECTURES: dict[str, tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]] = {
    "x86_64": (
        (0xC000003E, (16, _X32 | 514), (248, 249, 250, _X32 | 248, _X32 | 249, _X32 | 250)),
        (0x40000003, (54,), (286, 287, 288)),
    ),
    "aarch64": ((0xC00000B7, (29,), _GENERIC_KEYRING), (0x40000028, (54,), (309, 310, 311))),
    "riscv64": ((0xC00000F3, (29,), _GENERIC_KEYRING), (0x400000F3, (29,), _GENERIC_KEYRING)),
    "loongarch64": ((0xC0000102, (29,), _GENERIC_KEYRING),),
    "ppc64le": (
        (0xC0000015, (54,), (269, 270, 271)),
        (0x80000015, (54,), (269, 270, 271)),
        (0x00000014, (54,), (269, 270, 271)),
    ),
    "s390x": ((0x80000016, (54,), (278, 279, 280)), (0x00000016, (54,), (278, 279, 280))),
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
#: ``struct sock_filter``: __u16 code; __u8 jt; __u8 jf; __u32 k (native order).
SOCK_FILTER = struct.Struct("=HBBI")


def seccomp_filter(machine: str | None = None, byteorder: str = sys.byteorder) -> bytes:
    """The classic BPF program that refuses :data:`REFUSED_IOCTLS` and the
    keyring calls.

    For each ABI of ``machine`` (``os.uname().machine``): an ``ioctl``
    whose request's low 32 bits are ``TIOCSTI`` or ``TIOCLINUX``, and every
    ``add_key``, ``request_key`` and ``keyctl``, return ``EPERM``; every
    other call is allowed.  A call of an architecture not
    in the table returns ``EPERM`` whatever it is.

    Returns:
        the program as ``struct sock_filter`` records (8 bytes each).
    Raises:
        KeyError: ``machine`` is not one the sandbox supports.
    """
    abis = _SECCOMP_ARCHITECTURES[machine or os.uname().machine]
    # The low half of the 64-bit args[1], where the kernel's unsigned int cmd is.
    request = _SECCOMP_ARG1 + (4 if byteorder == "big" else 0)
    deny = _SECCOMP_RET_ERRNO | errno.EPERM
    # (code, k, jump-if-true label, jump-if-false label) and label positions.
    code = _by_architecture([arch for arch, _, _ in abis], deny)
    labels: dict[str, int] = {}
    for index, (_, ioctls, keyring) in enumerate(abis):
        labels[f"abi{index}"] = len(code)
        code.append((_BPF_LD_W_ABS, _SECCOMP_NR, None, None))
        for number in ioctls:
            code.append((_BPF_JEQ_K, number, "request", None))
        for position, number in enumerate(keyring):
            last = position == len(keyring) - 1
            code.append((_BPF_JEQ_K, number, "deny", "allow" if last else None))
    labels["request"] = len(code)
    code.append((_BPF_LD_W_ABS, request, None, None))
    for position, refused in enumerate(REFUSED_IOCTLS):
        last = position == len(REFUSED_IOCTLS) - 1
        code.append((_BPF_JEQ_K, refused, "deny", "allow" if last else None))
    labels["allow"] = len(code)
    code.append((_BPF_RET_K, _SECCOMP_RET_ALLOW, None, None))
    labels["deny"] = len(code)
    code.append((_BPF_RET_K, deny, None, None))
    return _assembled(code, labels)


def _by_architecture(
    abis: list[int], unknown: int
) -> list[tuple[int, int, str | None, str | None]]:
    """A filter's start: a jump to the label ``abi<n>`` for the n-th of
    ``abis`` (``AUDIT_ARCH_*``), ``unknown`` returned for any other."""
    code: list[tuple[int, int, str | None, str | None]] = [
        (_BPF_LD_W_ABS, _SECCOMP_ARCH, None, None)
    ]
    for index, arch in enumerate(abis):
        code.append((_BPF_JEQ_K, arch, f"abi{index}", None))
    code.append((_BPF_RET_K, unknown, None, None))
    return code


def _assembled(
    code: list[tuple[int, int, str | None, str | None]], labels: dict[str, int]
) -> bytes:
    """``code`` as ``struct sock_filter`` records, each jump's label made
    its distance."""
    program = bytearray()
    for at, (op, k, true, false) in enumerate(code):
        jt = labels[true] - at - 1 if true else 0
        jf = labels[false] - at - 1 if false else 0
        program += SOCK_FILTER.pack(op, jt, jf, k)
    return bytes(program)


#: Per machine: ``seccomp(2)``'s number, and for each ABI of
#: :data:`_SECCOMP_ARCHITECTURES` the numbers of its ``rename``,
#: ``renameat`` and ``renameat2`` (x32's among x86_64's); each ABI's
#: ``landlock_restrict_self`` follows (:data:`_LANDLOCK_RESTRICT_SELF`).
_RENAME_CALLS: dict[str, tuple[int, tuple[tuple[tuple[int, ...], ...], ...]]] = {
    "x86_64": (
        317,
        (((82, _X32 | 82), (264, _X32 | 264), (316, _X32 | 316)), ((38,), (302,), (353,))),
    ),
    "aarch64": (277, (((), (38,), (276,)), ((38,), (329,), (382,)))),
    "riscv64": (277, (((), (), (276,)), ((), (), (276,)))),
    "loongarch64": (277, (((), (), (276,)),)),
    "ppc64le": (358, (((38,), (293,), (357,)),) * 3),
    "s390x": (348, (((38,), (295,), (347,)),) * 2),
}
_SECCOMP_RET_USER_NOTIF = 0x7FC00000
#: ``landlock_restrict_self``: one number on every ABI (x32's with its bit).
_LANDLOCK_RESTRICT_SELF = 446


def rename_supervision(machine: str | None = None) -> tuple[int, bytes, dict[tuple[int, int], int]]:
    """What :mod:`.renames` needs to supervise a command's renames on
    ``machine``: ``seccomp(2)``'s number, the filter that sends every
    ``rename``, ``renameat``, ``renameat2`` and ``landlock_restrict_self``
    of every ABI to a listener (``SECCOMP_RET_USER_NOTIF``) and allows all
    else, and which call each ``(AUDIT_ARCH_*, number)`` is (0, 1, 2, 3:
    ``rename``, ``renameat``, ``renameat2``, ``landlock_restrict_self``:
    no process shows a Landlock domain, so the launcher learns of one
    as it is made).

    Raises:
        KeyError: ``machine`` is not one the sandbox supports.
    """
    machine = machine or os.uname().machine
    number, calls = _RENAME_CALLS[machine]
    abis = [arch for arch, _, _ in _SECCOMP_ARCHITECTURES[machine]]
    code = _by_architecture(abis, _SECCOMP_RET_ALLOW)
    labels: dict[str, int] = {}
    kinds = {}
    for index, (arch, numbers) in enumerate(zip(abis, calls, strict=True)):
        labels[f"abi{index}"] = len(code)
        code.append((_BPF_LD_W_ABS, _SECCOMP_NR, None, None))
        landlock = tuple(nr & _X32 | _LANDLOCK_RESTRICT_SELF for nr in numbers[2])
        known = [(kind, nr) for kind, nrs in enumerate((*numbers, landlock)) for nr in nrs]
        for position, (kind, nr) in enumerate(known):
            kinds[(arch, nr)] = kind
            last = position == len(known) - 1
            code.append((_BPF_JEQ_K, nr, "notify", "allow" if last else None))
    labels["allow"] = len(code)
    code.append((_BPF_RET_K, _SECCOMP_RET_ALLOW, None, None))
    labels["notify"] = len(code)
    code.append((_BPF_RET_K, _SECCOMP_RET_USER_NOTIF, None, None))
    return number, _assembled(code, labels), kinds


def program_pipe(program: bytes) -> int:
    """A pipe's read end holding ``program`` for ``--seccomp`` (bwrap reads
    it to its end, so each spawn needs its own), or the launcher's; made
    as large as ``program`` where a pipe holds less."""
    read_end, write_end = os.pipe()
    try:
        if len(program) >= 1 << 16:
            import fcntl

            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, len(program))
        os.write(write_end, program)
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end
