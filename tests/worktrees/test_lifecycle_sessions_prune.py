"""Sessions and ``prune`` (man page: "Sessions", "Kept worktrees: list and
prune"): agents share a repository, and one that cleans up after itself
with ``git isopatch prune --expire now`` (the documented recipe) ends no
other agent's session, as ``git worktree prune`` prunes no locked
worktree.  ``prune --sessions`` does; the other agent's next step then
fails once, saying so, and changes nothing; the step after it starts the
session afresh at its base."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state
from session_helpers import step


def _sessions(repo: Path, env) -> list[str]:
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    return sorted(entry["session"] for entry in listed if entry["state"] == "session")


def test_prune_expire_now_leaves_two_agents_sessions_as_they_were(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    step(repo, env, "first", "sh", "-c", "echo first >> a.txt")
    step(repo, env, "second", "sh", "-c", "echo second > b.txt")
    pruned = isopatch("prune", "-v", "--expire", "now", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert "session" not in pruned.out, pruned.out
    assert _sessions(repo, env) == ["first", "second"]
    later = step(repo, env, "second", "sh", "-c", "echo more >> b.txt")
    assert later["exit"] == 0
    assert "+second\n+more\n" in Path(later["session-patch"]).read_text()
    assert "+first" in Path(step(repo, env, "first", "true")["session-patch"]).read_text()


def test_a_step_of_a_session_prune_sessions_ended_says_so_once(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    step(repo, env, "mine", "sh", "-c", "echo mine >> a.txt")
    step(repo, env, "theirs", "sh", "-c", "echo theirs > t.txt")
    pruned = isopatch("prune", "--sessions", cwd=repo, env=env)  # a third agent
    assert pruned.returncode == 0, pruned.err
    assert _sessions(repo, env) == []
    before = repo_state(repo, env)
    told = isopatch(
        "--session", "theirs", "--porcelain", "--", "sh", "-c", "echo x > t.txt", cwd=repo, env=env
    )
    assert told.returncode == 128, told.err
    lines = told.err.splitlines()
    assert re.fullmatch(
        r"fatal: session 'theirs' was ended by 'git isopatch prune --sessions' at "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
        lines[0],
    ), told.err
    assert lines[1:] == [
        "hint: its worktree is gone; run the step again to start the session afresh at its base"
    ]
    assert "error-code session-ended" in told.out.splitlines()
    assert _sessions(repo, env) == []
    assert repo_state(repo, env) == before
    again = step(repo, env, "theirs", "sh", "-c", "echo again >> t.txt")
    assert again["exit"] == 0
    assert Path(again["session-patch"]).read_text().count("+again") == 1
    assert "+theirs" not in Path(again["session-patch"]).read_text()
    assert isopatch("--session", "mine", "--end", cwd=repo, env=env).returncode == 0
    assert isopatch("--session", "theirs", "--end", cwd=repo, env=env).returncode == 0
    assert not (repo / ".git" / "isopatch" / "sessions").exists()


def test_prune_sessions_drops_the_word_no_step_came_back_for(make_repo, env) -> None:
    """The word a session ended by another leaves waits for its next step;
    a later ``prune --sessions`` drops what was left before its
    ``--expire``, then nothing of the sessions is left."""
    repo = make_repo()
    step(repo, env, "gone", "touch", "x")
    assert isopatch("prune", "--sessions", cwd=repo, env=env).returncode == 0
    word = repo / ".git" / "isopatch" / "sessions" / "gone.ended"
    assert word.is_file()
    kept = isopatch("prune", "--sessions", "--expire", "1.hour.ago", cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    assert word.is_file()
    dropped = isopatch("prune", "--sessions", "--expire", "now", cwd=repo, env=env)
    assert dropped.returncode == 0, dropped.err
    assert not (repo / ".git" / "isopatch").exists()
    again = isopatch("--session", "gone", "--", "true", cwd=repo, env=env)
    assert again.returncode == 0, again.err


def test_an_idle_session_past_two_weeks_outlives_the_daily_expiry(make_repo, env) -> None:
    """Sessions never expire (man page: "Sessions"): the daily expiry that
    takes result folders and base trees unused for two weeks leaves a
    session last stepped three weeks ago, and its base tree, as they were."""
    import os
    import time

    repo = make_repo({"a.txt": "one\n"})
    step(repo, env, "old", "sh", "-c", "echo old >> a.txt")
    weeks = time.time() - 21 * 24 * 3600
    (record,) = repo.parent.glob("*.isopatch-*/session/session.json")
    record.write_text(json.dumps({**json.loads(record.read_text()), "used": weeks}))
    for base in (repo / ".git" / "worktrees").glob("*/isopatch-base.json"):
        base.write_text(json.dumps({**json.loads(base.read_text()), "used": weeks}))
    os.utime(repo / ".git" / "isopatch.lock", (weeks, weeks))
    ran = isopatch("-q", "--no-sandbox", "--", "true", cwd=repo, env=env)
    assert ran.returncode == 0, ran.err
    assert os.stat(repo / ".git" / "isopatch.lock").st_mtime > weeks + 60  # the expiry ran
    assert _sessions(repo, env) == ["old"]
    later = step(repo, env, "old", "sh", "-c", "echo later >> a.txt")
    assert later["exit"] == 0 and "session-broken" not in later, later
    assert "+old\n+later\n" in Path(later["session-patch"]).read_text()


@pytest.mark.parametrize("then", ["step", "end"])
@pytest.mark.parametrize("gone", ["git worktree remove", "rm -rf"])
def test_a_session_lost_by_another_says_so_once(make_repo, env, gone, then) -> None:
    """The user's ``git worktree remove --force --force`` of a session's
    worktree, or ``rm -rf`` of the folder made for it, ends it: its next
    step fails once, saying what became of that folder (its last
    ``session-patch`` in it when left), rather than start the session
    afresh and lose it; ``--end`` removes what is left of it."""
    repo = make_repo({"a.txt": "one\n"})
    first = step(repo, env, "mine", "sh", "-c", "echo mine >> a.txt")
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    (worktree,) = [e["worktree"] for e in listed if e["state"] == "session"]
    folder = Path(worktree).parent
    if gone == "rm -rf":
        shutil.rmtree(folder)
    else:
        git("worktree", "remove", "--force", "--force", worktree, cwd=repo, env=env)
    before = git("worktree", "list", "--porcelain", cwd=repo, env=env).count(b"worktree ")
    if then == "end":
        assert isopatch("--session", "mine", "--end", cwd=repo, env=env).returncode == 0
        assert not folder.exists()
        assert not (repo / ".git" / "isopatch" / "sessions").exists()
        listed = git("worktree", "list", "--porcelain", cwd=repo, env=env)
        assert b"locked git-isopatch session" not in listed
        return
    told = isopatch("--session", "mine", "--porcelain", "--", "true", cwd=repo, env=env)
    assert told.returncode == 128, told.err
    said = "deleted" if gone == "rm -rf" else "left"
    assert told.err.splitlines()[0] == (
        "fatal: session 'mine' was ended by another than git-isopatch,"
        f" its folder '{folder}' {said}"
    ), told.err
    assert "error-code session-ended" in told.out.splitlines()
    after = git("worktree", "list", "--porcelain", cwd=repo, env=env).count(b"worktree ")
    assert after == before - (gone == "rm -rf")  # its registration went with it
    if gone != "rm -rf":
        kept = (folder / "session" / "session.patch").read_text()
        assert kept == Path(first["session-patch"]).read_text() and "+mine" in kept
    again = step(repo, env, "mine", "sh", "-c", "echo again >> a.txt")
    assert "+mine" not in Path(again["session-patch"]).read_text()
    assert _sessions(repo, env) == ["mine"]
    assert isopatch("--session", "mine", "--end", cwd=repo, env=env).returncode == 0
    assert folder.exists() == (gone != "rm -rf")  # another session's: the user's to delete
