"""Finding and verifying the repository (design: procedure steps 1-2):
from the variables git exports to hooks and aliases as git would; a bare
repository with its worktrees inside its folder; a checkout that is itself
a linked worktree or has a ``.git`` file; a SHA-256 repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from commit_helpers import COMMAND, _expected_after_command, _head, _patched_checkout
from hostile import script, shell
from repo_helpers import (
    apply_to_clean_checkout,
    base_trees,
    git,
    isopatch,
    registered_worktrees,
    repo_state,
    tree_manifest,
)

from git_isopatch.git.run import LOCAL_REPO_ENV


def _oracle(cwd: Path, env: dict[str, str]) -> tuple[str, str] | None:
    """(``git rev-parse --show-prefix``, ``HEAD``) as git itself resolves them
    in ``cwd`` with ``env``; ``None`` when git refuses."""
    prefix = git("rev-parse", "--show-prefix", cwd=cwd, env=env, check=False)
    head = git("rev-parse", "HEAD", cwd=cwd, env=env, check=False)
    if not head.strip():
        return None
    return prefix.decode().strip(), head.decode().strip()


CASES = {
    "top, relative GIT_DIR": ("", {"GIT_DIR": ".git"}),
    "top, GIT_DIR and GIT_WORK_TREE": ("", {"GIT_DIR": ".git", "GIT_WORK_TREE": "."}),
    "sub, relative GIT_DIR and GIT_WORK_TREE": (
        "sub",
        {"GIT_DIR": "../.git", "GIT_WORK_TREE": ".."},
    ),
    "sub, absolute GIT_DIR alone": ("sub", {"GIT_DIR": "{repo}/.git"}),
    "sub, GIT_WORK_TREE alone": ("sub", {"GIT_WORK_TREE": ".."}),
    "sub, GIT_WORK_TREE alone at sub": ("sub", {"GIT_WORK_TREE": "."}),
    "sub, GIT_PREFIX elsewhere": ("sub", {"GIT_PREFIX": "elsewhere/"}),
    "linked sub, its GIT_DIR and GIT_WORK_TREE": (
        "{linked}/sub",
        {"GIT_DIR": "{admin}", "GIT_WORK_TREE": "{linked}"},
    ),
    "linked top, its GIT_DIR": ("{linked}", {"GIT_DIR": "{admin}"}),
    "separate git dir, GIT_DIR": ("{separate}", {"GIT_DIR": "{separate_git}"}),
}


def _bare_with_worktree_inside(make_repo, tmp_path: Path, env) -> Path:
    """``git clone --bare up bare; cd bare; git worktree add branches/main
    main``, with an ignored ``node_modules`` in the worktree; returns the
    worktree."""
    up = make_repo({"f": "x\n", ".gitignore": "node_modules/\n"}, name="up")
    git("clone", "-q", "--bare", up, tmp_path / "bare", cwd=tmp_path, env=env)
    git("worktree", "add", "-q", "branches/main", "main", cwd=tmp_path / "bare", env=env)
    worktree = tmp_path / "bare" / "branches" / "main"
    (worktree / "node_modules").mkdir()
    (worktree / "node_modules" / "dep").write_text("dep\n")
    return worktree


@pytest.mark.hostile
def test_a_sha256_repository_is_captured_through_git(env, tmp_path) -> None:
    """pygit2's libgit2 reads SHA-1 repositories only; git reads SHA-256 ones
    (git-init(1), ``--object-format``), and where libgit2 refuses, git is
    asked: the capture, its round trip and the pool work as in SHA-1."""
    repo = tmp_path / "sha256"
    repo.mkdir()
    git("init", "-q", "-b", "main", "--object-format=sha256", cwd=repo, env=env)
    (repo / "a").write_text("a\n")
    (repo / "b").write_bytes(b"bin\0x")
    git("add", ".", cwd=repo, env=env)
    git("commit", "-q", "-m", "base", cwd=repo, env=env)
    before = repo_state(repo, env)
    change = "echo b >> a; printf '\\0\\1' >> b; ln -s a link; git commit -qam inside; echo n > new"
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", change, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert len(fields["base"]) == 64 and fields["files"] == "4"
    applied = apply_to_clean_checkout(
        repo, fields["base"], Path(fields["patch"]), tmp_path / "clean", env
    )
    assert tree_manifest(applied) == tree_manifest(Path(fields["worktree"]))
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    for _ in range(2):  # the second run claims the worktree the first returned
        pooled = isopatch(
            "--porcelain", "--", "sh", "-c", "echo x >> a",
            cwd=repo, env=env, git_options=("-c", "isopatch.pool=1"),
        )  # fmt: skip
        assert pooled.returncode == 0 and pooled.fields()["files"] == "1", pooled.err
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    after = repo_state(repo, env)
    assert after == before


@pytest.mark.hostile
@pytest.mark.parametrize("style", ["staged", "all", "paths", "git-dir-option", "linked"])
def test_isopatch_in_a_pre_commit_hook(env, make_repo, tmp_path: Path, style: str) -> None:
    """A real pre-commit hook runs git isopatch whose command stages and
    commits in the worktree.  The hook sees GIT_INDEX_FILE (relative for a
    plain commit, ``index.lock`` for ``commit -a``, a temporary index for
    ``commit <path>``), GIT_DIR (relative with ``--git-dir``, absolute in a
    linked worktree) and GIT_PREFIX.  The user's commit holds exactly what
    the user staged, and the patch is the command's change."""
    repo = make_repo({"README": "hello\n", "sub/file": "one\n"})
    out = tmp_path / "out"
    out.mkdir()
    hook_env = {**env, "OUT": str(out)}
    script(
        repo / ".git" / "hooks" / "pre-commit",
        'env > "$OUT/hook.env"\n'
        f'git isopatch --porcelain -o "$OUT/hook.patch" -- sh -c {shell(COMMAND)} '
        '> "$OUT/porcelain" 2> "$OUT/stderr"\n',
    )
    where = repo
    if style == "linked":
        where = tmp_path / "linked"
        git("worktree", "add", "-q", "-b", "side", where, cwd=repo, env=env)
    base = _head(where, env)
    (where / "sub" / "file").write_text("two\n")
    (where / "untracked").write_text("mine\n")
    if style == "staged":
        git("add", "sub/file", cwd=where, env=env)
        git("commit", "-q", "-m", "user", cwd=where, env=hook_env)
    elif style == "all":
        git("commit", "-q", "-a", "-m", "user", cwd=where, env=hook_env)
    elif style == "paths":
        git("commit", "-q", "-m", "user", "file", cwd=where / "sub", env=hook_env)
    elif style == "git-dir-option":
        git("add", "sub/file", cwd=where, env=env)
        git(
            "--git-dir=.git", "--work-tree=.", "commit", "-q", "-m", "user", cwd=where, env=hook_env
        )
    else:
        git("commit", "-q", "-a", "-m", "user", cwd=where, env=hook_env)

    hook_vars = dict(
        line.split("=", 1) for line in (out / "hook.env").read_text().splitlines() if "=" in line
    )
    assert "GIT_INDEX_FILE" in hook_vars  # the environment is the hostile one
    if style == "git-dir-option":
        assert hook_vars["GIT_DIR"] == ".git"
    if style == "linked":
        assert os.path.isabs(hook_vars["GIT_DIR"])
    assert (out / "stderr").read_text() == ""
    fields = dict(line.split(" ", 1) for line in (out / "porcelain").read_text().splitlines())
    assert fields["base"] == base
    assert fields["exit"] == "0"

    # the user's commit holds the user's change only; nothing else is staged
    user_commit = _head(where, env)
    assert git("rev-parse", f"{user_commit}^", cwd=where, env=env).decode().strip() == base
    changed = git("diff", "--name-only", base, user_commit, cwd=where, env=env)
    assert changed == b"sub/file\n"
    assert git("status", "--porcelain", cwd=where, env=env) == b"?? untracked\n"
    assert (where / "README").read_text() == "hello\n"
    # and the patch is exactly the command's change
    expected = _expected_after_command(repo, base, tmp_path, env)
    got = _patched_checkout(repo, base, out / "hook.patch", tmp_path / "checkout", env)
    assert got == expected
    assert len(registered_worktrees(repo, env)) == (1 if style == "linked" else 0)


