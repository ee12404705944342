"""Signing under the sandbox (issue 19: "Signing needs the user's agent, a
credential: under the sandbox it fails with a ``hint:`` saying so").  A
real ssh-agent holds the key; git signs with it unconfined; sandboxed, the
agent's socket and ``SSH_AUTH_SOCK`` are out of the command's reach."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

pytestmark = pytest.mark.needs("openssh-client")

HINT = (
    "hint: signing needs your gpg or ssh agent, a credential the sandbox keeps from "
    "the command: commit unsigned inside (git -c commit.gpgSign=false), sign "
    "after applying the patch, or use --no-sandbox"
)


@pytest.fixture
def agent(tmp_path: Path, env):
    """An ssh-agent holding a fresh key: (its environment, the public key)."""
    socket = tmp_path / "agent.sock"
    started = subprocess.run(
        ["ssh-agent", "-a", str(socket)], capture_output=True, check=True, env=env
    )
    pid = int(started.stdout.split(b"SSH_AGENT_PID=")[1].split(b";")[0])
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with_agent = {**env, "SSH_AUTH_SOCK": str(socket)}
    subprocess.run(["ssh-add", "-q", str(key)], check=True, env=with_agent, capture_output=True)
    try:
        yield with_agent, (tmp_path / "key.pub").read_text().strip()
    finally:
        os.kill(pid, signal.SIGTERM)


def _signing_repo(make_repo, env, public: str) -> Path:
    repo = make_repo({"a": "a\n"})
    for key, value in (
        ("gpg.format", "ssh"),
        ("user.signingKey", f"key::{public}"),
        ("commit.gpgSign", "true"),
    ):
        git("config", key, value, cwd=repo, env=env)
    return repo


COMMIT = "echo b > b; git add b; git commit -q -m b"


def test_a_signed_commit_under_the_sandbox_fails_with_a_hint(make_repo, agent) -> None:
    env, public = agent
    repo = _signing_repo(make_repo, env, public)
    unconfined = isopatch(
        "--porcelain", "--no-sandbox", "--", "sh", "-c", COMMIT, cwd=repo, env=env
    )
    assert unconfined.returncode == 0, unconfined.err
    assert HINT not in unconfined.err
    for mode in ("--porcelain", "-q"):  # stderr captured, and on the user's stderr
        run = isopatch(mode, "--sandbox", "--", "sh", "-c", COMMIT, cwd=repo, env=env)
        assert run.returncode != 0
        assert HINT in run.err.splitlines(), run.err
    porcelain = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", COMMIT, cwd=repo, env=env)
    assert f"hint {HINT.removeprefix('hint: ')}" in porcelain.out.splitlines()


def test_a_failing_sandboxed_command_that_does_not_sign_has_no_signing_hint(make_repo, env) -> None:
    repo = make_repo({"a": "a\n"})
    run = isopatch("--sandbox", "--", "sh", "-c", "git commit -q -m nothing", cwd=repo, env=env)
    assert run.returncode != 0
    assert "signing" not in run.err
