"""A session's steps and its worktree as a step sees it: over a base tree
the worktree exists only inside the sandbox (its folder on disk holds the
start layer alone), so what it holds is read by a step of the session."""

from __future__ import annotations

import json
from pathlib import Path

from repo_helpers import isopatch

#: A manifest of the worktree the command stands in, as
#: ``repo_helpers.tree_manifest`` makes it, in JSON (bytes as hex).
_MANIFEST = r"""
import hashlib, json, os
out = {}
for folder, dirs, files in os.walk(b"."):
    if folder == b".":
        dirs[:] = [d for d in dirs if d != b".git"]
        files = [f for f in files if f != b".git"]
    for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
        path = os.path.join(folder, name)
        rel = os.path.normpath(path)
        if os.path.islink(path):
            out[rel.hex()] = ["link", os.readlink(path).hex()]
        else:
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            out[rel.hex()] = ["file", bool(os.stat(path).st_mode & 0o100), digest]
print(json.dumps(out))
"""


def step(repo: Path, env: dict[str, str], name: str, *command: str, options: tuple = ()) -> dict:
    """One step of session ``name``, its JSON result."""
    done = isopatch("--session", name, "--json", *options, "--", *command, cwd=repo, env=env)
    assert done.returncode in (0, 1), done.err
    return json.loads(done.out)


def read_in_session(repo: Path, env: dict[str, str], name: str, *command: str) -> bytes:
    """What ``command``, a step of session ``name`` that changes nothing,
    writes on its standard output."""
    result = step(repo, env, name, *command)
    assert result["exit"] == 0 and result["files"] == 0, result
    return Path(result["stdout"]).read_bytes()


def session_manifest(repo: Path, env: dict[str, str], name: str) -> dict[bytes, tuple]:
    """The worktree of session ``name`` as its next step sees it
    (``repo_helpers.tree_manifest``'s form)."""
    shown = json.loads(read_in_session(repo, env, name, "python3", "-c", _MANIFEST))
    return {
        bytes.fromhex(path): ("link", bytes.fromhex(entry[1]))
        if entry[0] == "link"
        else tuple(entry)
        for path, entry in shown.items()
    }


def session_worktree(repo: Path, env: dict[str, str], name: str) -> Path:
    """The worktree of session ``name``, as ``list`` names it."""
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    (found,) = [w for w in listed if w.get("session") == name]
    return Path(found["worktree"])


def written_folder(repo: Path, env: dict[str, str], name: str) -> Path:
    """Where a file a step of session ``name`` writes at its worktree's top
    lands on disk: its layer's upper folder over a base tree, else the
    worktree itself."""
    worktree = session_worktree(repo, env, name)
    upper = worktree.parent / "session" / "worktree-layer" / "upper"
    return upper if upper.is_dir() else worktree
