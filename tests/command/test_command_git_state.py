"""What git inside the worktree sees of the user's work (design: What it
does, "the configuration context"): under ``--staged`` and
``--include-uncommitted`` the user's ``HEAD`` commit is ``HEAD`` there and
the user's staged changes are staged (with ``--include-uncommitted``, the
unstaged and untracked work is unstaged and untracked), so ``git diff
--cached``, ``git status`` and the tools built on them (pre-commit, a hook
that lists the staged files) see what they see in the checkout.  The patch
is still the command's change against the snapshot, whatever the command
does to ``HEAD`` or the index, and the user's repository stays as it was.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state, write_tree

#: What the command prints of git's view: each look ends with a NUL line.
LOOKS = {
    "head": "git rev-parse --verify -q HEAD",
    "cached": "git diff --cached --name-status -M -z",
    "cached-content": "git diff --cached --binary --full-index",
    "unstaged": "git diff --name-status -z",
    "unstaged-content": "git diff --binary --full-index",
    "status": "git status --porcelain=v1 -z --untracked-files=all",
    "untracked": "git ls-files --others --exclude-standard -z",
}

LOOK_SCRIPT = "; ".join(f"{command}; printf '\\n@@\\n'" for command in LOOKS.values())


def _looks(output: bytes) -> dict[str, bytes]:
    parts = output.split(b"\n@@\n")
    assert len(parts) == len(LOOKS) + 1, output
    return dict(zip(LOOKS, parts, strict=False))


def _status(output: bytes) -> list[bytes]:
    """The records of ``git status --porcelain=v1 -z``, a rename's source
    joined to it."""
    fields, records = output.split(b"\0"), []
    while fields and fields[0]:
        record = fields.pop(0)
        if b"R" in record[:2] or b"C" in record[:2]:
            record += b" <- " + fields.pop(0)
        records.append(record)
    return records


def _checkout_looks(repo: Path, env) -> dict[str, bytes]:
    """The same looks, taken in the user's checkout (``git diff`` may
    refresh its index: a test takes the repository's state after them)."""
    done = subprocess.run(
        ["sh", "-c", LOOK_SCRIPT],
        cwd=repo,
        env={**env, "GIT_OPTIONAL_LOCKS": "0"},
        capture_output=True,
        check=True,
    )
    return _looks(done.stdout)


def _worktree_looks(repo: Path, env, *options: str) -> dict[str, bytes]:
    done = isopatch(*options, "-q", "--", "sh", "-c", LOOK_SCRIPT, cwd=repo, env=env)
    assert done.returncode == 0, done.err
    return _looks(done.stdout)


def _work_in_progress(make_repo, env) -> Path:
    """Every kind of staged change, a file staged and edited again, an
    intent-to-add entry, an unstaged deletion and an untracked file."""
    repo = make_repo(
        {
            "modified": "old\n",
            "deleted": "gone\n",
            "renamed": "a file long enough for rename detection to find it\n",
            "mode": "#!/bin/sh\n",
            "twice": "one\n",
            "unstaged-deletion": "here\n",
            "dir/kept": "kept\n",
        }
    )
    write_tree(repo, {"modified": "staged\n", "twice": "staged\n", "added": "new\n"})
    git("add", "modified", "twice", "added", cwd=repo, env=env)
    git("rm", "-q", "deleted", cwd=repo, env=env)
    git("mv", "renamed", "moved", cwd=repo, env=env)
    git("update-index", "--chmod=+x", "mode", cwd=repo, env=env)
    (repo / "mode").chmod(0o755)
    write_tree(repo, {"twice": "staged\nthen edited\n", "intent": "to add\n", "untracked": "u\n"})
    git("add", "--intent-to-add", "intent", cwd=repo, env=env)
    (repo / "unstaged-deletion").unlink()
    return repo


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_staged_git_sees_the_users_head_and_staged_changes(env, make_repo, sandbox) -> None:
    repo = _work_in_progress(make_repo, env)
    checkout = _checkout_looks(repo, env)
    before = repo_state(repo, env)
    seen = _worktree_looks(repo, env, "--staged", sandbox)
    assert seen["head"] == checkout["head"]
    assert seen["cached"] == checkout["cached"]
    assert b"R100\0renamed\0moved\0" in seen["cached"], seen["cached"]
    assert seen["cached-content"] == checkout["cached-content"]
    # the unstaged work is not there: nothing unstaged, nothing untracked
    assert seen["unstaged"] == seen["untracked"] == b""
    staged_only = [
        record[:1] + b" " + record[2:]
        for record in _status(checkout["status"])
        if record[:1] not in (b" ", b"?")
    ]
    assert _status(seen["status"]) == staged_only
    assert repo_state(repo, env) == before


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_include_uncommitted_git_sees_what_it_sees_in_the_checkout(env, make_repo, sandbox) -> None:
    repo = _work_in_progress(make_repo, env)
    checkout = _checkout_looks(repo, env)
    before = repo_state(repo, env)
    assert b" A intent\0" in checkout["status"] and b"?? untracked\0" in checkout["status"]
    assert _worktree_looks(repo, env, "--include-uncommitted", sandbox) == checkout
    assert repo_state(repo, env) == before


