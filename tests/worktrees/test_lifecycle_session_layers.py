"""A sandboxed session is a run layer kept over its base tree: it costs
what it changed, and the base tree it stands on is never moved, evicted
or removed while it lives; a base tree that is gone leaves it broken,
with nothing lost; where a run cannot go over a base tree the session is
a kept worktree as before."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hostile import admin_dirs
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state, tree_manifest
from session_helpers import session_manifest, session_worktree, step


def _config(**keys: str) -> dict[str, str]:
    """``git -c`` for every run, through the environment."""
    env = {"GIT_CONFIG_COUNT": str(len(keys))}
    for number, (key, value) in enumerate(keys.items()):
        env |= {f"GIT_CONFIG_KEY_{number}": f"isopatch.{key}", f"GIT_CONFIG_VALUE_{number}": value}
    return env


def _base_trees(repo: Path, env: dict[str, str]) -> list[dict]:
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    return [entry for entry in listed if entry["state"] == "base"]


def _commit(repo: Path, env: dict[str, str], name: str, text: str) -> None:
    (repo / name).write_text(text)
    git("add", name, cwd=repo, env=env)
    git("commit", "-qm", name, cwd=repo, env=env)


def test_a_sandboxed_session_costs_what_it_changed(make_repo, env) -> None:
    """Its worktree's folder holds no checkout (the ``.git`` file alone);
    ``list`` gives the bytes its layer holds."""
    repo = make_repo({"a.txt": "one\n", "b.txt": "b\n" * 100})
    step(repo, env, "s", "sh", "-c", "echo two >> a.txt; echo new > n.txt", options=("--sandbox",))
    worktree = session_worktree(repo, env, "s")
    assert os.listdir(worktree) == [".git"]
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    (session,) = [entry for entry in listed if entry.get("session") == "s"]
    assert session["size"] == len("one\ntwo\n") + len("new\n")
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


def test_a_session_of_a_checkout_whose_name_is_as_long_as_a_name_can_be(make_repo, env) -> None:
    """Its worktree's private folder takes the checkout's name (git's
    ``worktrees/<name>``): what names it over its base tree (a lasting pin)
    fits a name as well, and the steps run over the base tree."""
    repo = make_repo({"a.txt": "one\n"}, name="r" * 250)
    first = step(repo, env, "s", "sh", "-c", "echo two >> a.txt", options=("--sandbox",))
    assert first["exit"] == 0 and os.listdir(session_worktree(repo, env, "s")) == [".git"]
    later = step(repo, env, "s", "sh", "-c", "echo three >> a.txt")
    assert Path(later["session-patch"]).read_text().endswith("+two\n+three\n")
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.hostile
@pytest.mark.parametrize("kept", ["0", "1"])
def test_runs_elsewhere_never_move_or_evict_the_base_tree_of_a_session(
    make_repo, env, tmp_path, kept
) -> None:
    """With at most ``kept`` base trees, a run at another commit would move
    the idle base tree there (one may be kept) or remove it when it ends
    (none may): a session stands on it, so it stays where it is."""
    repo = make_repo({"a.txt": "one\n"})
    env = {**env, **_config(baseTrees=kept)}
    step(repo, env, "s", "sh", "-c", "echo two >> a.txt", options=("--sandbox",))
    (tree,) = _base_trees(repo, env)
    _commit(repo, env, "later.txt", "later\n")
    other = isopatch("--sandbox", "-q", "--", "sh", "-c", "cat later.txt", cwd=repo, env=env)
    assert other.returncode == 0, other.err
    same = isopatch("--sandbox", "-q", "--base", "HEAD~", "--", "true", cwd=repo, env=env)
    assert same.returncode == 0, same.err
    assert [entry["worktree"] for entry in _base_trees(repo, env)] == [tree["worktree"]]
    last = step(repo, env, "s", "sh", "-c", "echo three >> a.txt")
    assert last["exit"] == 0 and "later.txt" not in last["path"]
    clean = apply_to_clean_checkout(
        repo, last["base"], Path(last["session-patch"]), tmp_path / "clean", env
    )
    assert tree_manifest(clean) == session_manifest(repo, env, "s")
    assert (clean / "a.txt").read_text() == "one\ntwo\nthree\n"
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
    assert len(admin_dirs(repo, env)) == int(kept)  # the base tree goes as after a run


@pytest.mark.hostile
def test_prune_leaves_a_base_tree_a_newer_session_stands_on(make_repo, env) -> None:
    """``prune --expire`` takes the old base tree's idle peers, not the one a
    session made after the expiry stands on; ``prune --sessions`` takes
    the session, then its base tree."""
    repo = make_repo({"a.txt": "one\n"})
    before = repo_state(repo, env)
    step(repo, env, "s", "sh", "-c", "echo two >> a.txt", options=("--sandbox",))
    (tree,) = _base_trees(repo, env)
    record = Path(tree["worktree"])  # made long ago, as far as prune can tell
    admin = [d for d in admin_dirs(repo, env) if (d / "isopatch-base.json").exists()][0]
    data = json.loads((admin / "isopatch-base.json").read_text())
    data["created"] = data["used"] = 1.0
    (admin / "isopatch-base.json").write_text(json.dumps(data))
    pruned = isopatch("prune", "-v", "--expire", "1.day.ago", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert record.is_dir() and "base" not in pruned.out
    assert step(repo, env, "s", "sh", "-c", "cat a.txt")["exit"] == 0
    everything = isopatch("prune", "-v", "--sessions", cwd=repo, env=env)
    assert everything.returncode == 0, everything.err
    assert admin_dirs(repo, env) == []
    assert repo_state(repo, env) == before


@pytest.mark.hostile
def test_a_session_whose_base_tree_is_gone_is_broken_and_loses_nothing(
    make_repo, env, tmp_path
) -> None:
    repo = make_repo({"a.txt": "one\n"})
    made = step(repo, env, "s", "sh", "-c", "echo two >> a.txt", options=("--sandbox",))
    (tree,) = _base_trees(repo, env)
    shutil.rmtree(Path(tree["worktree"]).parent)
    after = isopatch("--session", "s", "--porcelain", "--", "true", cwd=repo, env=env)
    assert after.returncode == 128
    assert after.fields()["error-code"] == "session-broken"
    assert "its base tree is gone" in after.err
    kept = Path(made["session-patch"]).read_bytes()
    container = session_worktree(repo, env, "s").parent
    assert (container / "session" / "session.patch").read_bytes() == kept
    clean = apply_to_clean_checkout(repo, made["base"], container / "session" / "session.patch",
                                    tmp_path / "clean", env)  # fmt: skip
    assert (clean / "a.txt").read_text() == "one\ntwo\n"
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


def test_a_session_that_cannot_go_over_a_base_tree_is_a_kept_worktree(make_repo, env) -> None:
    """``--recurse-submodules``: its submodules are populated in a worktree
    of its own; the session's steps work as before, in a real checkout."""
    repo = make_repo({"a.txt": "one\n"})
    options = ("--sandbox", "--recurse-submodules")
    step(repo, env, "s", "sh", "-c", "echo two >> a.txt", options=options)
    worktree = session_worktree(repo, env, "s")
    assert (worktree / "a.txt").read_text() == "one\ntwo\n"
    assert _base_trees(repo, env) == []
    last = step(repo, env, "s", "sh", "-c", "echo three >> a.txt", options=options)
    assert "+three" in Path(last["session-patch"]).read_text()
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
