"""What loosens the sandbox, ``--allow-write`` and ``--allow-network``,
holds for the step that asks for it, never for the session: as with git's
own command-line options, each step names what it needs (the session
keeps its confinement, its worktree, its base; ``isopatch.allowWrite`` and
``isopatch.allowNetwork`` hold for each step as for each run).  A later
step that does not ask gets no real write and no network."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from repo_helpers import isopatch
from sandbox_helpers import loopback_server


def _step(repo: Path, env: dict[str, str], *command: str, options: tuple = ()) -> dict:
    done = isopatch("--session", "s", "--json", *options, "--", *command, cwd=repo, env=env)
    assert done.returncode == 0, done.err
    return json.loads(done.out)


@pytest.mark.hostile
def test_allow_write_holds_for_its_step_only(make_repo, env, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    repo = make_repo({"a.txt": "one\n"})
    options = ("--sandbox", "--allow-write", str(allowed))
    _step(repo, env, "sh", "-c", f"echo first > '{allowed}/first'", options=options)
    assert (allowed / "first").read_text() == "first\n"
    later = _step(repo, env, "sh", "-c", f"echo later > '{allowed}/later'")
    assert later["sandbox"] is True
    assert not (allowed / "later").exists()
    assert str(allowed / "later") in later.get("outside-write", []), later
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


#: Connects to the loopback server outside (its port the argument): prints
#: what it got, or that it was refused.
CONNECT = """\
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as peer:
        print("reached", peer.recv(5).decode())
except OSError as exc:
    print("refused", type(exc).__name__)
"""


@pytest.mark.hostile
def test_allow_network_holds_for_its_step_only(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    with loopback_server() as port:
        probe = (sys.executable, "-c", CONNECT, str(port))
        first = _step(repo, env, *probe, options=("--sandbox", "--allow-network"))
        later = _step(repo, env, *probe)
    assert Path(first["stdout"]).read_text() == "reached hello\n"
    assert later["sandbox"] is True
    assert Path(later["stdout"]).read_text().startswith("refused"), later
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
