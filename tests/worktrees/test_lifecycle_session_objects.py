"""A session's own objects: what a step staged and did not commit is there
for the next step (the user's ``git gc`` cannot take it), a step packs only
what is new."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

SANDBOXES = [pytest.param("--sandbox", id="sandbox"), pytest.param("--no-sandbox", id="unconfined")]


def _step(repo: Path, env: dict[str, str], *command: str, options: tuple = ()) -> dict:
    done = isopatch("--session", "s", "--json", *options, "--", *command, cwd=repo, env=env)
    assert done.returncode in (0, 1), done.err
    return json.loads(done.out)


def _session_packs(repo: Path, env: dict[str, str]) -> list[Path]:
    """The packs of session ``s``'s own object store, found under the
    folder made for it."""
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    (found,) = [w for w in listed if w.get("session") == "s"]
    container = Path(found["worktree"]).parent
    return sorted(container.glob("**/isopatch-objects/pack/*.idx"))


def _objects(pack: Path, kind: str = "") -> list[str]:
    """The ids of the objects of ``pack`` (of ``kind`` alone: ``commit``)."""
    shown = subprocess.run(
        ["git", "verify-pack", "-v", str(pack)], capture_output=True, check=True, text=True
    ).stdout
    return [line.split()[0] for line in shown.splitlines() if line[40:41] == " "
            and line[41:].startswith(kind)]  # fmt: skip


@pytest.mark.hostile
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_blob_a_step_staged_is_there_for_the_next_step(make_repo, env, sandbox) -> None:
    """The command stages a file and changes it again: the staged blob is
    named by the session's index alone.  Under the sandbox the command's
    git wrote it into a copy-on-write store that the run discarded;
    unconfined into the user's store, where the user's ``git gc`` prunes
    it.  The session keeps it: the next step reads it."""
    repo = make_repo({"a.txt": "one\n"})
    _step(
        repo, env, "sh", "-c", "echo staged > g && git add g && echo other > g", options=(sandbox,)
    )
    git("gc", "-q", "--prune=now", cwd=repo, env=env)
    seen = _step(repo, env, "sh", "-c", "git show :g > seen.txt", options=(sandbox,))
    assert seen["exit"] == 0, seen["stderr-text"]
    assert "+staged" in Path(seen["patch"]).read_text()
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_step_packs_only_what_is_new(make_repo, env, sandbox) -> None:
    """A commit the first step made is packed once, not again by each
    later step whose worktree's ``HEAD`` still names it; each step packs
    its own state."""
    repo = make_repo({"a.txt": "one\n"})
    commit = "git -c user.name=a -c user.email=a@b.invalid commit -qam mine"
    _step(repo, env, "sh", "-c", f"echo two >> a.txt && {commit}", options=(sandbox,))
    for line in ("three", "four"):
        _step(repo, env, "sh", "-c", f"echo {line} >> a.txt", options=(sandbox,))
    packs = _session_packs(repo, env)
    assert len(packs) == 3
    commits = [commit for pack in packs for commit in _objects(pack, "commit ")]
    assert len(commits) == len(set(commits)) == 4  # the command's, and three states
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_staged_blob_is_packed_once_not_by_every_later_step(make_repo, env, sandbox) -> None:
    """The session's index still names the blob a step staged (and changed
    again) when later steps run: the step that found it packed it, the
    others pack their own state alone."""
    repo = make_repo({"a.txt": "one\n"})
    _step(
        repo, env, "sh", "-c", "echo staged > g && git add g && echo other > g", options=(sandbox,)
    )
    for line in ("two", "three"):
        _step(repo, env, "sh", "-c", f"echo {line} >> a.txt", options=(sandbox,))
    blob = git("hash-object", "--stdin", cwd=repo, env=env, input=b"staged\n").decode().strip()
    holding = [pack for pack in _session_packs(repo, env) if blob in _objects(pack)]
    assert len(holding) == 1, holding
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.hostile
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_an_intent_to_add_entry_a_step_leaves_keeps_the_session_whole(
    make_repo, env, sandbox
) -> None:
    """``git add -N`` names the empty blob, which the command's git may
    never have written where the session's store can read it: the step
    still records the session, and the next step sees the entry."""
    repo = make_repo({"a.txt": "one\n"})
    made = _step(repo, env, "sh", "-c", "touch n && git add -N n", options=(sandbox,))
    assert "error" not in made, made
    seen = _step(repo, env, "sh", "-c", "git diff --name-only > seen.txt", options=(sandbox,))
    assert seen["exit"] == 0 and "error" not in seen, seen
    assert "+n" in Path(seen["patch"]).read_text()
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