@pytest.mark.hostile
@pytest.mark.parametrize("cd_to_prefix", [False, True])
def test_isopatch_in_a_shell_alias(env, make_repo, tmp_path: Path, cd_to_prefix: bool) -> None:
    """git runs a ``!`` alias from the top of the work tree with GIT_PREFIX
    set (git-config(1), alias.*).  git isopatch acts on its working folder
    like every git command in an alias, so the command runs at the top; an
    alias that wants the caller's folder does ``cd "${GIT_PREFIX:-.}"``."""
    repo = make_repo({"README": "hello\n", "sub/file": "one\n"})
    (repo / "sub" / "untracked").write_text("mine\n")
    git("add", "--intent-to-add", "sub/untracked", cwd=repo, env=env)
    cd = 'cd "${GIT_PREFIX:-.}" && ' if cd_to_prefix else ""
    inner = 'git rev-parse --show-prefix > where.txt; env > "$OUT/command.env"; git add -A'
    git(
        "config",
        "alias.fmt",
        # $OUT is outside the worktree: really writable in the sandbox
        f'!{cd}git isopatch --porcelain --allow-write "$OUT" -o "$OUT/alias.patch" '
        f"-- sh -c {shell(inner)}",
        cwd=repo,
        env=env,
    )
    out = tmp_path / "out"
    out.mkdir()
    before = repo_state(repo, env)
    printed = git("fmt", cwd=repo / "sub", env={**env, "OUT": str(out)})
    assert repo_state(repo, env) == before
    fields = dict(line.split(" ", 1) for line in printed.decode().splitlines())
    patch = (out / "alias.patch").read_bytes()
    assert Path(fields["patch"]) == out / "alias.patch"
    where = "sub/" if cd_to_prefix else ""
    assert f"+++ b/{where}where.txt\n".encode() in patch
    assert f"+{where}\n".encode() in patch if where else b"+\n" in patch
    command_env = (out / "command.env").read_text()
    leaked = [v for v in LOCAL_REPO_ENV if f"\n{v}=" in "\n" + command_env]
    assert not leaked


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(CASES))
def test_repository_is_found_as_git_finds_it(env, make_repo, tmp_path: Path, case: str) -> None:
    """The base and the command's folder in the worktree are what git itself
    makes of the same GIT_DIR/GIT_WORK_TREE/GIT_PREFIX and folder
    (git(1), ENVIRONMENT)."""
    repo = make_repo({"README": "hello\n", "sub/file": "one\n"})
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", "-b", "side", linked, cwd=repo, env=env)
    (linked / "README").write_text("side\n")
    git("commit", "-q", "-am", "side", cwd=linked, env=env)
    separate = tmp_path / "separate"
    separate_git = tmp_path / "separate.git"
    git("init", "-q", "--separate-git-dir", separate_git, separate, cwd=tmp_path, env=env)
    (separate / "f").write_text("f\n")
    git("add", "f", cwd=separate, env=env)
    git("commit", "-q", "-m", "separate", cwd=separate, env=env)
    names = {
        "repo": str(repo),
        "linked": str(linked),
        "admin": str(repo / ".git" / "worktrees" / "linked"),
        "separate": str(separate),
        "separate_git": str(separate_git),
    }
    where, variables = CASES[case]
    cwd = Path(where.format(**names)) if where.startswith("{") else repo / where
    case_env = {**env, **{k: v.format(**names) for k, v in variables.items()}}
    expected = _oracle(cwd, case_env)
    assert expected is not None
    prefix, head = expected
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        "git rev-parse --show-prefix > where.txt",
        cwd=cwd,
        env=case_env,
    )
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["base"] == head
    patch = Path(fields["patch"]).read_bytes()
    assert f"+++ b/{prefix}where.txt\n".encode() in patch
    assert (f"+{prefix}\n" if prefix else "+\n").encode() in patch


