"""Job control (design: procedure step 5): the command gets the terminal,
as a shell gives it to a foreground job."""

from __future__ import annotations

import os
import pty
import select

import pytest
from repo_helpers import ISOPATCH


def test_the_command_gets_the_terminal(env, make_repo) -> None:
    """In human mode the command inherits the terminal (issue 2): it can read
    from it, as in a shell, and is its foreground process group."""
    repo = make_repo()
    pid, fd = pty.fork()
    if pid == 0:  # child: run git-isopatch on the pseudo-terminal
        os.chdir(repo)
        os.execve(
            str(ISOPATCH),
            [
                str(ISOPATCH),
                "-q",
                "--",
                "sh",
                "-c",
                'read line; echo "got $line" > answer; echo done',
            ],
            env,
        )
    output = b""
    os.write(fd, b"typed\n")
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            os.kill(pid, 9)
            pytest.fail(f"no answer from the command on the terminal: {output!r}")
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    assert b"done" in output
