"""A sandboxed session's steps over its base tree give the patches an
unconfined session's give: each step's own patch and the whole change,
whatever state the earlier steps (and the user's staged work the session
started from) left in its index and its files."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch
from session_helpers import step

CONFINEMENTS = ("--sandbox", "--no-sandbox")


def _session(repo: Path, env: dict, name: str, start: tuple, commands: list) -> list:
    """The steps of session ``name`` (the first with ``start``): each
    step's patch and the session's whole change after it, then its end."""
    patches = []
    for number, command in enumerate(commands):
        result = step(repo, env, name, *command, options=start if number == 0 else ())
        assert result["exit"] == 0, result
        whole = Path(result["session-patch"]).read_bytes()
        patches.append((Path(result["patch"]).read_bytes(), whole))
    assert isopatch("--session", name, "--end", cwd=repo, env=env).returncode == 0
    return patches


#: name -> (what the user stages over the gitlink ``sub``, the steps)
GITLINK_STEPS = {
    "staged bump put back by reset --hard": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        [("true",), ("git", "reset", "-q", "--hard", "HEAD")],
    ),
    "staged bump put back by checkout": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        [("true",), ("git", "checkout", "-q", "HEAD", "--", "sub")],
    ),
    "staged bump removed by rm --cached": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        [("true",), ("git", "rm", "-q", "--cached", "sub")],
    ),
    "a step's bump put back by the next": (
        [],
        [
            ("git", "update-index", "--cacheinfo", f"160000,{'3' * 40},sub"),
            ("git", "reset", "-q", "--hard", "HEAD"),
        ],
    ),
}


@pytest.mark.parametrize("case", GITLINK_STEPS)
def test_a_gitlink_a_later_step_puts_back_is_in_its_patch(env, make_repo, case) -> None:
    """An unpopulated submodule is its index entry alone: a later step
    that puts it back to the base tree's changes the session as the step
    found it, and its patch says so sandboxed as unconfined."""
    repo = make_repo({"README": "r\n"})
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "sub", cwd=repo, env=env)
    staged, commands = GITLINK_STEPS[case]
    for options in staged:
        git("update-index", *options, cwd=repo, env=env)
    start = ("--staged",) if staged else ()
    patches = {c: _session(repo, env, "s", (*start, c), commands) for c in CONFINEMENTS}
    assert b"sub" in patches["--no-sandbox"][-1][0]
    assert patches["--sandbox"] == patches["--no-sandbox"]