@pytest.mark.hostile
def test_bare_git_dir_is_not_a_work_tree(env, make_repo, tmp_path: Path) -> None:
    """``GIT_DIR`` naming a bare repository without a work tree is refused as
    git refuses it, before anything is made."""
    repo = make_repo()
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", repo, bare, cwd=tmp_path, env=env)
    run = isopatch("--porcelain", "--", "true", cwd=tmp_path, env={**env, "GIT_DIR": str(bare)})
    assert run.returncode == 128
    assert run.err == "fatal: this operation must be run in a work tree\n"
    assert not (bare / "worktrees").exists()


@pytest.mark.hostile
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


@pytest.mark.hostile
def test_a_git_file_instead_of_a_folder(env, tmp_path: Path, no_leftovers) -> None:
    """``git init --separate-git-dir``: ``.git`` is a file naming the
    repository elsewhere; the worktree is registered there and removed, and
    the base tree kept is in that git directory too."""
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
    assert registered_worktrees(repo, env) == []
    (base,) = base_trees(repo, env)
    assert base.startswith(f"{separate / 'isopatch'}/")


@pytest.mark.parametrize("include", ["--copy", "--link"])
def test_a_worktree_inside_a_bare_repository_is_no_git_metadata(
    env, make_repo, tmp_path, include, no_leftovers
) -> None:
    worktree = _bare_with_worktree_inside(make_repo, tmp_path, env)
    before = repo_state(worktree, env)
    run = isopatch(
        "--porcelain", "-o", "out.patch", include, "node_modules", "--",
        "sh", "-c", "cat node_modules/dep > f",
        cwd=worktree, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert run.fields()["patch"] == str(worktree / "out.patch")
    (worktree / "out.patch").rename(tmp_path / "out.patch")
    assert repo_state(worktree, env) == before
    git("apply", tmp_path / "out.patch", cwd=worktree, env=env)
    assert (worktree / "f").read_text() == "dep\n"


@pytest.mark.parametrize("target", ["../../config", "../../newfile", ".git", ".git/x"])
def test_git_metadata_around_a_worktree_inside_a_bare_repository_is_refused(
    env, make_repo, tmp_path, target
) -> None:
    """The bare repository's own files, and the worktree's ``.git`` file,
    are git metadata still."""
    worktree = _bare_with_worktree_inside(make_repo, tmp_path, env)
    dotgit = (worktree / ".git").read_bytes()
    config = (tmp_path / "bare" / "config").read_bytes()
    run = isopatch("--porcelain", "-o", target, "--", "true", cwd=worktree, env=env)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: refusing to write the patch into the git directory")
    assert run.fields()["error-code"] == "bad-output"
    assert (worktree / ".git").read_bytes() == dotgit
    assert (tmp_path / "bare" / "config").read_bytes() == config
    assert not (tmp_path / "bare" / "newfile").exists()


def test_a_link_into_the_bare_repository_is_refused(env, make_repo, tmp_path) -> None:
    worktree = _bare_with_worktree_inside(make_repo, tmp_path, env)
    (worktree / "node_modules" / "up").symlink_to("../../../refs")
    run = isopatch("--copy", "node_modules/up", "--", "true", cwd=worktree, env=env)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: --copy 'node_modules/up' resolves to '")
    assert "outside the repository" in run.err
