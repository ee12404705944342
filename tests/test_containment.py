"""The command stays in its worktree: it is never entered through a
symbolic link, never removed through a mount point or on the word of a
forged record, and git run inside it sees the worktree as its top."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, registered_worktrees, repo_state, tree_manifest

# -- the caller's folder is a symbolic link at the base ----------------------


def _pr_with(repo: Path, env: dict[str, str], files: dict[str, str]) -> None:
    """Branch ``pr``: ``src`` replaced by what ``files`` says."""
    git("checkout", "-q", "-b", "pr", cwd=repo, env=env)
    git("rm", "-q", "-r", "src", cwd=repo, env=env)
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("symlink:"):
            os.symlink(content[len("symlink:") :], path)
        else:
            path.write_text(content)
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "pr", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)


@pytest.mark.parametrize(
    "link",
    [
        pytest.param("../../..", id="relative-out-of-the-worktree"),
        pytest.param("ABSOLUTE", id="absolute"),
        pytest.param("lib", id="inside-the-worktree"),
    ],
)
def test_a_symbolic_link_where_you_stand_at_the_base_is_refused(
    env, make_repo, tmp_path: Path, link: str, no_leftovers
) -> None:
    repo = make_repo({"src/a.py": "x = 1\n", "lib/b.py": "y = 2\n"})
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "c.py").write_text("z   =   3\n")
    target = str(victim) if link == "ABSOLUTE" else link
    _pr_with(repo, env, {"src": f"symlink:{target}"})
    before = repo_state(repo, env)
    victim_before = tree_manifest(victim)
    run = isopatch(
        "--base",
        "pr",
        "--",
        "sh",
        "-c",
        "mkdir made && touch made/x && echo hi > new",
        cwd=repo / "src",
        env=env,
    )
    assert run.returncode == 128, run.err
    assert run.err == (
        "fatal: 'src' is a symbolic link at the base; refusing to run the command there\n"
        "hint: run it from a folder that is a folder at the base, or from the top of the "
        "work tree\n"
    )
    assert tree_manifest(victim) == victim_before
    assert repo_state(repo, env) == before
    assert registered_worktrees(repo, env) == []


def test_a_nested_link_and_a_file_where_you_stand_are_refused(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"src/deep/a.py": "x = 1\n", "src/b.py": "y\n"})
    _pr_with(repo, env, {"src/deep": "symlink:.", "src/b.py": "y\n"})
    run = isopatch("--base", "pr", "--json", "--", "touch", "x", cwd=repo / "src" / "deep", env=env)
    assert run.returncode == 128
    assert json.loads(run.out)["error-code"] == "prefix-not-a-folder"
    assert "'src/deep' is a symbolic link at the base" in run.err

    git("branch", "-q", "-D", "pr", cwd=repo, env=env)
    _pr_with(repo, env, {"src": "a file now\n"})
    run = isopatch("--base", "pr", "--", "touch", "x", cwd=repo / "src" / "deep", env=env)
    assert run.returncode == 128
    assert run.err.startswith("fatal: 'src' is not a folder at the base;"), run.err


def test_a_folder_missing_at_the_base_is_made_and_entered(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"README": "x\n"})
    (repo / "new" / "deeper").mkdir(parents=True)
    run = isopatch(
        "--porcelain", "--", "sh", "-c", "pwd; echo x > f", cwd=repo / "new" / "deeper", env=env
    )
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text().strip().endswith("/repo/new/deeper")
    assert b"+++ b/new/deeper/f" in Path(run.fields()["patch"]).read_bytes()


# -- a forged record never removes a worktree git-isopatch did not make -----


def _users_worktree(repo: Path, env: dict[str, str], tmp_path: Path) -> tuple[Path, Path]:
    """The user's own linked worktree with uncommitted work, and its
    private folder ``$GIT_COMMON_DIR/worktrees/<id>``."""
    feature = tmp_path / "feature"
    git("worktree", "add", "-q", "-b", "feature", feature, cwd=repo, env=env)
    (feature / "unsaved.txt").write_text("hours of work\n")
    return feature, repo / ".git" / "worktrees" / "feature"


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _forge_record(admin: Path, *, folder: str, kept: bool) -> None:
    record = {
        "pid": _dead_pid(),
        "host": socket.gethostname(),
        "start_ticks": 1,
        "created": 1.0,
        "tmpdir": folder,
        "base": "0" * 40,
        "command": ["true"],
        "kept": kept,
        "version": 1,
    }
    (admin / "isopatch.json").write_text(json.dumps(record))


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "orphaned"])
@pytest.mark.parametrize("folder", ["parent", "elsewhere"])
def test_prune_never_removes_a_worktree_with_a_forged_record(
    env, make_repo, tmp_path: Path, kept: bool, folder: str
) -> None:
    repo = make_repo()
    feature, admin = _users_worktree(repo, env, tmp_path)
    named = str(tmp_path) if folder == "parent" else str(tmp_path / "git-isopatch-abcdefgh")
    _forge_record(admin, folder=named, kept=kept)
    before = tree_manifest(feature)
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert listed.returncode == 0 and listed.out == "", listed.out
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert pruned.out == ""
    assert tree_manifest(feature) == before
    assert registered_worktrees(repo, env) == [f"worktree {feature}"]


def test_prune_never_removes_a_worktree_locked_with_a_forged_reason(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    feature, _ = _users_worktree(repo, env, tmp_path)
    reason = f"git-isopatch pid {_dead_pid()} on {socket.gethostname()} started 1"
    git("worktree", "lock", "--reason", reason, feature, cwd=repo, env=env)
    before = tree_manifest(feature)
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert (pruned.returncode, pruned.out) == (0, ""), pruned.err
    assert tree_manifest(feature) == before
    assert registered_worktrees(repo, env) == [f"worktree {feature}"]


def test_max_worktrees_never_evicts_a_worktree_with_a_forged_record(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo()
    feature, admin = _users_worktree(repo, env, tmp_path)
    _forge_record(admin, folder=str(tmp_path), kept=True)
    git("config", "isopatch.maxWorktrees", "1", cwd=repo, env=env)
    before = tree_manifest(feature)
    run = isopatch("--porcelain", "--", "touch", "made", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning" not in run.err
    assert tree_manifest(feature) == before
    assert registered_worktrees(repo, env) == [f"worktree {feature}"]


# -- a mount point in the worktree: kept, never removed through -------------


@pytest.fixture
def victim(tmp_path: Path):
    """A folder the command bind-mounts into its worktree; every mount of it
    is undone after the test."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("do not delete\n")
    probe = subprocess.run(["mount", "--bind", folder, folder], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root and mount): {probe.stderr.strip()}")
    subprocess.run(["umount", folder], check=True)
    yield folder
    with open("/proc/self/mountinfo") as handle:
        mounts = [line.split()[4] for line in handle]
    for mountpoint in reversed(mounts):
        if mountpoint.startswith(str(tmp_path) + "/") and mountpoint != str(folder):
            subprocess.run(["umount", "-l", mountpoint], check=False)