#: A command that changes a file, stages everything and commits (printing
#: the parent of its commit), then changes another file after the commit.
COMMIT_AND_EDIT = (
    "echo fixed > modified && echo new > made && git add -A && "
    "git -c user.name=t -c user.email=t@t commit -q -m 'the command' && "
    "git rev-parse HEAD~1 >&2 && echo later >> twice"
)


@pytest.mark.parametrize("mode", ["--staged", "--include-uncommitted"])
def test_the_patch_is_against_the_snapshot_when_the_command_commits(
    env, make_repo, tmp_path, mode
) -> None:
    repo = _work_in_progress(make_repo, env)
    before = repo_state(repo, env)
    done = isopatch(mode, "--porcelain", "--", "sh", "-c", COMMIT_AND_EDIT, cwd=repo, env=env)
    assert done.returncode == 0, done.err
    fields = done.fields()
    # its commit sits on the user's HEAD, as it would in the checkout
    parent = Path(fields["stderr"]).read_text().strip()
    assert parent == git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    patch = Path(fields["patch"]).read_bytes()
    names = sorted(line.split(b" b/")[-1] for line in patch.splitlines() if line[:5] == b"diff ")
    assert names == [b"made", b"modified", b"twice"], patch
    patch_path, clean = Path(fields["patch"]), tmp_path / "clean"
    apply_to_clean_checkout(repo, fields["base"], patch_path, clean, env)
    assert (clean / "modified").read_text() == "fixed\n"
    assert (clean / "made").read_text() == "new\n"
    twice = "staged\nlater\n" if mode == "--staged" else "staged\nthen edited\nlater\n"
    assert (clean / "twice").read_text() == twice
    assert repo_state(repo, env) == before


def test_a_detached_head_is_the_worktrees_head(env, make_repo) -> None:
    repo = make_repo({"file": "one\n"})
    write_tree(repo, {"file": "two\n"})
    git("commit", "-q", "-am", "second", cwd=repo, env=env)
    git("checkout", "-q", "--detach", "HEAD~1", cwd=repo, env=env)
    write_tree(repo, {"file": "staged\n"})
    git("add", "file", cwd=repo, env=env)
    checkout = _checkout_looks(repo, env)
    for mode in ("--staged", "--include-uncommitted"):
        seen = _worktree_looks(repo, env, mode)
        assert seen["head"] == checkout["head"] and seen["cached"] == b"M\0file\0"


@pytest.mark.hostile
@pytest.mark.parametrize("mode", ["--staged", "--include-uncommitted"])
def test_an_unborn_branch_stays_unborn_and_the_users_branch_is_never_made(
    env, tmp_path, mode
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo, env=env)
    write_tree(repo, {"staged": "s\n", "untracked": "u\n"})
    git("add", "staged", cwd=repo, env=env)
    checkout = _checkout_looks(repo, env)
    before = repo_state(repo, env)
    seen = _worktree_looks(repo, env, mode)
    assert seen["head"] == b"" and seen["cached"] == checkout["cached"] == b"A\0staged\0"
    if mode == "--include-uncommitted":
        assert seen == checkout
    # a command that commits there makes no branch of the user's
    commit = "git -c user.name=t -c user.email=t@t commit -q -m first && git status"
    done = isopatch(mode, "--no-sandbox", "--", "sh", "-c", commit, cwd=repo, env=env)
    assert done.returncode == 0, done.err
    assert repo_state(repo, env) == before
    assert git("for-each-ref", cwd=repo, env=env) == b""


