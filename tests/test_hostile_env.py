"""Environment from hooks and aliases (issue 4): git exports GIT_DIR,
GIT_WORK_TREE, GIT_INDEX_FILE, GIT_PREFIX and friends to hooks and ``!``
aliases.  git-isopatch finds the user's repository from them as git would,
and none of them reaches a git call in the worktree or the command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile import script, shell
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state, tree_manifest

from git_isopatch.git.run import LOCAL_REPO_ENV

#: What the command in the hook or alias does: rewrites a tracked file, adds
#: a file, stages everything and commits, in the worktree (``--no-verify``:
#: the hook that runs git isopatch would otherwise fire again for this
#: commit, and again, without end).
COMMAND = (
    "printf 'formatted\\n' > README; echo new > new.txt; git add -A; "
    "git commit --no-verify -qm inside"
)


def _head(repo: Path, env: dict[str, str]) -> str:
    return git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()


def _patched_checkout(repo: Path, base: str, patch: Path, dest: Path, env) -> dict:
    return tree_manifest(apply_to_clean_checkout(repo, base, patch, dest, env))


def _expected_after_command(repo: Path, base: str, tmp_path: Path, env) -> dict:
    """The tree COMMAND leaves on a clean checkout of ``base``."""
    dest = tmp_path / "expected"
    git("clone", "-q", "--shared", "--no-checkout", repo, dest, cwd=tmp_path, env=env)
    git("checkout", "-q", "--detach", base, cwd=dest, env=env)
    (dest / "README").write_text("formatted\n")
    (dest / "new.txt").write_text("new\n")
    return tree_manifest(dest)


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
    assert git("worktree", "list", "--porcelain", cwd=repo, env=env).count(b"worktree ") == (
        2 if style == "linked" else 1
    )


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
        f'!{cd}git isopatch --porcelain -o "$OUT/alias.patch" -- sh -c {shell(inner)}',
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


def _hostile_repo_env(repo: Path, tmp_path: Path) -> dict[str, str]:
    """Every repository variable git knows, pointing at the user's
    repository or at something wrong."""
    empty_objects = tmp_path / "empty-objects"
    (empty_objects / "info").mkdir(parents=True)
    (empty_objects / "pack").mkdir()
    return {
        "GIT_DIR": str(repo / ".git"),
        "GIT_WORK_TREE": str(repo),
        "GIT_INDEX_FILE": str(repo / ".git" / "index"),
        "GIT_OBJECT_DIRECTORY": str(empty_objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(empty_objects),
        "GIT_COMMON_DIR": str(repo / ".git"),
        "GIT_PREFIX": "sub/",
        "GIT_NAMESPACE": "hostile",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_GRAFT_FILE": str(tmp_path / "grafts"),
        "GIT_SHALLOW_FILE": str(tmp_path / "shallow"),
        "GIT_QUARANTINE_PATH": str(empty_objects),
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_IMPLICIT_WORK_TREE": "0",
    }


def test_repository_variables_never_reach_the_worktree(env, make_repo, tmp_path: Path) -> None:
    """With every repository variable set (as a hook of a ``git --git-dir``
    invocation, a pre-receive hook or a namespace would have them), the
    command's ``git add``/``git commit`` act on the worktree, the user's
    index and object store are untouched, and the command sees none of them."""
    repo = make_repo({"README": "hello\n", "sub/file": "one\n"})
    (repo / "sub" / "file").write_text("staged\n")
    git("add", "sub/file", cwd=repo, env=env)
    out = tmp_path / "out"
    out.mkdir()
    base = _head(repo, env)
    before = repo_state(repo, env)
    objects_before = sorted((repo / ".git" / "objects").rglob("*"))
    hostile = {**env, **_hostile_repo_env(repo, tmp_path), "OUT": str(out)}
    command = COMMAND + '; env > "$OUT/command.env"'
    run = isopatch("--porcelain", "--", "sh", "-c", command, cwd=repo, env=hostile)
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    fields = run.fields()
    assert fields["base"] == base
    # the command's commit went to the shared object store: new objects only
    objects_after = set((repo / ".git" / "objects").rglob("*"))
    assert set(objects_before) <= objects_after
    assert not list((tmp_path / "empty-objects").rglob("*/*"))
    expected = _expected_after_command(repo, base, tmp_path, env)
    got = _patched_checkout(repo, base, Path(fields["patch"]), tmp_path / "checkout", env)
    assert got == expected
    command_env = (out / "command.env").read_text()
    leaked = [v for v in LOCAL_REPO_ENV if f"\n{v}=" in "\n" + command_env]
    assert not leaked


def test_git_c_settings_reach_the_command_as_git_passes_them_on(
    env, make_repo, tmp_path: Path
) -> None:
    """``git -c k=v isopatch`` puts ``k=v`` in GIT_CONFIG_PARAMETERS; git
    keeps it for commands it runs in another repository (submodules,
    ``prepare_other_repo_env``), so the command's git sees it too."""
    repo = make_repo()
    out = git(
        "-c",
        "isopatch-test.colour=blue",
        "isopatch",
        "--porcelain",
        "--",
        "sh",
        "-c",
        "git config isopatch-test.colour > colour.txt",
        cwd=repo,
        env=env,
    )
    fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
    assert b"+blue\n" in Path(fields["patch"]).read_bytes()


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
