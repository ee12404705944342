"""The record store (design: Architecture, ``worktrees/``): a record that is
not what git-isopatch writes (a field of the wrong type, not JSON) is
corrupt; ``list`` and ``prune`` name it in one ``warning:`` and go on,
never with a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")

CORRUPTIONS = {
    "command-not-a-list": lambda r: {**r, "command": 7},
    "command-not-strings": lambda r: {**r, "command": ["true", 1]},
    "pid-a-string": lambda r: {**r, "pid": "12"},
    "kept-a-number": lambda r: {**r, "kept": 1},
    "created-missing": lambda r: {k: v for k, v in r.items() if k != "created"},
    "not-an-object": lambda r: [r],
}


def _kept_worktree(repo: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A kept worktree of git-isopatch and its record file."""
    kept = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    worktree = Path(kept.fields()["worktree"])
    (record,) = (repo / ".git" / "worktrees").glob("*/isopatch.json")
    return worktree, record


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_a_record_of_the_wrong_shape_is_one_warning(env, make_repo, corrupt: str) -> None:
    repo = make_repo()
    worktree, record = _kept_worktree(repo, env)
    record.write_text(json.dumps(CORRUPTIONS[corrupt](json.loads(record.read_text()))))
    warning = f"warning: ignoring the corrupt record '{record}' ("
    for args in (["list"], ["list", "--json"], ["prune", "-v"], ["prune", "-n"]):
        run = isopatch(*args, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        assert "Traceback" not in run.err and "bug" not in run.err
        lines = run.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(warning), run.err
    assert worktree.is_dir(), "a worktree whose record is corrupt is not proven ours"
    git("worktree", "remove", "--force", "--force", worktree, cwd=repo, env=env)


def test_a_record_that_is_not_json_is_one_warning(env, make_repo) -> None:
    repo = make_repo()
    worktree, record = _kept_worktree(repo, env)
    record.write_bytes(b'{"pid": \xff')
    run = isopatch("list", cwd=repo, env=env)
    assert (run.returncode, run.out) == (0, "")
    assert run.err == f"warning: ignoring the corrupt record '{record}' (not JSON)\n"
    git("worktree", "remove", "--force", "--force", worktree, cwd=repo, env=env)


def test_a_run_beside_a_corrupt_record_goes_on(env, make_repo) -> None:
    repo = make_repo()
    worktree, record = _kept_worktree(repo, env)
    record.write_text('{"command": 7}')
    git("config", "isopatch.pool", "1", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "sh", "-c", "echo x > x", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "1"
    assert "Traceback" not in run.err
    git("worktree", "remove", "--force", "--force", worktree, cwd=repo, env=env)


def test_a_kept_worktree_s_record_holds_the_fields_older_versions_read(env, make_repo) -> None:
    """``isopatch.json`` holds every field, in the order earlier versions
    wrote them, and reads back as the same record."""
    from git_isopatch.worktrees.store import GitMetadataStore

    repo = make_repo({"a.txt": "a\n"})
    _, record = _kept_worktree(repo, env)
    data = json.loads(record.read_text())
    assert list(data) == [
        "pid", "host", "start_ticks", "created", "tmpdir", "base",
        "command", "kept", "version", "pooled", "container", "session",
    ]  # fmt: skip
    assert data["command"] == ["true"] and data["kept"] is True and data["version"] == 2
    loaded = GitMetadataStore().load(str(record.parent))
    assert loaded is not None and loaded.as_dict() == data
    assert loaded == GitMetadataStore().load(str(record.parent))
    loaded.kept = False
    assert loaded != GitMetadataStore().load(str(record.parent))
