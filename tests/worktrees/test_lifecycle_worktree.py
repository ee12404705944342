"""Making and removing the worktree (design: procedure steps 3 and 7):
no repository hook runs (githooks(5): not ``post-checkout``, not
``reference-transaction``, not ``post-index-change``); what the command
leaves behind (ignored build output, initialized submodules, a bind mount,
a submodule sharing ``core.worktree``) never makes removal fail, reach
through, or leave a registered worktree behind; the user's stale and
locked worktrees are left alone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hostile import admin_dirs, script
from repo_helpers import (
    apply_to_clean_checkout,
    git,
    isopatch,
    repo_state,
    tree_manifest,
)

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")

# -- a mount point in the worktree: kept, never removed through -------------


# -- git inside the worktree sees the worktree as its top -------------------
def _submodule_with_shared_core_worktree(
    make_repo, env: dict[str, str], tmp_path: Path, *, worktree_config: bool
) -> tuple[Path, Path]:
    """A superproject with submodule ``sub`` whose repository
    ``.git/modules/sub`` has ``core.worktree`` in its shared ``config`` and,
    with ``worktree_config``, ``extensions.worktreeConfig=true`` (what
    ``git sparse-checkout init`` of git before 2.36 left behind)."""
    lib = make_repo({"f.txt": "lib\n"}, name="lib")
    top = make_repo({"README": "super\n"}, name="super")
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "sub", cwd=top, env=env)
    git("commit", "-q", "-m", "sub", cwd=top, env=env)
    modules = top / ".git" / "modules" / "sub"
    if worktree_config:
        git(
            "config",
            "-f",
            modules / "config",
            "extensions.worktreeConfig",
            "true",
            cwd=top,
            env=env,
        )
    assert git("config", "-f", modules / "config", "core.worktree", cwd=top, env=env).strip()
    return top / "sub", modules


def _files_of(repository: Path) -> dict:
    manifest = tree_manifest(repository)
    ours = (b"isopatch.lock", b"isopatch-results.stamp")
    return {path: what for path, what in manifest.items() if path not in ours}


#: The hooks git would run while git-isopatch works.
HOOKS = ("post-checkout", "reference-transaction", "post-index-change")


def _plant_hooks(folder: Path, marks: Path) -> None:
    for name in HOOKS:
        script(folder / name, f'echo "{name} $* in $(pwd)" >> {marks}/{name}\n')


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


@pytest.mark.parametrize("where", ["m", "deep/er/m", "../m"])
def test_a_bind_mount_left_in_the_worktree_is_never_removed_through(
    env, make_repo, victim: Path, where: str
) -> None:
    repo = make_repo()
    run = isopatch(
        "--porcelain",
        "--no-sandbox",  # the sandbox refuses mount
        "--",
        "sh",
        "-c",
        f'mkdir -p "{where}" && mount --bind "{victim}" "{where}"',
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert (victim / "precious.txt").read_text() == "do not delete\n"
    if where == "../m":  # beside the worktree, in the folder made for it
        assert "worktree" not in run.fields()
        assert run.err.startswith("warning: not removing '"), run.err
        assert "/m' is a mount point\n" in run.err
        return
    kept = run.fields()["worktree"]
    assert run.err == (
        f"warning: not removing worktree '{kept}': '{kept}/{where}' is a mount point in it\n"
    )
    assert (Path(kept) / where / "precious.txt").exists()
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert f"worktree {kept}\nstate kept\n" in listed.out
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert (pruned.returncode, pruned.out) == (1, "")
    assert pruned.err == (
        f"error: could not prune '{kept}': '{kept}/{where}' is a mount point in it\n"
    )
    assert (victim / "precious.txt").read_text() == "do not delete\n"
    subprocess.run(["umount", f"{kept}/{where}"], check=True)
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.out == f"Removing {kept}: kept\n", pruned.err
    assert not Path(kept).exists()
    assert (victim / "precious.txt").read_text() == "do not delete\n"


@pytest.mark.parametrize("worktree_config", [True, False], ids=["worktreeConfig", "plain"])
def test_git_clean_in_a_submodule_never_reaches_its_repository(
    env, make_repo, tmp_path: Path, worktree_config: bool, no_leftovers
) -> None:
    sub, modules = _submodule_with_shared_core_worktree(
        make_repo, env, tmp_path, worktree_config=worktree_config
    )
    before = _files_of(modules)
    run = isopatch("-q", "--", "git", "clean", "-fdq", cwd=sub, env=env)
    assert run.returncode == 0, run.err
    assert _files_of(modules) == before
    run = isopatch(
        "--porcelain", "--", "sh", "-c", "git rev-parse --show-toplevel; pwd -P", cwd=sub, env=env
    )
    assert run.returncode == 0, run.err
    top, here = Path(run.fields()["stdout"]).read_text().splitlines()
    assert top == here and Path(top).name == "sub"
    assert Path(top).parent.name.startswith("sub.isopatch-")


@pytest.mark.hostile
@pytest.mark.parametrize("where", [".git/hooks", "core.hooksPath", "global", "husky"])
def test_making_the_worktree_runs_no_hook(env, make_repo, tmp_path: Path, where: str) -> None:
    repo = make_repo()
    marks = tmp_path / "marks"
    marks.mkdir()
    if where == ".git/hooks":
        _plant_hooks(repo / ".git" / "hooks", marks)
    elif where == "core.hooksPath":
        _plant_hooks(tmp_path / "hooks", marks)
        git("config", "core.hooksPath", tmp_path / "hooks", cwd=repo, env=env)
    elif where == "global":
        _plant_hooks(tmp_path / "hooks", marks)
        git("config", "--global", "core.hooksPath", tmp_path / "hooks", cwd=repo, env=env)
    else:  # husky: tracked hooks, a relative core.hooksPath
        _plant_hooks(repo / ".husky" / "_", marks)
        git("add", ".husky", cwd=repo, env=env)
        git("commit", "-q", "--no-verify", "-m", "husky", cwd=repo, env=env)
        git("config", "core.hooksPath", ".husky/_", cwd=repo, env=env)
        for mark in marks.iterdir():
            mark.unlink()
    before = repo_state(repo, env)

    run = isopatch("--porcelain", "--", "sh", "-c", "echo new > new.txt", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"+++ b/new.txt" in Path(run.fields()["patch"]).read_bytes()
    assert {p.name: p.read_text() for p in marks.iterdir()} == {}
    assert repo_state(repo, env) == before

    # the witness: the same hooks do run for git's own worktree add and add
    git("worktree", "add", "-q", "--detach", tmp_path / "by-hand", cwd=repo, env=env)
    (tmp_path / "by-hand" / "new.txt").write_text("new\n")
    git("add", "new.txt", cwd=tmp_path / "by-hand", env=env)
    assert sorted(p.name for p in marks.iterdir()) == sorted(HOOKS)


@pytest.mark.hostile
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
    rewrote = f"warning: the command rewrote '{repo / '.git' / 'worktrees'}/repo"
    if break_registration:  # the run's registration (the base tree's may hold "repo")
        assert run.err.startswith(rewrote) and run.err.count("\n") == 1, run.err
        assert run.err.endswith("/gitdir'; put back\n"), run.err
    else:
        assert run.err == ""
    assert "worktree" not in fields
    assert b"+++ b/new.txt" in Path(fields["patch"]).read_bytes()
    assert repo_state(repo, env) == before
    assert _admin_snapshot(repo, env) == admin_before


@pytest.mark.hostile
def test_a_worktree_that_cannot_be_removed_is_reported(env, make_repo, tmp_path: Path) -> None:
    """An immutable file (``chattr +i``) stops both ``git worktree remove``
    and the fall-back: the user is told which folder is left and why, in
    one ``warning:`` line and the ``worktree`` field; git has dropped its
    registration, so nothing is left registered."""
    repo = make_repo()
    before = repo_state(repo, env)
    command = "echo new > new.txt; echo stuck > stuck; chattr +i stuck"
    # unconfined: the sandbox refuses chattr
    run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", command, cwd=repo, env=env)
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


@pytest.mark.hostile
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


@pytest.mark.hostile
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
