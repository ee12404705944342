"""The changes nobody made, with the pool (design: The patch; issue 23
item 4): a worktree claimed from the pool was proved fresh by its claim
(``git status --ignored -uall`` printed nothing), so no tracked path can
differ from the base and the look before the command (``git diff
--name-only``) is not asked again.  Where the proof may not hold, it is:
a repository whose checkout alone changes a path (the claim cannot prove
that worktree fresh; a new one is made), the sparse files of
``--include-uncommitted`` and populated submodules (checked out after the
claim).  Warm runs give the cold run's patch and warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, write_outside_attributes

POOL = ("-c", "isopatch.pool=1")

#: ``f.txt`` stored with CRLF before ``*.txt text`` was added: "modified"
#: right after every checkout.
CRLF_STORED = {"f.txt": b"a\r\nb\r\n", "g.txt": b"g\n", "keep": b"k\n"}


def _git_commands(trace: Path) -> list[list[str]]:
    """The argument lists of the git processes a traced run started."""
    argvs = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "start":
            argvs.append(event["argv"][1:])
    return argvs


def _traced(repo: Path, env: dict[str, str], tmp_path: Path, *args: str):
    trace = tmp_path / "trace.json"
    trace.unlink(missing_ok=True)
    run = isopatch(
        "--porcelain", "--no-sandbox", *args,
        cwd=repo, env={**env, "GIT_TRACE2_EVENT": str(trace)}, git_options=POOL,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    return run, _git_commands(trace)


def _name_only(commands: list[list[str]]) -> list[list[str]]:
    return [argv for argv in commands if "diff" in argv and "--name-only" in argv]


def test_a_proved_claim_asks_no_look_before_the_command(env, make_repo, tmp_path) -> None:
    repo = make_repo({"README": "hello\n", "a.txt": "alpha\n"})
    first, commands = _traced(repo, env, tmp_path, "--", "sh", "-c", "echo x >> a.txt")
    assert _name_only(commands), "a new worktree is looked at before the command"
    second, commands = _traced(repo, env, tmp_path, "--", "sh", "-c", "echo x >> a.txt")
    assert any("read-tree" in argv for argv in commands), "the second run claims"
    assert not _name_only(commands), "the claim's proof stands for the look"
    assert Path(second.fields()["patch"]).read_bytes() == Path(first.fields()["patch"]).read_bytes()


def test_checkout_changes_nobody_made_stay_out_of_a_warm_patch(env, make_repo, tmp_path) -> None:
    repo = make_repo(CRLF_STORED)
    (repo / ".gitattributes").write_text("*.txt text\n")
    git("add", ".gitattributes", cwd=repo, env=env)
    git("commit", "-q", "-m", "attributes", cwd=repo, env=env)
    patches = []
    for _ in range(3):  # cold, then runs that find a pooled worktree
        run, commands = _traced(repo, env, tmp_path, "--", "sh", "-c", "echo x >> g.txt")
        assert _name_only(commands), "with a tracked .gitattributes the look is made"
        patch = Path(run.fields()["patch"]).read_bytes()
        assert b"f.txt" not in patch
        assert b"diff --git a/g.txt b/g.txt" in patch
        patches.append(patch)
    assert patches[0] == patches[1] == patches[2]


@pytest.mark.parametrize("where", ["info", "xdg", "configured"])
def test_attributes_outside_the_tree_keep_the_look(env, make_repo, tmp_path, where) -> None:
    """An attributes file that is not tracked applies too (gitattributes(5)):
    a path whose checkout alone changes it may show once git reads it
    again, so the look before the command is made, even when the claim
    proved the worktree fresh (nothing here differs after checkout)."""
    repo = make_repo({"g.txt": "g\n", "keep": "k\n"})
    rules = "*.txt text\n"
    write_outside_attributes(repo, env, where, rules, tmp_path)
    script = "echo x >> g.txt"
    patches = []
    for _ in range(2):  # cold, then warm
        run, commands = _traced(repo, env, tmp_path, "--", "sh", "-c", script)
        assert _name_only(commands), where
        patch = Path(run.fields()["patch"]).read_bytes()
        assert b"diff --git a/g.txt b/g.txt" in patch
        patches.append(patch)
    assert patches[0] == patches[1]


def test_files_checked_out_after_the_claim_are_looked_at(env, make_repo, tmp_path) -> None:
    """``--include-uncommitted`` in a sparse checkout checks files out
    after the claim: the look before the command is asked again."""
    repo = make_repo({"in/a": "a\n", "out/b": "b\n"})
    git("sparse-checkout", "set", "in", cwd=repo, env=env)
    (repo / "in" / "a").write_text("a2\n")
    for _ in range(2):
        run, commands = _traced(
            repo, env, tmp_path, "--include-uncommitted", "--", "sh", "-c", "echo x >> in/a"
        )
        assert _name_only(commands)
        patch = Path(run.fields()["patch"]).read_bytes()
        assert b"+a2" not in patch and b"+x" in patch