@pytest.mark.parametrize("where", ["m", "deep/er/m", "../m"])
def test_a_bind_mount_left_in_the_worktree_is_never_removed_through(
    env, make_repo, victim: Path, where: str
) -> None:
    repo = make_repo()
    run = isopatch(
        "--porcelain",
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


def test_git_work_tree_in_the_environment_never_reaches_the_command(
    env, make_repo, no_leftovers
) -> None:
    repo = make_repo()
    hook_like = {**env, "GIT_DIR": str(repo / ".git"), "GIT_WORK_TREE": str(repo)}
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        "git rev-parse --show-toplevel; pwd -P",
        cwd=repo,
        env=hook_like,
    )
    assert run.returncode == 0, run.err
    top, here = Path(run.fields()["stdout"]).read_text().splitlines()
    assert top == here != str(repo)


# -- a copy never leads outside the worktree --------------------------------


def _config_with_links(repo: Path, tmp_path: Path) -> None:
    """Ignored ``config/`` with an absolute link into the user's checkout,
    a relative one that climbs out of the repository, and one inside."""
    (repo / "mine.txt").write_text("the user's own\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    config = repo / "config"
    config.mkdir()
    (config / "a.txt").write_text("a\n")
    os.symlink(repo / "mine.txt", config / "absolute")
    os.symlink("../../outside.txt", config / "climbs")
    os.symlink("a.txt", config / "inner")


def test_copy_replaces_links_that_lead_outside_with_what_they_point_to(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "config/\nmine.txt\n"})
    _config_with_links(repo, tmp_path)
    script = (
        "cat config/absolute config/climbs; readlink config/inner; "
        "test ! -L config/absolute && test ! -L config/climbs && "
        "echo changed > config/absolute && echo changed > config/climbs"
    )
    run = isopatch("--porcelain", "--copy", "config", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text() == "the user's own\noutside\na.txt\n"
    assert (repo / "mine.txt").read_text() == "the user's own\n"
    assert (tmp_path / "outside.txt").read_text() == "outside\n"
    assert os.readlink(repo / "config" / "absolute") == str(repo / "mine.txt")


def test_copy_of_a_folder_link_leading_outside_copies_the_folder(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "deps/\n"})
    shared = tmp_path / "shared"
    (shared / "pkg").mkdir(parents=True)
    (shared / "pkg" / "mod.txt").write_text("shared\n")
    (repo / "deps").mkdir()
    os.symlink(shared, repo / "deps" / "shared")
    run = isopatch(
        "--copy",
        "deps",
        "--",
        "sh",
        "-c",
        "echo changed > deps/shared/pkg/mod.txt",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert (shared / "pkg" / "mod.txt").read_text() == "shared\n"


def test_copy_with_a_dangling_link_leading_outside_is_refused(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "config/\n"})
    (repo / "config").mkdir()
    os.symlink(tmp_path / "nowhere", repo / "config" / "gone")
    before = repo_state(repo, env)
    run = isopatch("--json", "--copy", "config", "--", "touch", "x", cwd=repo, env=env)
    assert run.returncode == 128
    assert json.loads(run.out)["error-code"] == "bad-include-path"
    assert run.err == (
        "fatal: --copy 'config': the symbolic link 'config/gone' leads outside the "
        "worktree and points nowhere\n"
    )
    assert repo_state(repo, env) == before
    assert registered_worktrees(repo, env) == []


def test_worktreeinclude_entry_that_cannot_be_copied_is_skipped_with_a_warning(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "config/\n.env\n", ".worktreeinclude": "config/\n.env\n"})
    (repo / "config").mkdir()
    os.symlink(tmp_path / "nowhere", repo / "config" / "gone")
    (repo / ".env").write_text("KEY=1\n")
    run = isopatch(
        "--porcelain", "--", "sh", "-c", "test ! -e config && cat .env", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.err == (
        "warning: .worktreeinclude 'config': the symbolic link 'config/gone' leads outside "
        "the worktree and points nowhere; skipped\n"
    )
    assert Path(run.fields()["stdout"]).read_text() == "KEY=1\n"
