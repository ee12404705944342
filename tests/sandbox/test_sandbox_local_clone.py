"""A local ``git clone`` in the sandbox (design: "What it does"): git links
the source's object files, and verifies that each link has the source's
inode.  Where the source and the clone lie in the same copy-on-write
folder (the checkout's, ``$HOME``, a temporary folder), overlayfs mounted
in a user namespace has no inode index, the link gets the copy's inode,
and git dies ("hardlink different from source"): kernel reality, so the
run says so with a ``hint:`` naming the way out, which works.  A clone
into the worktree (another mount) copies, and works as it is."""

from __future__ import annotations

from pathlib import Path

from repo_helpers import isopatch

HINT = "hint: a local git clone cannot hard-link a repository's objects"


def test_a_local_clone_beside_the_checkout_fails_with_a_hint(env, make_repo, tmp_path) -> None:
    other = make_repo({"o.txt": "o\n"}, name="other")
    repo = make_repo({"a.txt": "a\n"})
    clone = tmp_path / "clone"
    run = isopatch("--sandbox", "--", "git", "clone", "-q", other, clone, cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert "hardlink different from source" in run.err
    assert HINT in run.err, run.err
    assert "--no-hardlinks or --no-local" in run.err
    assert not clone.exists()


def test_the_ways_the_hint_names_clone(env, make_repo, tmp_path) -> None:
    other = make_repo({"o.txt": "o\n"}, name="other")
    repo = make_repo({"a.txt": "a\n"})
    for option in ("--no-hardlinks", "--no-local"):
        clone = tmp_path / f"clone{option}"
        argv = ("git", "clone", "-q", option, other, clone)
        run = isopatch("--sandbox", "--porcelain", "--", *argv, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        assert HINT not in run.err
    run = isopatch("--sandbox", "--", "git", "clone", "-q", other, "in", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "'in' is a repository the command made" in run.err


def test_a_failure_that_wrote_no_object_store_gets_no_hint(env, make_repo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    script = 'echo x > "$HOME/f"; git -C "$HOME" init -q n; exit 3'
    run = isopatch("--sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 3, run.err
    assert HINT not in run.err
    assert Path(env["HOME"], "f").exists() is False
