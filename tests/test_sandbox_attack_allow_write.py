"""``--allow-write`` of a path that holds the user's repository, or lies in
its git directory: the command must still not write the user's work tree
nor the repository's configuration, hooks or refs (design: "The promise").
The checkout and the git directory stay copy-on-write inside the allowed
path, whose other files are really written, and what the command wrote
there is reported as discarded, as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import isopatch, repo_state

#: Writes the user's checkout, its git directory's configuration, a hook
#: and a ref, and a file beside the checkout, by their absolute paths;
#: then changes its worktree and commits there (the objects go to the
#: layer of the git directory).
SCRIPT = """\
echo changed >> "$REPO/README"
git config -f "$REPO/.git/config" core.fsmonitor "touch $REPO/fsmonitor-ran"
echo 'echo hooked' > "$REPO/.git/hooks/pre-commit"; chmod +x "$REPO/.git/hooks/pre-commit"
git -C "$REPO" update-ref refs/heads/planted HEAD
echo written > "$BESIDE" 2>/dev/null || true
echo fine > ok.txt
echo c > c.txt; git add c.txt; git -c user.name=t -c user.email=t@t commit -qm inside
"""


@pytest.mark.hostile
@pytest.mark.parametrize("allowed", ["parent", "checkout", "git-dir", "hooks"])
def test_an_allowed_path_holding_the_repository_keeps_it_copy_on_write(
    env, make_repo, tmp_path: Path, no_leftovers, allowed
) -> None:
    repo = make_repo({"README": "hello\n"})
    before = repo_state(repo, env)
    beside = tmp_path / "beside.txt"
    path = {
        "parent": tmp_path,
        "checkout": repo,
        "git-dir": repo / ".git",
        "hooks": repo / ".git" / "hooks",
    }[allowed]
    run = isopatch(
        "--porcelain", "--sandbox", "--allow-write", path, "--", "sh", "-c", SCRIPT,
        cwd=repo, env={**env, "REPO": str(repo), "BESIDE": str(beside)},
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert sorted(p.name for p in repo.iterdir()) == [".git", "README"]
    records = run.out.splitlines()
    assert "path A ok.txt" in records and "path A c.txt" in records
    shared = [r for r in records if r.startswith("shared-write ")]
    assert shared and all(r.endswith(" discarded") for r in shared), records
    assert f"outside-write {repo / 'README'}" in records
    # the rest of an allowed folder above the checkout is really written
    assert beside.exists() == (allowed == "parent")
