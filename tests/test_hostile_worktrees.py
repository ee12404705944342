"""Worktree life-cycle (issue 4): the user's stale and locked worktrees,
what the command leaves behind (ignored build output, initialized
submodules, a registration git cannot find), a repository that is itself a
linked worktree or has a ``.git`` file: none makes creation or removal fail
or leaves a registered worktree behind, and none of the user's own
registrations is touched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hostile import admin_dirs
from repo_helpers import (
    apply_to_clean_checkout,
    git,
    isopatch,
    registered_worktrees,
    repo_state,
)

#: The command breaks the link from its registration to its folder, so that
#: ``git worktree remove <path>`` cannot find it ("is not a working tree"):
#: removal must fall back to deleting the folder and that registration.
BREAK_REGISTRATION = 'echo /nowhere/.git > "$(git rev-parse --git-dir)/gitdir"'


def _admin_snapshot(repo: Path, env) -> dict[str, dict[str, bytes]]:
    """Every file of every registration in ``$GIT_COMMON_DIR/worktrees``."""
    return {
        folder.name: {
            str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()
        }
        for folder in admin_dirs(repo, env)
    }


def _users_own_worktrees(repo: Path, tmp_path: Path, env) -> None:
    """A stale registration (folder deleted by hand), a locked worktree, and
    a locked one whose folder is away (an unmounted drive)."""
    for name in ("stale", "locked", "away"):
        git("worktree", "add", "-q", "--detach", tmp_path / name, cwd=repo, env=env)
    git("worktree", "lock", "--reason", "mine", tmp_path / "locked", cwd=repo, env=env)
    git("worktree", "lock", tmp_path / "away", cwd=repo, env=env)
    for name in ("stale", "away"):
        subprocess.run(["rm", "-rf", str(tmp_path / name)], check=True)


@pytest.mark.parametrize("break_registration", [False, True])
def test_the_users_stale_and_locked_worktrees_are_left_alone(
    env, make_repo, tmp_path: Path, no_leftovers, break_registration: bool
) -> None:
    repo = make_repo()
    _users_own_worktrees(repo, tmp_path, env)
    before = repo_state(repo, env)
    admin_before = _admin_snapshot(repo, env)
    assert b"prunable" in before["worktree list"] and b"locked mine" in before["worktree list"]
    command = "echo new > new.txt"
    if break_registration:
        command += "; " + BREAK_REGISTRATION
    run = isopatch("--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    # a registration the command broke is put back before git runs again
    # there (and said), so that the worktree is removed as usual
    assert run.err == (
        f"warning: the command rewrote '{repo / '.git' / 'worktrees' / 'repo' / 'gitdir'}'; "
        "put back\n"
        if break_registration
        else ""
    )
    assert "worktree" not in fields
    assert b"+++ b/new.txt" in Path(fields["patch"]).read_bytes()
    assert repo_state(repo, env) == before
    assert _admin_snapshot(repo, env) == admin_before


def test_a_worktree_that_cannot_be_removed_is_reported(env, make_repo, tmp_path: Path) -> None:
    """An immutable file (``chattr +i``) stops both ``git worktree remove``
    and the fall-back: the user is told which folder is left and why, in
    one ``warning:`` line and the ``worktree`` field; git has dropped its
    registration, so nothing is left registered."""
    repo = make_repo()
    before = repo_state(repo, env)
    command = "echo new > new.txt; echo stuck > stuck; chattr +i stuck"
    run = isopatch("--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    fields = run.fields()
    worktree = Path(fields["worktree"])
    try:
        assert run.returncode == 0, run.err
        assert b"+++ b/new.txt" in Path(fields["patch"]).read_bytes()
        assert run.err.startswith(f"warning: could not remove worktree '{worktree}': ")
        assert "Operation not permitted" in run.err and run.err.count("\n") == 1
        assert sorted(os.listdir(worktree)) == ["stuck"]
        assert repo_state(repo, env) == before
        assert admin_dirs(repo, env) == []
    finally:
        subprocess.run(["chattr", "-i", str(worktree / "stuck")], check=False)


def test_ignored_build_output_is_removed_with_the_worktree(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """``node_modules`` and ``build`` (ignored) full of what package managers
    leave: nested folders, a nested repository, a read-only folder, a FIFO,
    links out of the worktree.  They stay out of the patch, go with the
    worktree, and nothing a link points at outside is deleted."""
    repo = make_repo({".gitignore": "node_modules/\nbuild/\n", "package.json": "{}\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me\n")
    command = f"""set -e
    mkdir -p node_modules/a/b/c node_modules/dep build/obj
    for i in 1 2 3 4 5; do echo "module $i" > node_modules/a/b/c/m$i.js; done
    git init -q node_modules/dep && echo dep > node_modules/dep/index.js
    mkdir node_modules/ro && echo ro > node_modules/ro/f && chmod 0555 node_modules/ro
    mkfifo build/fifo
    ln -s {outside} node_modules/outside-folder
    ln -s {outside / "precious"} build/outside-file
    echo obj > build/obj/main.o
    echo '{{"lock": 1}}' > package-lock.json
    """
    before = repo_state(repo, env)
    run = isopatch("--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"+++ b/package-lock.json" in patch
    assert b"node_modules" not in patch and b"build/" not in patch
    assert (outside / "precious").read_text() == "keep me\n"
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


def test_initialized_submodules_are_removed_with_the_worktree(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """The command initializes a submodule in the worktree (its repository
    goes to the worktree's own ``modules/``) and edits inside it: removal
    must not fail or leave anything registered (``git worktree remove``
    refuses initialized submodules unless forced)."""
    library = make_repo({"lib.c": "int lib;\n"}, name="library")
    repo = make_repo({"main.c": "int main;\n"})
    git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", library, "lib",
        cwd=repo, env=env,
    )  # fmt: skip
    git("commit", "-qm", "submodule", cwd=repo, env=env)
    before = repo_state(repo, env)
    modules_before = sorted((repo / ".git" / "modules").rglob("*"))
    command = (
        "git -c protocol.file.allow=always submodule update -q --init && "
        "echo edited >> lib/lib.c && echo 'int more;' >> main.c"
    )
    run = isopatch("--porcelain", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    # the edit inside the submodule is not in the patch, and says so
    assert run.err == (
        "warning: submodule 'lib' has changes that are not in the patch "
        "(--recurse-submodules captures them)\n"
    )
    fields = run.fields()
    assert "worktree" not in fields
    patch = Path(fields["patch"])
    assert b"+int more;" in patch.read_bytes()
    base = fields["base"]
    checkout = apply_to_clean_checkout(repo, base, patch, tmp_path / "checkout", env)
    assert (checkout / "main.c").read_text() == "int main;\nint more;\n"
    assert repo_state(repo, env) == before
    assert sorted((repo / ".git" / "modules").rglob("*")) == modules_before
    assert admin_dirs(repo, env) == []


def test_the_user_stands_in_a_linked_worktree(env, make_repo, tmp_path: Path, no_leftovers):
    repo = make_repo({"README": "main\n"})
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", "-b", "topic", linked, cwd=repo, env=env)
    (linked / "README").write_text("topic\n")
    git("commit", "-qam", "topic", cwd=linked, env=env)
    (linked / "README").write_text("work in progress\n")
    git("add", "README", cwd=linked, env=env)
    before = (repo_state(repo, env), repo_state(linked, env))
    run = isopatch("--porcelain", "--", "sh", "-c", "cat README > seen", cwd=linked, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["base"] == git("rev-parse", "topic", cwd=repo, env=env).decode().strip()
    assert b"+topic" in Path(fields["patch"]).read_bytes()
    assert (repo_state(repo, env), repo_state(linked, env)) == before
    assert registered_worktrees(repo, env) == [f"worktree {linked}"]


def test_a_git_file_instead_of_a_folder(env, tmp_path: Path, no_leftovers) -> None:
    """``git init --separate-git-dir``: ``.git`` is a file naming the
    repository elsewhere; the worktree is registered there and removed."""
    repo = tmp_path / "repo"
    separate = tmp_path / "elsewhere.git"
    git("init", "-q", "--separate-git-dir", separate, repo, cwd=tmp_path, env=env)
    (repo / "f").write_text("f\n")
    git("add", "f", cwd=repo, env=env)
    git("commit", "-qm", "f", cwd=repo, env=env)
    assert (repo / ".git").is_file()
    before = repo_state(repo, env)
    run = isopatch("--porcelain", "--", "sh", "-c", "echo g >> f", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"+g" in Path(run.fields()["patch"]).read_bytes()
    assert repo_state(repo, env) == before
    assert not (separate / "worktrees").exists()
