"""The sandboxed command cannot read or change the user's kernel keyrings
(keyrings(7)): the session keyring holds credentials (Kerberos tickets, an
ecryptfs passphrase, keys an agent cached), and bubblewrap's namespaces do
not give the command a keyring of its own: ``keyctl(2)`` through
``KEY_SPEC_SESSION_KEYRING`` reaches the user's.

The test runs git-isopatch in a fresh session keyring of its own holding one
``user`` key, so that nothing of the machine's keyrings is touched.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, repo_state

SECRET = b"isopatch-keyring-secret"

#: keyctl(2) operations and syscall numbers (x86_64).
SETUP = textwrap.dedent(
    """\
    import ctypes, subprocess, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    KEYCTL, ADD_KEY, JOIN_SESSION, SESSION = 250, 248, 1, -3
    if libc.syscall(KEYCTL, JOIN_SESSION, None) < 0:
        sys.exit(f"join session keyring: errno {ctypes.get_errno()}")
    secret = SECRET
    if libc.syscall(ADD_KEY, b"user", b"isopatch-attack", secret, len(secret),
                    ctypes.c_long(SESSION)) < 0:
        sys.exit(f"add_key: errno {ctypes.get_errno()}")
    sys.exit(subprocess.run(sys.argv[1:]).returncode)
    """
).replace("SECRET", repr(SECRET))

PROBE = textwrap.dedent(
    """\
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    KEYCTL, SEARCH, READ, SESSION = 250, 10, 11, -3
    key = libc.syscall(KEYCTL, SEARCH, ctypes.c_long(SESSION), b"user", b"isopatch-attack", 0)
    if key < 0:
        print("search refused", ctypes.get_errno())
    else:
        buf = ctypes.create_string_buffer(256)
        n = libc.syscall(KEYCTL, READ, ctypes.c_long(key), buf, 256)
        print("read", buf.raw[: max(n, 0)])
    """
)


@pytest.mark.hostile
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="keyrings are Linux's")
def test_the_command_cannot_read_the_session_keyring(env, make_repo, tmp_path: Path) -> None:
    import platform
    import subprocess

    if platform.machine() != "x86_64":
        pytest.skip("the keyctl syscall numbers here are x86_64's")
    repo = make_repo({"README": "hello\n"})
    before = repo_state(repo, env)
    (tmp_path / "setup.py").write_text(SETUP)
    (tmp_path / "probe.py").write_text(PROBE)
    done = subprocess.run(
        [
            sys.executable,
            tmp_path / "setup.py",
            ISOPATCH,
            "--sandbox",
            "--stdout",
            "--",
            sys.executable,
            tmp_path / "probe.py",
        ],  # fmt: skip
        cwd=repo,
        env=env,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    seen = done.stderr  # --stdout: the command's output goes to stderr
    assert b"search refused" in seen, seen
    assert SECRET not in seen
    assert repo_state(repo, env) == before


#: Per machine: its byte order, and (AUDIT_ARCH, add_key, request_key,
#: keyctl) of each way its processes call the kernel, from the kernel's
#: syscall tables.
_KEYRING_CALLS = {
    "x86_64": (
        "little",
        [(0xC000003E, 248, 249, 250), (0xC000003E, *(0x40000000 | n for n in (248, 249, 250)))]
        + [(0x40000003, 286, 287, 288)],
    ),
    "aarch64": ("little", [(0xC00000B7, 217, 218, 219), (0x40000028, 309, 310, 311)]),
    "riscv64": ("little", [(0xC00000F3, 217, 218, 219), (0x400000F3, 217, 218, 219)]),
    "loongarch64": ("little", [(0xC0000102, 217, 218, 219)]),
    "ppc64le": ("little", [(0xC0000015, 269, 270, 271), (0x00000014, 269, 270, 271)]),
    "s390x": ("big", [(0x80000016, 278, 279, 280), (0x00000016, 278, 279, 280)]),
}


@pytest.mark.hostile
@pytest.mark.parametrize("machine", sorted(_KEYRING_CALLS))
def test_the_seccomp_filter_refuses_the_keyring_calls_on_every_architecture(machine) -> None:
    """add_key, request_key and keyctl return EPERM through every ABI of
    the machine, whatever their arguments; the calls either side pass.  The
    filter is run as the kernel runs it (``test_sandbox_seccomp._run_bpf``)."""
    import errno

    from test_sandbox_seccomp import _run_bpf

    from git_isopatch.sandbox import seccomp as sandbox

    byteorder, calls = _KEYRING_CALLS[machine]
    program = sandbox.seccomp_filter(machine, byteorder)
    eperm, allow = 0x00050000 | errno.EPERM, 0x7FFF0000
    for arch, *numbers in calls:
        for number in numbers:
            for argument in (0, 1, 0xFFFFFFFF):
                assert _run_bpf(program, number, arch, argument, byteorder) == eperm
        assert _run_bpf(program, min(numbers) - 1, arch, 0, byteorder) == allow
        assert _run_bpf(program, max(numbers) + 1, arch, 0, byteorder) == allow
