"""The sandbox's seccomp filter (``git_isopatch.sandbox.seccomp``) run as
the kernel runs it, for every machine the sandbox knows, including those
the tests do not run on: terminal input injection is refused through every
ABI of the machine (``test_sandbox_terminal.py`` shows it in the real
kernel; ``test_sandbox_attack_keyring.py`` the keyring calls).
"""

from __future__ import annotations

import errno
import struct

import pytest

from git_isopatch.sandbox import seccomp


def _run_bpf(program: bytes, nr: int, arch: int, request: int, byteorder: str) -> int:
    """What the classic BPF ``program`` returns for a call (``nr``, ``arch``,
    args[1] = ``request``), as the kernel runs it on a ``byteorder`` machine:
    only the loads, jumps and returns the sandbox uses."""
    data = (
        nr.to_bytes(4, byteorder, signed=True)
        + arch.to_bytes(4, byteorder)
        + bytes(8)  # instruction_pointer
        + (3).to_bytes(8, byteorder)  # args[0]: a file descriptor
        + request.to_bytes(8, byteorder)
        + bytes(32)
    )
    records = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = records[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS: a 32-bit word of seccomp_data
            accumulator = int.from_bytes(data[k : k + 4], byteorder)
        elif code == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += jt if accumulator == k else jf
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected BPF instruction {code:#x}")
        pc += 1


#: Per machine: its byte order, and (AUDIT_ARCH, ioctl number) of each way
#: its processes call the kernel, from the kernel's syscall tables.
_IOCTL_CALLS = {
    "x86_64": ("little", [(0xC000003E, 16), (0xC000003E, 0x40000000 | 514), (0x40000003, 54)]),
    "aarch64": ("little", [(0xC00000B7, 29), (0x40000028, 54)]),
    "riscv64": ("little", [(0xC00000F3, 29), (0x400000F3, 29)]),
    "loongarch64": ("little", [(0xC0000102, 29)]),
    "ppc64le": ("little", [(0xC0000015, 54)]),
    "s390x": ("big", [(0x80000016, 54), (0x00000016, 54)]),
}


@pytest.mark.parametrize("machine", sorted(_IOCTL_CALLS))
def test_the_seccomp_filter_refuses_terminal_injection_on_every_architecture(machine) -> None:
    """TIOCSTI and TIOCLINUX are refused through every ABI of the machine,
    also with bits above 32 set in the request (the kernel drops them);
    other ioctls and other calls pass; an unknown architecture is refused.
    The filter is run here as the kernel runs it, for machines the tests do
    not run on; ``test_sandbox_terminal.py`` shows it in the real kernel."""
    byteorder, calls = _IOCTL_CALLS[machine]
    program = seccomp.seccomp_filter(machine, byteorder)
    eperm = 0x00050000 | errno.EPERM
    allow = 0x7FFF0000
    for arch, ioctl in calls:
        for refused in (seccomp.TIOCSTI, seccomp.TIOCLINUX):
            for request in (refused, (1 << 32) | refused, (0xFFFFFFFF << 32) | refused):
                assert _run_bpf(program, ioctl, arch, request, byteorder) == eperm
        for request in (0x5401, 0x5413, 0x5412 << 32, 0x5411):  # TCGETS, TIOCGWINSZ...
            assert _run_bpf(program, ioctl, arch, request, byteorder) == allow
        assert _run_bpf(program, ioctl + 1, arch, seccomp.TIOCSTI, byteorder) == allow
    assert _run_bpf(program, 16, 0x12345678, seccomp.TIOCSTI, byteorder) == eperm
    assert _run_bpf(program, 39, 0x12345678, 0, byteorder) == eperm
