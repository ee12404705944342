"""The sandbox itself (``git_isopatch.sandbox.landlock``), on real worktrees
with the real kernel: what a confined command can and cannot write, its
network, and the refusal where the kernel cannot enforce it.

The end-to-end behaviour of ``--sandbox`` is in ``test_sandbox_cli.py``.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from repo_helpers import git, repo_state
from sandbox_helpers import (
    NO_LANDLOCK,
    NO_NAMESPACES,
    loopback_server,
    nobody_python,
    readable_site,
    refuse_syscall,
)

from git_isopatch.sandbox import landlock as sandbox
from git_isopatch.sandbox.command import run_command


def _worktree(repo: Path, tmp_path: Path, env: dict[str, str]) -> sandbox.SandboxPolicy:
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", "--detach", worktree, "HEAD", cwd=repo, env=env)
    admin = git("rev-parse", "--absolute-git-dir", cwd=worktree, env=env).decode().strip()
    private_tmp = tmp_path / "private-tmp"
    private_tmp.mkdir()
    return sandbox.SandboxPolicy(
        worktree=str(worktree),
        admin_dir=admin,
        common_dir=str(repo / ".git"),
        tmpdir=str(private_tmp),
    )


def _run(
    policy: sandbox.SandboxPolicy, script: str, env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """``sh -c script`` in the worktree under ``policy``; stdout and stderr
    go to files in the private TMPDIR (the sandbox keeps them writable)."""
    out = Path(policy.tmpdir) / "out"
    with open(out, "wb") as handle:
        box = sandbox.prepare(policy, streams=[handle.fileno()])
        try:
            outcome = run_command(
                ["sh", "-c", script],
                cwd=policy.worktree,
                env={**env, "TMPDIR": policy.tmpdir},
                stdout=handle,
                stderr=handle,
                sandbox=box,
                timeout=60,
            )
        finally:
            box.close()
    return subprocess.CompletedProcess([], outcome.exit_code, out.read_bytes(), b"")


def test_kernel_offers_what_the_sandbox_needs() -> None:
    """The machines the tests run on have Landlock ABI 3 or later; every
    other test here depends on it, so say so plainly when it is missing."""
    assert sandbox.landlock_abi() >= sandbox.MINIMUM_ABI


def test_writes_outside_fail_and_git_commit_works(make_repo, env, tmp_path: Path) -> None:
    repo = make_repo({"README": "hello\n", "src/a.py": "x = 1\n"})
    home = Path(env["HOME"])
    policy = _worktree(repo, tmp_path, env)
    before = repo_state(repo, env)
    home_before = sorted(home.iterdir())
    script = textwrap.dedent(
        f"""
        echo pwned > {repo}/README && echo ESCAPED-checkout
        echo pwned > {repo}/new-file && echo ESCAPED-new
        git tag evil && echo ESCAPED-tag
        git branch evil && echo ESCAPED-branch
        git config user.name evil && echo ESCAPED-config
        echo x > {home}/.bashrc && echo ESCAPED-home
        truncate -s 0 {repo}/src/a.py && echo ESCAPED-truncate
        ln -s {repo}/README planted && echo changed > planted && echo ESCAPED-symlink
        mv {repo}/README moved && echo ESCAPED-move
        setsid sh -c 'echo x > {repo}/setsid-file && echo ESCAPED-setsid'
        (sh -c 'echo x > {repo}/forked && echo ESCAPED-fork' &) ; wait
        echo ok > "$TMPDIR/scratch" && echo tmpdir-ok
        echo changed >> README && git add README && git commit -q -m inside && echo commit-ok
        echo new > made.txt
        """
    )
    done = _run(policy, script, env)
    output = done.stdout.decode()
    assert "ESCAPED" not in output, output
    assert "tmpdir-ok" in output and "commit-ok" in output, output
    after = repo_state(repo, env)
    # the one change: the HEAD of the sandbox's own worktree, in the list
    assert after.pop("worktree list") != before.pop("worktree list")
    assert after == before
    assert sorted(home.iterdir()) == home_before
    commit = git("log", "-1", "--format=%s", cwd=Path(policy.worktree), env=env).decode()
    assert commit.strip() == "inside"
    git("fsck", "--strict", cwd=repo, env=env)  # the new objects are whole
    assert (Path(policy.worktree) / "made.txt").read_text() == "new\n"


def test_allow_write_path_becomes_writable(make_repo, env, tmp_path: Path) -> None:
    repo = make_repo()
    extra = tmp_path / "cache"
    extra.mkdir()
    policy = _worktree(repo, tmp_path, env)
    policy = policy._replace(allow_write=(str(extra),))
    done = _run(policy, f"echo x > {extra}/f && echo y > {tmp_path}/not-allowed", env)
    assert (extra / "f").read_text() == "x\n"
    assert not (tmp_path / "not-allowed").exists()
    assert done.returncode != 0


def test_object_store_keeps_its_folders(make_repo, env, tmp_path: Path) -> None:
    """New objects may be written; the store's folders cannot be removed."""
    repo = make_repo()
    policy = _worktree(repo, tmp_path, env)
    pack = repo / ".git" / "objects" / "info"
    done = _run(policy, f"rmdir {pack} && echo ESCAPED", env)
    assert b"ESCAPED" not in done.stdout
    assert pack.is_dir()


NETWORK_PROBE = textwrap.dedent(
    """
    import socket, sys
    port = int(sys.argv[1])
    with open("/proc/self/net/dev") as f:
        print("interfaces", sorted(l.split(":")[0].strip() for l in f.readlines()[2:]))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            print("outside", s.recv(100).decode().strip())
    except OSError as e:
        print("outside-refused", type(e).__name__)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    with socket.create_connection(server.getsockname(), timeout=5) as c:
        conn, _ = server.accept()
        conn.sendall(b"own")
        print("own-server", c.recv(10).decode())
    try:
        socket.getaddrinfo("isopatch-test.invalid.example", 80)
        print("dns-answered")
    except OSError as e:
        print("dns-failed")
    """
)


