"""The start points besides ``--base`` (design: procedure step 1):
``--include-uncommitted`` starts from a snapshot of the user's work tree
and ``--staged`` from ``HEAD`` plus the index (what ``git commit`` would
commit), both made through a temporary index without writing anything of
the user's (:func:`git_isopatch.git.snapshot.snapshot_index`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state, tree_manifest, write_tree

from git_isopatch.git.result import Err, Ok
from git_isopatch.git.run import own_git_environment
from git_isopatch.git.snapshot import snapshot_index


def _snapshot(repo: Path, env: dict[str, str], tmp_path: Path, parent: str | None = "HEAD"):
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    head = git("rev-parse", parent, cwd=repo, env=env).decode().strip() if parent else None
    return snapshot_index(str(repo / ".git"), head, str(scratch), env=own_git_environment(env))


def _staged_work(make_repo, env: dict[str, str]) -> Path:
    repo = make_repo({"staged": "old\n", "unstaged": "old\n", "both": "old\n", "removed": "r\n"})
    write_tree(repo, {"staged": "staged\n", "both": "staged\n", "added": "new\n"})
    git("add", "staged", "both", "added", cwd=repo, env=env)
    git("rm", "-q", "removed", cwd=repo, env=env)
    write_tree(repo, {"unstaged": "unstaged\n", "both": "unstaged\n", "untracked": "u\n"})
    write_tree(repo, {"intent": "only the intent\n"})
    git("add", "--intent-to-add", "intent", cwd=repo, env=env)
    return repo


def _files(repo: Path, commit: str, env: dict[str, str]) -> dict[str, str]:
    names = git("ls-tree", "-r", "--name-only", commit, cwd=repo, env=env).decode().split()
    return {n: git("show", f"{commit}:{n}", cwd=repo, env=env).decode() for n in names}


# --staged on the command line ------------------------------------------------

#: Lists the worktree's files and their content into ``seen``, then
#: upper-cases every file the base or the index had (a "formatter").
LIST_AND_FORMAT = (
    "for f in $(find . -path ./.git -prune -o -type f -print | sort); do "
    'echo "$f: $(cat $f)"; done > "$SEEN"; '
    "for f in staged unstaged both added; do [ -f $f ] && tr a-z A-Z < $f > t && mv t $f; done; "
    "true"
)


#: A pre-commit hook as the README suggests: refuse the commit when the
#: fix (here: "bad" becomes "good") would change what is being committed.
PRE_COMMIT_HOOK = (
    "#!/bin/sh\nexec git isopatch --staged --exit-code -q -- sh -c 'sed -i s/bad/good/ a.txt'\n"
)


#: Lists what the worktree holds into ``seen`` (a file the base tracks).
LIST_FILES = "find . -path ./.git -prune -o -type f -print | sort > seen; cat staged >> seen"


def _work_in_progress(make_repo, env: dict[str, str]) -> Path:
    repo = make_repo(
        {
            ".gitignore": "*.log\n",
            "seen": "\n",
            "staged": "old\n",
            "unstaged": "old\n",
            "deleted": "d\n",
            "both": "old\n",
        }
    )
    write_tree(repo, {"staged": "staged\n", "both": "staged\n"})
    git("add", "staged", "both", cwd=repo, env=env)
    write_tree(
        repo,
        {"unstaged": "unstaged\n", "both": "unstaged\n", "untracked": "u\n", "ignored.log": "i\n"},
    )
    (repo / "deleted").unlink()
    return repo


def _git_dir_listing(repo: Path) -> list[str]:
    """Files of the git directory but objects, git-isopatch's own lock
    (``isopatch.lock``, design: worktree add/remove serialisation) and its
    base trees (``isopatch/``, registered in ``worktrees/``: a cache of
    checkouts, kept by design)."""
    git_dir = repo / ".git"
    bases = {p.parent.name for p in git_dir.glob("worktrees/*/isopatch-base.json")}
    return sorted(
        str(p.relative_to(git_dir))
        for p in git_dir.rglob("*")
        if "objects" not in p.parts
        and p.name != "isopatch.lock"
        and p.relative_to(git_dir).parts[0] != "isopatch"
        and not _base_tree_registration(p.relative_to(git_dir).parts, bases)
    )


def _base_tree_registration(parts: tuple[str, ...], bases: set[str]) -> bool:
    """``worktrees/<id>`` of a base tree, or ``worktrees`` holding only those."""
    if parts[0] != "worktrees":
        return False
    return parts[1] in bases if len(parts) > 1 else bool(bases)


def test_the_snapshot_is_what_git_commit_would_commit(env, make_repo, tmp_path) -> None:
    repo = _staged_work(make_repo, env)
    before = repo_state(repo, env)
    match _snapshot(repo, env, tmp_path):
        case Ok(commit):
            pass
        case Err(error):
            pytest.fail(error.message())
    assert repo_state(repo, env) == before  # index bytes, inode and mtime too
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    assert git("rev-parse", f"{commit}^", cwd=repo, env=env).decode().strip() == head
    # what git commit makes of the same index, intent-to-add entry and all
    git("commit", "-q", "-m", "the user's commit", cwd=repo, env=env)
    committed = git("rev-parse", "HEAD^{tree}", cwd=repo, env=env).decode().strip()
    assert git("rev-parse", f"{commit}^{{tree}}", cwd=repo, env=env).decode().strip() == committed
    assert _files(repo, commit, env) == {
        "staged": "staged\n",
        "unstaged": "old\n",
        "both": "staged\n",
        "added": "new\n",
    }


def test_an_unborn_branch_snapshots_what_is_staged(env, tmp_path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git("init", "-q", cwd=repo, env=env)
    match _snapshot(repo, env, tmp_path, parent=None):
        case Ok(commit):
            assert _files(repo, commit, env) == {}
        case Err(error):
            pytest.fail(error.message())
    write_tree(repo, {"a": "a\n", "b": "b\n"})
    git("add", "a", cwd=repo, env=env)
    match _snapshot(repo, env, tmp_path, parent=None):
        case Ok(commit):
            assert _files(repo, commit, env) == {"a": "a\n"}
            assert git("rev-list", "--count", commit, cwd=repo, env=env).strip() == b"1"
        case Err(error):
            pytest.fail(error.message())


def test_unmerged_entries_are_refused_as_git_commit_refuses_them(env, make_repo, tmp_path) -> None:
    repo = make_repo({"a": "base\n"})
    git("checkout", "-q", "-b", "other", cwd=repo, env=env)
    write_tree(repo, {"a": "other\n"})
    git("commit", "-q", "-am", "other", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)
    write_tree(repo, {"a": "main\n"})
    git("commit", "-q", "-am", "main", cwd=repo, env=env)
    git("merge", "-q", "other", cwd=repo, env=env, check=False)
    before = repo_state(repo, env)
    match _snapshot(repo, env, tmp_path):
        case Err(error):
            assert "unmerged" in error.stderr.decode()
        case Ok():
            pytest.fail("a snapshot of an index with conflicts")
    assert repo_state(repo, env) == before


def test_the_worktree_holds_what_git_commit_would_commit(env, make_repo) -> None:
    repo = _staged_work(make_repo, env)
    seen = repo.parent / "seen"
    seen.touch()  # outside the worktree: really writable in the sandbox
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        "--staged",
        "--allow-write",
        str(seen),
        "--",
        "sh",
        "-c",
        LIST_AND_FORMAT,
        cwd=repo,
        env={**env, "SEEN": str(seen)},
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert seen.read_text().splitlines() == [
        "./added: new",
        "./both: staged",
        "./staged: staged",
        "./unstaged: old",
    ]
    base = run.fields()["base"]
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    assert git("rev-parse", f"{base}^", cwd=repo, env=env).decode().strip() == head
    assert git("show", f"{base}:both", cwd=repo, env=env) == b"staged\n"
    # the patch goes on top of the index: git apply --cached takes it
    git("apply", "--cached", run.fields()["patch"], cwd=repo, env=env)
    assert git("show", ":both", cwd=repo, env=env) == b"STAGED\n"
    assert git("show", ":unstaged", cwd=repo, env=env) == b"OLD\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--base", "HEAD~0"), "options '--staged' and '--base' cannot be used together"),
        (
            ("--include-uncommitted",),
            "options '--staged' and '--include-uncommitted' cannot be used together",
        ),
    ],
)
def test_staged_cannot_be_combined(env, make_repo, options, message) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    run = isopatch("--staged", *options, "--", "true", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.startswith(f"error: {message}\nusage: git isopatch")
    assert repo_state(repo, env) == before


def test_staged_apply_brings_the_fix_to_the_work_tree_and_keeps_unstaged_edits(
    env, make_repo
) -> None:
    repo = make_repo({"a": "one\ntwo\nthree\nfour\nfive\nsix\nseven\n", "b": "b\n"})
    write_tree(repo, {"a": "one\ntwo\nthree\nfour\nfive\nsix\nseven\n// staged\n"})
    git("add", "a", cwd=repo, env=env)
    write_tree(repo, {"a": "ONE-unstaged\ntwo\nthree\nfour\nfive\nsix\nseven\n// staged\n"})
    index = repo_state(repo, env)["index"]
    run = isopatch(
        "--staged", "--apply", "--", "sed", "-i", "s|// staged|// fixed|", "a", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert (
        repo / "a"
    ).read_text() == "ONE-unstaged\ntwo\nthree\nfour\nfive\nsix\nseven\n// fixed\n"
    # issue 20: the fix is staged too, the unstaged edit stays unstaged
    assert repo_state(repo, env)["index"] != index
    assert (
        git("show", ":a", cwd=repo, env=env)
        == b"one\ntwo\nthree\nfour\nfive\nsix\nseven\n// fixed\n"
    )


def test_the_documented_recipe_stages_the_fix_all_or_nothing(env, make_repo, tmp_path) -> None:
    """README: ``git isopatch --staged -o fix.patch -- <fmt> && git apply
    --index fix.patch``: both index and work tree, or neither."""
    repo = make_repo({"a": "a\n", "b": "b\n"})
    write_tree(repo, {"a": "staged a\n", "b": "staged b\n"})
    git("add", "a", "b", cwd=repo, env=env)
    fix = tmp_path / "fix.patch"
    recipe = (
        f"git isopatch --staged -q -o {fix} -- sed -i s/staged/fixed/ a b"
        f" && git apply --whitespace=nowarn --index {fix}"
    )
    done = subprocess.run(["sh", "-c", recipe], cwd=repo, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert git("show", ":a", cwd=repo, env=env) == b"fixed a\n"
    assert (repo / "b").read_text() == "fixed b\n"
    git("reset", "-q", "--hard", cwd=repo, env=env)
    write_tree(repo, {"a": "staged a\n", "b": "staged b\n"})
    git("add", "a", "b", cwd=repo, env=env)
    write_tree(repo, {"b": "staged b\nand an unstaged line\n"})
    before = repo_state(repo, env)
    done = subprocess.run(["sh", "-c", recipe], cwd=repo, env=env, capture_output=True)
    assert done.returncode != 0
    assert b"b: does not match index" in done.stderr
    assert repo_state(repo, env) == before


@pytest.mark.parametrize(
    "commit",
    [("commit", "-q", "-a", "-m", "all"), ("commit", "-q", "-m", "paths", "--", "a.txt")],
    ids=["commit -a", "commit <path>"],
)
def test_a_pre_commit_hook_sees_the_index_git_commit_is_about_to_commit(
    env, make_repo, commit
) -> None:
    """``git commit -a`` and ``git commit <path>`` stage into an index of
    their own and name it in ``GIT_INDEX_FILE`` for the hook (githooks(5));
    ``--staged`` must start from that index, not from ``.git/index``."""
    repo = make_repo({"a.txt": "ok\n"})
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(PRE_COMMIT_HOOK)
    hook.chmod(0o755)
    path = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    hook_env = {**env, "PATH": path}
    (repo / "a.txt").write_text("bad\n")  # changed in the work tree, not staged
    refused = subprocess.run(["git", *commit], cwd=repo, env=hook_env, capture_output=True)
    assert refused.returncode != 0, refused.stderr
    assert git("show", "HEAD:a.txt", cwd=repo, env=env) == b"ok\n"
    (repo / "a.txt").write_text("fine\n")
    accepted = subprocess.run(["git", *commit], cwd=repo, env=hook_env, capture_output=True)
    assert accepted.returncode == 0, accepted.stderr
    assert git("show", "HEAD:a.txt", cwd=repo, env=env) == b"fine\n"


@pytest.mark.parametrize("kind", ["missing", "fifo", "folder"])
def test_a_git_index_file_that_is_no_index_is_refused(env, make_repo, tmp_path, kind) -> None:
    """git would read a missing ``GIT_INDEX_FILE`` as an empty index and
    block on a FIFO: one ``fatal:`` line, nothing made."""
    repo = make_repo({"a": "a\n"})
    named = tmp_path / "index"
    if kind == "fifo":
        os.mkfifo(named)
    elif kind == "folder":
        named.mkdir()
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain", "--staged", "--", "true", cwd=repo, env={**env, "GIT_INDEX_FILE": str(named)}
    )
    assert run.returncode == 128
    assert run.fields()["error-code"] == "bad-index"
    assert run.err.startswith(f"fatal: GIT_INDEX_FILE names '{named}'") and run.err.count("\n") == 1
    assert repo_state(repo, env) == before


def test_worktree_starts_from_the_work_tree_and_the_patch_goes_on_top(
    env, make_repo, no_leftovers
) -> None:
    repo = _work_in_progress(make_repo, env)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    before, listing = repo_state(repo, env), _git_dir_listing(repo)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        f"{LIST_FILES}; echo more >> unstaged; rm untracked; echo new > new",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert _git_dir_listing(repo) == listing
    snapshot = run.fields()["base"]
    assert snapshot != head
    assert git("rev-parse", f"{snapshot}^", cwd=repo, env=env).decode().strip() == head
    # the snapshot is the work tree as it is: staged, unstaged, untracked, not ignored
    for name, content in (("staged", "staged\n"), ("both", "unstaged\n"), ("untracked", "u\n")):
        assert git("show", f"{snapshot}:{name}", cwd=repo, env=env).decode() == content
    names = git("ls-tree", "--name-only", snapshot, cwd=repo, env=env).decode().split()
    assert "deleted" not in names and "ignored.log" not in names

    expected = tree_manifest(repo)
    git("apply", "--binary", run.fields()["patch"], cwd=repo, env=env)
    after = tree_manifest(repo)
    assert (repo / "seen").read_text() == (
        "./.gitignore\n./both\n./seen\n./staged\n./unstaged\n./untracked\nstaged\n"
    )
    assert (repo / "unstaged").read_text() == "unstaged\nmore\n"
    assert not (repo / "untracked").exists()
    assert (repo / "new").read_text() == "new\n"
    changed = {k for k in set(expected) | set(after) if expected.get(k) != after.get(k)}
    assert changed == {b"seen", b"unstaged", b"untracked", b"new"}


def test_snapshot_on_an_unborn_branch(env, tmp_path, no_leftovers) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo, env=env)
    write_tree(repo, {"staged": "s\n", "untracked": "u\n"})
    git("add", "staged", cwd=repo, env=env)
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        "cat staged untracked > both",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    snapshot = run.fields()["base"]
    assert git("rev-list", "--count", snapshot, cwd=repo, env=env).strip() == b"1"
    git("apply", run.fields()["patch"], cwd=repo, env=env)
    assert (repo / "both").read_text() == "s\nu\n"


@pytest.mark.parametrize(
    "config",
    [
        ("user.useConfigOnly", "true"),  # no identity configured: the snapshot has its own
        ("core.splitIndex", "true"),  # no new sharedindex file in the user's git dir
    ],
    ids=lambda c: c[0] if isinstance(c, tuple) else c,
)
def test_user_configuration_does_not_break_the_snapshot(env, make_repo, config) -> None:
    repo = make_repo({"a": "a\n"})
    git("config", *config, cwd=repo, env=env)
    git("config", "gpg.program", "false", cwd=repo, env=env)
    if config[0] == "core.splitIndex":
        (repo / "b").write_text("b\n")
        git("add", "b", cwd=repo, env=env)  # the user's index is now split
    (repo / "a").write_text("changed\n")
    (repo / "new").write_text("untracked\n")
    identity_free = {
        k: v for k, v in env.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))
    }
    before, listing = repo_state(repo, env), _git_dir_listing(repo)
    run = isopatch(
        "--porcelain",
        "--include-uncommitted",
        "--",
        "sh",
        "-c",
        "cat a > copy",
        cwd=repo,
        env=identity_free,
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert _git_dir_listing(repo) == listing
    assert b"+changed" in Path(run.fields()["patch"]).read_bytes()


def test_include_uncommitted_with_base_is_a_usage_error(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--include-uncommitted", "--base", "HEAD", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    run = isopatch("--include-uncommitted", "--base", "main", "--", "true", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.startswith(
        "error: options '--include-uncommitted' and '--base' cannot be used together\n"
    )


def test_read_only_object_store_is_fatal(env, make_repo, no_leftovers) -> None:
    """The snapshot writes objects; where the object store cannot be
    written the run stops with a classified ``fatal:`` and the user's
    repository is as it was."""
    repo = make_repo({"a": "a\n"})
    (repo / "a").write_text("b\n")
    objects = repo / ".git" / "objects"
    subprocess.run(["mount", "--bind", objects, objects], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", objects, objects], check=True)
        before = repo_state(repo, env)
        run = isopatch("--include-uncommitted", "--", "true", cwd=repo, env=env)
        assert run.returncode == 128, run.err
        assert run.err.startswith("fatal: could not snapshot the work tree: ")
        assert "Traceback" not in run.err
        assert len(run.err.splitlines()) == 1
        assert repo_state(repo, env) == before
    finally:
        subprocess.run(["umount", objects], check=True)


def test_no_space_in_tmpdir_for_the_temporary_index_is_fatal(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    repo = make_repo({"a": "a\n"})
    (repo / "a").write_text("b\n")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", full], check=True)
    try:
        (full / "filler").write_bytes(b"x" * 4096)
        before = repo_state(repo, env)
        run = isopatch(
            "--include-uncommitted", "--", "true", cwd=repo, env={**env, "TMPDIR": str(full)}
        )
        assert run.returncode == 128, run.err
        assert run.err.startswith("fatal: could not snapshot the work tree: cannot copy the index")
        assert run.err.endswith(": No space left on device\n")
        assert repo_state(repo, env) == before
        assert sorted(p.name for p in full.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", full], check=True)


@pytest.mark.hostile
@pytest.mark.parametrize("start", ["--include-uncommitted", "--staged"])
def test_uncommitted_attributes_convert_the_files_the_command_sees(env, make_repo, start) -> None:
    """A staged ``.gitattributes`` that asks for CRLF: a checkout of the
    snapshot writes ``a.txt`` with CRLF, so the command reads CRLF there,
    sandboxed over a base tree of ``HEAD`` (checked out with ``HEAD``'s
    attributes: LF) as unconfined in a worktree of its own."""
    repo = make_repo({"a.txt": "a\nb\n", "other.txt": "x\n"})
    assert isopatch("-q", "--sandbox", "--", "true", cwd=repo, env=env).returncode == 0
    write_tree(repo, {".gitattributes": "*.txt text eol=crlf\n"})
    git("add", ".gitattributes", cwd=repo, env=env)
    seen = {}
    for sandbox in ("--sandbox", "--no-sandbox"):
        run = isopatch(
            "--porcelain", sandbox, start, "--", "sh", "-c", "cat a.txt",
            cwd=repo, env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.err
        seen[sandbox] = Path(run.fields()["stdout"]).read_bytes()
    assert seen == {"--sandbox": b"a\r\nb\r\n", "--no-sandbox": b"a\r\nb\r\n"}


#: name -> (what the user stages, what the formatter then changes)
NESTED_REMOVALS = {
    "a file moved two folders deep": (
        ("mv", "pkg/sub/old.py", "pkg/sub/new.py"),
        ["pkg/gone/last.py", "pkg/sub/keep.py", "pkg/sub/new.py", "pkg/top.py"],
    ),
    "the last file of a folder two deep": (
        ("rm", "-q", "pkg/gone/last.py"),
        ["pkg/sub/keep.py", "pkg/sub/old.py", "pkg/top.py"],
    ),
}


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
@pytest.mark.parametrize("start", ["--staged", "--include-uncommitted"])
@pytest.mark.parametrize("case", NESTED_REMOVALS)
def test_a_file_removed_two_folders_deep_is_gone_from_the_worktree(
    env, make_repo, start, sandbox, case
) -> None:
    """A ``git mv`` or ``git rm`` below two folders, then a formatter over
    every file it finds: over the base tree the removed file must be
    hidden and its folder's neighbours kept, or the command formats it and
    the patch, applied, brings it back (or never sees the neighbours)."""
    files = ("pkg/sub/old.py", "pkg/sub/keep.py", "pkg/gone/last.py", "pkg/top.py")
    repo = make_repo({**{path: "x=1\n" for path in files}, "README": "r\n"})
    staged, changed = NESTED_REMOVALS[case]
    git(*staged, cwd=repo, env=env)
    fix = "for f in $(find pkg -type f); do echo '# fixed' >> \"$f\"; done"
    run = isopatch(
        start, sandbox, "--apply", "--porcelain", "--", "sh", "-c", fix, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    paths = [line for line in run.out.splitlines() if line.startswith("path ")]
    assert paths == [f"path M {path}" for path in changed]
    assert sorted(git("ls-files", cwd=repo, env=env).decode().split()) == ["README", *changed]
    for path in changed:
        assert (repo / path).read_text() == "x=1\n# fixed\n"


#: name -> (what the user stages over a gitlink, what the command runs,
#: the path record its patch must hold)
GITLINK_INDEX_CHANGES = {
    "a bumped submodule put back": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        ("git", "reset", "-q", "--hard", "HEAD"),
        "path M sub",
    ),
    "a folder made a submodule, unstaged": (
        [("--force-remove", "dir/x"), ("--add", "--cacheinfo", f"160000,{'3' * 40},dir")],
        ("git", "rm", "-q", "--cached", "dir"),
        "path D dir",
    ),
}


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
@pytest.mark.parametrize("case", GITLINK_INDEX_CHANGES)
def test_a_gitlink_the_command_changes_back_is_in_the_patch(env, make_repo, sandbox, case) -> None:
    """An unpopulated submodule is its index entry: a command that changes
    only the entry the user staged (back to ``HEAD``'s, or away) changes
    the worktree.  Over the base tree of ``HEAD`` the run's index starts
    as the snapshot's, not the base tree's: an entry the command puts back
    to the base tree's is still a change, and the patch must hold it."""
    repo = make_repo({"dir/x": "x\n", "README": "r\n"})
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "sub", cwd=repo, env=env)
    staged, command, record = GITLINK_INDEX_CHANGES[case]
    for options in staged:
        git("update-index", *options, cwd=repo, env=env)
    run = isopatch("--staged", sandbox, "--porcelain", "--", *command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert [line for line in run.out.splitlines() if line.startswith("path ")] == [record]


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_a_staged_gitlink_of_an_ignored_submodule_is_in_the_run(env, make_repo, sandbox) -> None:
    """``.gitmodules`` and the configuration say ``ignore = all`` for a submodule whose gitlink
    the user bumps and stages: the command over the snapshot sees the
    staged gitlink, as a worktree of the snapshot has it, whatever the
    comparisons of the trees would ignore."""
    repo = make_repo({"README": "r\n"})
    (repo / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\tignore = all\n')
    git("add", ".gitmodules", cwd=repo, env=env)
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "sub", cwd=repo, env=env)
    git("config", "submodule.sub.ignore", "all", cwd=repo, env=env)
    git("update-index", "--cacheinfo", f"160000,{'2' * 40},sub", cwd=repo, env=env)
    run = isopatch(
        "--staged", sandbox, "--porcelain", "--", "git", "ls-files", "-s", "sub", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    printed = Path(run.fields()["stdout"]).read_text()
    assert printed == f"160000 {'2' * 40} 0\tsub\n"
