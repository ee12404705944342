"""``--sandbox`` and the terminal: a confined command cannot push keystrokes
into a terminal's input (``TIOCSTI``, ``TIOCLINUX``), so the user's shell
never runs what it typed, on any terminal and by any way of calling the
kernel; ordinary interactive use (``isatty``, reading a line, the terminal
handed over as a shell does) works as without the sandbox.

Real pseudo-terminals: git-isopatch runs as a shell runs a job, in a session
whose controlling terminal is the pseudo-terminal, and what is left in the
terminal's input after it ends is what the shell would read next.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from terminal_helpers import isopatch_in_session, pending_input, raw_terminal

#: Every way the command has to push text into a terminal.  Each attempt
#: prints ``<name>: injected`` or ``<name>: <errno name>``; what it pushes
#: names it, so the reader of the terminal shows which got through.
ATTACK = textwrap.dedent(
    """\
    import ctypes, errno, fcntl, mmap, os, platform, sys, termios

    libc = ctypes.CDLL(None, use_errno=True)

    def push(fd, text):
        for char in text:
            fcntl.ioctl(fd, termios.TIOCSTI, char.encode())

    def push_high_bits(fd, text):
        # the kernel's request is an unsigned int: bits above 32 are dropped
        number = {"x86_64": 16, "aarch64": 29, "riscv64": 29}[platform.machine()]
        for char in text:
            byte = ctypes.c_char(char.encode())
            request = ctypes.c_ulong((1 << 32) | termios.TIOCSTI)
            if libc.syscall(ctypes.c_long(number), ctypes.c_long(fd), request, ctypes.byref(byte)):
                raise OSError(ctypes.get_errno(), "ioctl")

    def push_x32(fd, text):
        # the x32 ioctl (__X32_SYSCALL_BIT | 514), ENOSYS where the kernel has no x32
        for char in text:
            byte = ctypes.c_char(char.encode())
            number, request = ctypes.c_long(0x40000000 | 514), ctypes.c_ulong(termios.TIOCSTI)
            if libc.syscall(number, ctypes.c_long(fd), request, ctypes.byref(byte)):
                raise OSError(ctypes.get_errno(), "ioctl")

    def push_int80(fd, text):
        # the i386 ioctl (54) through int 0x80 from this 64-bit process;
        # the byte lives below 4 GiB (MAP_32BIT) for the 32-bit pointer
        page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40, prot=7)
        base = ctypes.addressof(ctypes.c_char.from_buffer(page))
        code = (
            b"\\x53"  # push rbx
            + b"\\xb8" + (54).to_bytes(4, "little")  # mov eax, 54
            + b"\\xbb" + fd.to_bytes(4, "little")  # mov ebx, fd
            + b"\\xb9" + termios.TIOCSTI.to_bytes(4, "little")  # mov ecx, TIOCSTI
            + b"\\xba" + base.to_bytes(4, "little")  # mov edx, base
            + b"\\xcd\\x80\\x5b\\xc3"  # int 0x80; pop rbx; ret
        )
        page[64 : 64 + len(code)] = code
        call = ctypes.CFUNCTYPE(ctypes.c_int)(base + 64)
        for char in text:
            page[0] = ord(char)
            result = call()
            if result < 0:
                raise OSError(-result, "ioctl")

    def paste(fd, _text):
        fcntl.ioctl(fd, termios.TIOCLINUX, bytes([3]) + bytes(15))  # TIOCL_PASTESEL

    def attempt(name, how, path, text):
        try:
            fd = os.open(path, os.O_RDWR) if path else 0
            how(fd, text)
            print(f"{name}: injected", flush=True)
        except OSError as exc:
            print(f"{name}: {errno.errorcode[exc.errno]}", flush=True)

    own = os.ttyname(0)
    attempt("stdin", push, None, "stdin;")
    attempt("dev-tty", push, "/dev/tty", "devtty;")
    attempt("pty-path", push, own, "ptypath;")
    attempt("high-bits", push_high_bits, "/dev/tty", "highbits;")
    if platform.machine() == "x86_64":
        attempt("x32", push_x32, None, "x32;")
    if os.environ.get("ATTACK_INT80"):
        attempt("int80", push_int80, None, "int80;")
    attempt("other-terminal", push, os.environ["OTHER_TTY"], "other;")
    attempt("tioclinux", paste, "/dev/tty", "")
    """
)


def _int80_works() -> bool:
    """Whether this machine runs i386 calls from a 64-bit process (x86_64
    with ``CONFIG_IA32_EMULATION``): then the attack tries that way too."""
    if platform.machine() != "x86_64":
        return False
    probe = (
        "import ctypes, mmap, os\n"
        "page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40, prot=7)\n"
        "page.write(b'\\x53\\xb8\\x14\\0\\0\\0\\xcd\\x80\\x5b\\xc3')  # getpid, i386\n"
        "base = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
        "assert ctypes.CFUNCTYPE(ctypes.c_int)(base)() == os.getpid()\n"
    )
    return subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0


def _attack_is_real() -> str | None:
    """Why TIOCSTI cannot work here even without the sandbox, or ``None``."""
    try:
        legacy = Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip()
    except OSError:
        legacy = "1"  # before Linux 6.2 there is no switch: TIOCSTI always works
    status = Path("/proc/self/status").read_text()
    capabilities = int(
        next(ln for ln in status.splitlines() if ln.startswith("CapEff:")).split()[1], 16
    )
    if legacy == "0" and not capabilities & (1 << 21):  # CAP_SYS_ADMIN
        return "dev.tty.legacy_tiocsti is 0 and we lack CAP_SYS_ADMIN: TIOCSTI fails anyway"
    return None


def _attack(env, make_repo, tmp_path: Path, *options: str):
    """Run ATTACK through git-isopatch ``options`` on one terminal, with a
    second terminal (another user's shell) open beside it; the output of
    the attempts, and what each terminal's reader finds afterwards."""
    repo = make_repo()
    script = tmp_path / "attack.py"
    script.write_text(ATTACK)
    own, other = raw_terminal(), raw_terminal()
    try:
        attack_env = {**env, "OTHER_TTY": os.ttyname(other[1])}
        if _int80_works():
            attack_env["ATTACK_INT80"] = "1"
        run = isopatch_in_session(
            *options, "--", sys.executable, script, cwd=repo, env=attack_env, terminal=own
        )
        other_pending = pending_input(other[1])
    finally:
        for fd in (*own, *other):
            os.close(fd)
    assert run.returncode == 0, run.shown
    names = {"stdin", "dev-tty", "pty-path", "high-bits", "x32", "int80", "other-terminal"}
    names.add("tioclinux")
    results = dict(
        line.split(": ", 1) for line in run.shown.splitlines() if line.split(":")[0] in names
    )
    return results, run.pending, other_pending


@pytest.mark.parametrize("network", [(), ("--allow-network",)], ids=["no-network", "allow-network"])
def test_the_command_cannot_type_into_any_terminal(env, make_repo, tmp_path: Path, network) -> None:
    results, pending, other_pending = _attack(env, make_repo, tmp_path, "--sandbox", *network)
    expected = {"stdin", "dev-tty", "pty-path", "high-bits", "other-terminal", "tioclinux"}
    if _int80_works():
        expected.add("int80")
    if platform.machine() == "x86_64":
        expected.add("x32")
    # the user's other terminals are not in the sandbox's own /dev/pts at all
    assert results == {**dict.fromkeys(expected, "EPERM"), "other-terminal": "ENOENT"}
    assert pending == b""
    assert other_pending == b""


def test_without_the_sandbox_the_same_command_types_into_the_shell(
    env, make_repo, tmp_path: Path
) -> None:
    """The attack is real here: without ``--sandbox`` the text reaches the
    reader of both terminals (the test runs as root, which may push into
    any terminal)."""
    reason = _attack_is_real()
    if reason:
        pytest.skip(reason)
    results, pending, other_pending = _attack(env, make_repo, tmp_path, "--no-sandbox")
    x32 = results.get("x32") == "injected"  # ENOSYS: a kernel without x32
    int80 = _int80_works()
    assert pending == b"stdin;devtty;ptypath;highbits;" + (b"x32;" if x32 else b"") + (
        b"int80;" if int80 else b""
    )
    assert results["stdin"] == results["dev-tty"] == results["pty-path"] == "injected"
    assert results["high-bits"] == "injected"
    if os.geteuid() == 0:
        assert other_pending == b"other;"
    assert results["tioclinux"] != "EPERM"  # a pseudo-terminal is no console


#: What an interactive command looks at: its streams are the terminal, it is
#: the foreground group (the terminal was handed over), ``/dev/tty`` opens and
#: answers ``TCGETS``, the window size is known, and a typed line is read.
INTERACTIVE = textwrap.dedent(
    """\
    import os, sys, termios
    tty = os.open("/dev/tty", os.O_RDWR)
    print("isatty", os.isatty(0), os.isatty(1), os.isatty(2), os.isatty(tty))
    print("foreground", os.tcgetpgrp(0) == os.getpgrp())
    print("columns", os.get_terminal_size(1).columns)
    attrs = termios.tcgetattr(tty)
    termios.tcsetattr(tty, termios.TCSANOW, attrs)
    print("settings kept")
    print("read", repr(sys.stdin.readline()))
    """
)


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandbox"])
def test_an_interactive_command_sees_its_terminal(
    env, make_repo, tmp_path: Path, sandboxed
) -> None:
    import fcntl
    import struct
    import termios

    repo = make_repo()
    script = tmp_path / "interactive.py"
    script.write_text(INTERACTIVE)
    master, slave = os.openpty()  # canonical mode with echo, as a shell leaves it
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 77, 0, 0))
    options = ("--sandbox",) if sandboxed else ()
    try:
        run = isopatch_in_session(
            *options,
            "--",
            sys.executable,
            script,
            cwd=repo,
            env=env,
            terminal=(master, slave),
            typed=b"typed ahead\n",
        )
    finally:
        os.close(master)
        os.close(slave)
    assert run.returncode == 0, run.shown
    lines = run.shown.splitlines()
    for expected in (
        "isatty True True True True",
        "foreground True",
        "columns 77",
        "settings kept",
        "read 'typed ahead\\n'",
    ):
        assert expected in lines, run.shown
    assert run.pending == b""