def test_network_is_a_loopback_of_its_own(make_repo, env, tmp_path: Path) -> None:
    repo = make_repo()
    policy = _worktree(repo, tmp_path, env)
    probe = tmp_path / "probe.py"
    probe.write_text(NETWORK_PROBE)
    with loopback_server() as port:
        done = _run(policy, f"{sys.executable} {probe} {port}", env)
        output = done.stdout.decode()
        assert "interfaces ['lo']" in output, output
        assert "outside-refused ConnectionRefusedError" in output, output
        assert "own-server own" in output, output
        assert "dns-failed" in output, output
        allowed = policy._replace(allow_network=True)
        done = _run(allowed, f"{sys.executable} {probe} {port}", env)
        assert "outside hello from outside" in done.stdout.decode(), done.stdout


def test_a_process_that_leaves_the_group_stays_confined(make_repo, env, tmp_path: Path) -> None:
    repo = make_repo()
    policy = _worktree(repo, tmp_path, env)
    marker = tmp_path / "daemon-wrote"
    done_marker = Path(policy.tmpdir) / "daemon-done"
    script = (
        "setsid sh -c '(sleep 0.3; echo x > "
        f"{marker}; cat /proc/self/net/dev > {policy.tmpdir}/daemon-net; "
        f"touch {done_marker}) &'"
    )
    _run(policy, script, env)
    for _ in range(100):
        if done_marker.exists():
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert done_marker.exists(), "the daemon never ran"
    assert not marker.exists()
    interfaces = (Path(policy.tmpdir) / "daemon-net").read_text()
    assert "lo:" in interfaces and interfaces.count(":") == 1, interfaces


CHECK = "from git_isopatch.sandbox import landlock; landlock.check_available(allow_network={})"


def _check_in(preexec, allow_network: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHECK.format(allow_network)],
        preexec_fn=preexec,
        capture_output=True,
        check=False,
    )


def test_no_landlock_is_refused() -> None:
    done = _check_in(refuse_syscall(*NO_LANDLOCK), False)
    assert done.returncode != 0
    assert b"IsopatchError" in done.stderr
    assert b"offers no Landlock" in done.stderr


def test_no_namespaces_is_refused_unless_network_is_allowed() -> None:
    done = _check_in(refuse_syscall(*NO_NAMESPACES), False)
    assert b"cannot make a network namespace (Operation not permitted)" in done.stderr
    assert b"nor a user namespace" in done.stderr
    assert _check_in(refuse_syscall(*NO_NAMESPACES), True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_without_privileges_the_user_is_mapped_to_itself(tmp_path: Path) -> None:
    """As an ordinary user the network namespace comes through a user
    namespace; the user and its files keep their ids inside."""
    shared = Path(tempfile.mkdtemp(prefix="isopatch-userns-", dir="/tmp"))
    owned = shared / "owned"
    owned.write_text("x")
    os.chown(owned, 65534, 65534)
    shared.chmod(0o755)
    code = (
        "import os; from git_isopatch.sandbox import landlock as s\n"
        "s.check_available(allow_network=False)\n"
        "way = s.enter_network_namespace(os.geteuid(), os.getegid())\n"
        f"st = os.stat({str(owned)!r})\n"
        "net = open('/proc/self/net/dev').read().count(':')\n"
        "print(way, os.geteuid(), os.getegid(), st.st_uid, st.st_gid, net)\n"
    )
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            nobody_python(),
            "-c",
            code,
        ],
        capture_output=True,
        check=False,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(readable_site())},  # the checkout may be private
    )
    shutil.rmtree(shared)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.split() == [b"userns", b"65534", b"65534", b"65534", b"65534", b"1"]


def test_udp_to_a_loopback_server_outside_never_arrives(make_repo, env, tmp_path: Path) -> None:
    """UDP has no connection to refuse: the datagram goes to the command's
    own loopback, where nobody listens; the server outside gets nothing."""
    import socket

    repo = make_repo()
    policy = _worktree(repo, tmp_path, env)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(1.0)
        port = server.getsockname()[1]
        code = (
            "import socket; "
            f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))"
        )
        send = f'{sys.executable} -c "{code}"'
        _run(policy, send, env)
        with pytest.raises(TimeoutError):
            server.recvfrom(10)
        allowed = policy._replace(allow_network=True)
        _run(allowed, send, env)
        assert server.recvfrom(10)[0] == b"x"


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
    program = sandbox.seccomp_filter(machine, byteorder)
    eperm = 0x00050000 | errno.EPERM
    allow = 0x7FFF0000
    for arch, ioctl in calls:
        for refused in (sandbox.TIOCSTI, sandbox.TIOCLINUX):
            for request in (refused, (1 << 32) | refused, (0xFFFFFFFF << 32) | refused):
                assert _run_bpf(program, ioctl, arch, request, byteorder) == eperm
        for request in (0x5401, 0x5413, 0x5412 << 32, 0x5411):  # TCGETS, TIOCGWINSZ...
            assert _run_bpf(program, ioctl, arch, request, byteorder) == allow
        assert _run_bpf(program, ioctl + 1, arch, sandbox.TIOCSTI, byteorder) == allow
    assert _run_bpf(program, 16, 0x12345678, sandbox.TIOCSTI, byteorder) == eperm
    assert _run_bpf(program, 39, 0x12345678, 0, byteorder) == eperm
