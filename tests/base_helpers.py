"""Objects and repositories that make a base hard to resolve: abbreviated
ids two objects share, a repository another user owns (git's "dubious
ownership")."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from repo_helpers import git


def commit_of(repo: Path, env, revision: str) -> str:
    """The commit git names by ``revision`` (``:/<text>`` takes no suffix)."""
    named = git("rev-parse", "--verify", revision, cwd=repo, env=env).decode().strip()
    return git("rev-parse", "--verify", f"{named}^{{commit}}", cwd=repo, env=env).decode().strip()


def object_id(kind: str, body: bytes) -> str:
    return hashlib.sha1(kind.encode() + b" %d\0" % len(body) + body).hexdigest()


def commit_body(repo: Path, env, message: str) -> bytes:
    """A commit on top of ``HEAD`` with ``HEAD``'s tree, saying ``message``."""
    return commit_template(repo, env) % message.encode()


def commit_template(repo: Path, env) -> bytes:
    head = commit_of(repo, env, "HEAD")
    tree = git("rev-parse", "HEAD^{tree}", cwd=repo, env=env).decode().strip()
    who = b"Isopatch Test <test@isopatch.invalid> 1700000000 +0000"
    return b"tree %s\nparent %s\nauthor %s\ncommitter %s\n\n%%s\n" % (
        tree.encode(),
        head.encode(),
        who,
        who,
    )


def write_object(repo: Path, env, kind: str, body: bytes) -> str:
    return (
        git("hash-object", "-t", kind, "-w", "--stdin", cwd=repo, env=env, input=body)
        .decode()
        .strip()
    )


def colliding(kind: str, make_body, prefix: str) -> bytes:
    """The first ``make_body(n)`` whose object id starts with ``prefix``
    (4 hex digits: about 65,000 hashes)."""
    for n in range(10_000_000):
        body = make_body(n)
        if object_id(kind, body).startswith(prefix):
            return body
    raise AssertionError("no collision found")


def owned_by_another_user(env, make_repo) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the repository to another user (chown)")
    repo = make_repo()
    for folder, dirs, files in os.walk(repo):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, 12345, 12345)
    return repo
