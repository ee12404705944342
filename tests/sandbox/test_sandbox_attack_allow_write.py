"""``--allow-write`` of a path that holds the user's repository, or lies in
its git directory: the command must still not write the user's work tree
nor the repository's configuration, hooks or refs (design: "The promise").
The checkout and the git directory stay copy-on-write inside the allowed
path, whose other files are really written, and what the command wrote
there is reported as discarded, as it was."""

from __future__ import annotations

import os
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
    # (none at all where the refs cannot be listed in the namespaces: a
    # mount made under /tmp since the run began, as a parallel test does)
    shared = [r for r in records if r.startswith("shared-write ")]
    assert all(r.endswith(" discarded") for r in shared), records
    assert f"outside-write {repo / 'README'}" in records
    # the rest of an allowed folder above the checkout is really written
    assert beside.exists() == (allowed == "parent")


@pytest.mark.hostile
def test_the_patch_folder_swapped_for_a_link_is_not_followed(
    env, make_repo, tmp_path: Path
) -> None:
    """``-o`` into a folder the command may write (``--allow-write``): the
    command swaps the patch's folder for a link to a folder it may not
    write, where a file of the patch's name waits.  git-isopatch does not
    write there for it; the run fails and says why."""
    repo = make_repo({"README": "hello\n"})
    out, victim = tmp_path / "out", tmp_path / "victim"
    (out / "sub").mkdir(parents=True)
    victim.mkdir()
    (victim / "fix.patch").write_text("precious\n")
    swap = f"echo x > new; mv {out / 'sub'} {out / 'old'} && ln -s {victim} {out / 'sub'}"
    run = isopatch(
        "--porcelain", "--sandbox", "--allow-write", out, "-o", out / "sub" / "fix.patch",
        "--", "sh", "-c", swap, cwd=repo, env=env,
    )  # fmt: skip
    assert (victim / "fix.patch").read_text() == "precious\n"
    assert sorted(os.listdir(victim)) == ["fix.patch"]
    assert run.returncode == 128, run.err
    fields = run.fields()
    assert fields["error-code"] == "bad-output", run.out
    assert "replaced while the command ran" in fields["error"]
    assert (out / "sub").is_symlink() and os.listdir(out / "old") == []