@pytest.mark.hostile
@pytest.mark.parametrize("mode", ["--staged", "--include-uncommitted"])
def test_a_staged_submodule_pointer_is_staged(env, make_repo, tmp_path, mode) -> None:
    sub = make_repo({"s": "1\n"}, name="sub")
    first = git("rev-parse", "HEAD", cwd=sub, env=env).decode().strip()
    git("commit", "-q", "--allow-empty", "-m", "2", cwd=sub, env=env)
    second = git("rev-parse", "HEAD", cwd=sub, env=env).decode().strip()
    repo = make_repo({"file": "x\n"})
    git("update-index", "--add", "--cacheinfo", f"160000,{first},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "gitlink", cwd=repo, env=env)
    (repo / "sub").mkdir()
    git("update-index", "--cacheinfo", f"160000,{second},sub", cwd=repo, env=env)
    checkout = _checkout_looks(repo, env)
    before = repo_state(repo, env)
    assert checkout["cached"] == b"M\0sub\0"
    seen = _worktree_looks(repo, env, mode)
    assert seen["cached"] == checkout["cached"]
    assert seen["cached-content"] == checkout["cached-content"]
    if mode == "--include-uncommitted":
        assert seen == checkout
    assert repo_state(repo, env) == before


@pytest.mark.hostile
@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_unmerged_paths_are_unmerged_under_include_uncommitted(
    env, tmp_path, object_format
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", f"--object-format={object_format}", cwd=repo, env=env)
    write_tree(repo, {"conflict": "base\n", "other": "o\n"})
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "base", cwd=repo, env=env)
    git("checkout", "-q", "-b", "side", cwd=repo, env=env)
    write_tree(repo, {"conflict": "side\n"})
    git("commit", "-q", "-am", "side", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)
    write_tree(repo, {"conflict": "main\n"})
    git("commit", "-q", "-am", "main", cwd=repo, env=env)
    git("merge", "-q", "side", cwd=repo, env=env, check=False)
    write_tree(repo, {"intent": "to add\n"})
    git("add", "--intent-to-add", "intent", cwd=repo, env=env)
    checkout = _checkout_looks(repo, env)
    before = repo_state(repo, env)
    assert checkout["status"] == b"UU conflict\0 A intent\0"
    seen = _worktree_looks(repo, env, "--include-uncommitted")
    assert seen["status"] == checkout["status"] and seen["head"] == checkout["head"]
    stages = "git ls-files --stage -z"
    inside = isopatch("--include-uncommitted", "-q", "--", "sh", "-c", stages, cwd=repo, env=env)
    assert inside.returncode == 0, inside.err
    assert inside.stdout == git("ls-files", "--stage", "-z", cwd=repo, env=env), inside.err
    assert repo_state(repo, env) == before


#: A hook that lists the staged files and fixes those alone (what a
#: pre-commit hook built on ``git diff --cached --name-only`` does).
FIX_STAGED = "git diff --cached --name-only -z --diff-filter=ACMR | xargs -0 -r sed -i s/bad/good/"


def test_a_tool_that_lists_the_staged_files_fixes_them(env, make_repo) -> None:
    repo = make_repo({"staged.txt": "ok\n", "unstaged.txt": "bad\n"})
    write_tree(repo, {"staged.txt": "bad\n", "new.txt": "bad too\n"})
    git("add", "staged.txt", "new.txt", cwd=repo, env=env)
    before = repo_state(repo, env)
    done = isopatch("--staged", "--stdout", "-q", "--", "sh", "-c", FIX_STAGED, cwd=repo, env=env)
    assert done.returncode == 0, done.err
    touched = sorted(line for line in done.stdout.splitlines() if line[:11] == b"diff --git ")
    assert touched == [
        b"diff --git a/new.txt b/new.txt",
        b"diff --git a/staged.txt b/staged.txt",
    ], done.out
    assert repo_state(repo, env) == before


#: A local pre-commit configuration: a check (no line may say "bad") and a
#: fixer ("bad" becomes "good").
PRE_COMMIT_CHECK = """repos:
- repo: local
  hooks:
  - id: no-bad
    name: no bad
    entry: bad
    language: pygrep
"""

PRE_COMMIT_FIXER = """repos:
- repo: local
  hooks:
  - id: fix-bad
    name: fix bad
    entry: sed -i s/bad/good/
    language: system
    files: \\.txt$
"""


def _pre_commit_repo(make_repo, env, config: str) -> Path:
    repo = make_repo({".pre-commit-config.yaml": config, "a.txt": "fine\n", "b.txt": "fine\n"})
    write_tree(repo, {"a.txt": "bad\n"})
    git("add", "a.txt", cwd=repo, env=env)
    write_tree(repo, {"b.txt": "bad but not staged\n"})
    return repo


@pytest.mark.needs("pre-commit")
def test_pre_commit_run_checks_the_staged_files(env, make_repo) -> None:
    repo = _pre_commit_repo(make_repo, env, PRE_COMMIT_CHECK)
    before = repo_state(repo, env)
    done = isopatch("--staged", "--", "pre-commit", "run", cwd=repo, env=env)
    assert done.returncode == 1, done.out + done.err
    assert "no bad" in done.out and "Failed" in done.out and "a.txt:1:bad" in done.out, done.out
    assert "b.txt" not in done.out  # the unstaged file is not what is checked
    assert repo_state(repo, env) == before


@pytest.mark.needs("pre-commit")
def test_the_exit_code_recipe_stops_a_commit_that_needs_a_fix(env, make_repo) -> None:
    """The README's ``--staged --exit-code -- <check>``: a staged file the
    check fails makes it fail, with the fix in the patch; a clean index
    passes."""
    repo = _pre_commit_repo(make_repo, env, PRE_COMMIT_FIXER)
    before = repo_state(repo, env)
    done = isopatch(
        "--staged", "--exit-code", "--porcelain", "--", "pre-commit", "run", cwd=repo, env=env
    )
    assert done.returncode == 1, done.out + done.err
    fields = done.fields()
    assert fields["files"] == "1" and fields["path"] == "M a.txt", done.out
    assert b"+good" in Path(fields["patch"]).read_bytes()
    assert repo_state(repo, env) == before
    git("commit", "-q", "-m", "fixed by hand", cwd=repo, env=env, check=False)
    write_tree(repo, {"a.txt": "good\n"})
    git("add", "a.txt", cwd=repo, env=env)
    clean = isopatch("--staged", "--exit-code", "-q", "--", "pre-commit", "run", cwd=repo, env=env)
    assert clean.returncode == 0, clean.out + clean.err


def test_a_kept_worktrees_index_is_the_snapshots(env, make_repo) -> None:
    """``--keep``: the index is put back as git-isopatch made it, the
    snapshot's, so ``git diff`` there shows what the command changed,
    whatever it staged."""
    repo = _work_in_progress(make_repo, env)
    change = "echo more >> modified && git add modified"
    done = isopatch(
        "--include-uncommitted", "--keep", "--porcelain", "--", "sh", "-c", change,
        cwd=repo, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.err
    assert "warning" not in done.err, done.err  # HEAD and the index are git-isopatch's
    kept = Path(done.fields()["worktree"])
    assert git("diff", "--name-only", cwd=kept, env=env) == b"modified\n"
    assert git("rev-parse", "HEAD", cwd=kept, env=env) == git(
        "rev-parse", "HEAD", cwd=repo, env=env
    )


def _index_kind(repo: Path, env, kind: str) -> None:
    """The user's index written as git 2.39 writes it with ``kind``."""
    if kind == "split":
        git("config", "core.splitIndex", "true", cwd=repo, env=env)
        git("update-index", "--split-index", cwd=repo, env=env)
    elif kind == "sparse":
        git("sparse-checkout", "set", "--sparse-index", "dir", cwd=repo, env=env)
    elif kind == "v4, untracked cache, offset table":
        for key, value in (
            ("feature.manyFiles", "true"),
            ("index.recordEndOfIndexEntries", "true"),
            ("index.recordOffsetTable", "true"),
            ("index.threads", "2"),
        ):
            git("config", key, value, cwd=repo, env=env)
        git("update-index", "--index-version", "4", "--untracked-cache", cwd=repo, env=env)


@pytest.mark.hostile
@pytest.mark.parametrize("kind", ["split", "sparse", "v4, untracked cache, offset table"])
@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_the_users_index_as_git_writes_it_is_mirrored(env, make_repo, kind, sandbox) -> None:
    repo = make_repo({"dir/in": "in\n", "dir/staged": "s\n", "out/far": "f\n", "top": "t\n"})
    _index_kind(repo, env, kind)
    write_tree(repo, {"dir/staged": "staged\n", "dir/new": "n\n"})
    git("add", "dir/staged", cwd=repo, env=env)
    write_tree(repo, {"dir/in": "unstaged\n", "untracked": "u\n"})
    checkout = _checkout_looks(repo, env)
    before = repo_state(repo, env)
    seen = _worktree_looks(repo, env, sandbox, "--include-uncommitted")
    assert seen == checkout, (seen, checkout)
    assert repo_state(repo, env) == before


@pytest.mark.hostile
@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_a_modify_delete_conflict_is_mirrored(env, make_repo, sandbox) -> None:
    repo = make_repo({"conflict": "base\n", "other": "o\n"})
    git("checkout", "-q", "-b", "side", cwd=repo, env=env)
    git("rm", "-q", "conflict", cwd=repo, env=env)
    git("commit", "-q", "-m", "side", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)
    write_tree(repo, {"conflict": "main\n"})
    git("commit", "-q", "-am", "main", cwd=repo, env=env)
    git("merge", "-q", "side", cwd=repo, env=env, check=False)
    checkout = _checkout_looks(repo, env)
    assert checkout["status"] == b"UD conflict\0"
    stages = "git ls-files --stage -z"
    inside = isopatch(
        sandbox, "--include-uncommitted", "-q", "--", "sh", "-c", stages, cwd=repo, env=env
    )
    assert inside.returncode == 0, inside.err
    assert inside.stdout == git("ls-files", "--stage", "-z", cwd=repo, env=env)
    assert _worktree_looks(repo, env, sandbox, "--include-uncommitted") == checkout
