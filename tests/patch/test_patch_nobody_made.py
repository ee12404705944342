"""The patch holds what the command changed and nothing else (design: The
patch; issue 21, items 1-4).

- A path that differs from the base right after checkout (a blob stored
  with CRLF under a ``text`` attribute: "modified" after every clone) is
  left out unless the command changed it, with a ``warning:`` naming it.
- ``core.ignoreCase=true`` left by a copy from macOS or Windows is pinned to
  what the worktree's file system does, for git-isopatch's git and the
  command's: a new ``README.MD`` beside ``README.md`` is in the patch.
- An entry named ``.git`` below the top that is not a repository is left
  out by git: a ``warning:`` names it.
- A command that changes the attributes gets the same patch whatever git's
  stat cache held: git compares every tracked file again, and the look
  before the command reads again each file a conversion applies to, so a
  path the checkout alone changed stays out, its entry racy or not.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, base_trees, git, isopatch

from git_isopatch.git.attributes import index_may_track_attributes
from git_isopatch.git.baseline import read_baseline
from git_isopatch.git.result import Ok
from git_isopatch.git.types import CommitId, GitDirPath, WorktreePath

#: An old repository's shape: ``f.txt`` stored with CRLF before ``*.txt
#: text`` was added (public reports: "files modified right after clone").
CRLF_STORED = {"f.txt": b"a\r\nb\r\n", "g.txt": b"g\n", "keep": b"k\n"}


def _crlf_repo(make_repo, env) -> Path:
    repo = make_repo(CRLF_STORED)
    (repo / ".gitattributes").write_text("*.txt text\n")
    git("add", ".gitattributes", cwd=repo, env=env)
    git("commit", "-q", "-m", "attributes", cwd=repo, env=env)
    return repo


def _patch(run) -> bytes:
    return Path(run.fields()["patch"]).read_bytes()


def test_a_path_changed_by_checkout_alone_is_not_in_the_patch(env, make_repo, tmp_path) -> None:
    repo = _crlf_repo(make_repo, env)
    run = isopatch("--exit-code", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning: 'f.txt' differs from the base right after checkout" in run.err
    porcelain = isopatch("--porcelain", "--", "sh", "-c", "echo x >> g.txt", cwd=repo, env=env)
    assert porcelain.fields()["files"] == "1"
    assert b"f.txt" not in _patch(porcelain)
    assert "'f.txt'" in porcelain.err


def test_apply_leaves_the_line_endings_of_an_untouched_path(env, make_repo, tmp_path) -> None:
    repo = _crlf_repo(make_repo, env)
    run = isopatch("--apply", "--", "sh", "-c", "echo x >> g.txt", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (repo / "f.txt").read_bytes() == b"a\r\nb\r\n"
    assert (repo / "g.txt").read_bytes() == b"g\nx\n"


def test_a_path_the_command_changed_is_in_the_patch_whole(env, make_repo, tmp_path) -> None:
    """Content, mode and deletion of the path that already differed: each
    is the command's change, and the patch holds it from the base."""
    repo = _crlf_repo(make_repo, env)
    for script, expect in (
        ("printf 'c\\r\\n' >> f.txt", b"+c"),
        ("chmod +x f.txt", b"new mode 100755"),
        ("rm f.txt", b"deleted file mode"),
        ("printf 'a\\nb\\n' > f.txt", b"-a\r"),
    ):
        run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        patch = _patch(run)
        assert b"diff --git a/f.txt b/f.txt" in patch, script
        assert expect in patch, script
        assert "differs from the base right after checkout" not in run.err, script


def test_the_patch_of_an_untouched_path_applies_to_a_clean_checkout(
    env, make_repo, tmp_path
) -> None:
    repo = _crlf_repo(make_repo, env)
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", "echo n > new", cwd=repo, env=env)
    fields = run.fields()
    checkout = apply_to_clean_checkout(
        repo, fields["base"], Path(fields["patch"]), tmp_path / "checkout", env
    )
    assert (checkout / "new").read_bytes() == b"n\n"
    assert (checkout / "f.txt").read_bytes() == (Path(fields["worktree"]) / "f.txt").read_bytes()


def test_ignore_case_left_by_a_copy_is_pinned_to_the_file_system(env, make_repo) -> None:
    """``core.ignoreCase=true`` on a case-sensitive file system: the new
    ``README.MD`` is in the patch and the command's git sees it; the
    user's configuration is not written."""
    repo = make_repo({"README.md": "r\n"})
    git("config", "core.ignoreCase", "true", cwd=repo, env=env)
    config = (repo / ".git" / "config").read_bytes()
    script = "echo big > README.MD && git status --porcelain --untracked-files=all"
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "1"
    assert b"diff --git a/README.MD b/README.MD" in _patch(run)
    assert "?? README.MD" in Path(run.fields()["stdout"]).read_text()
    assert (repo / ".git" / "config").read_bytes() == config


def test_ignore_case_pin_goes_after_the_users_own_config_count(env, make_repo) -> None:
    """The user's ``GIT_CONFIG_COUNT`` settings stay, and the pin is added
    after them."""
    repo = make_repo({"README.md": "r\n"})
    git("config", "core.ignoreCase", "true", cwd=repo, env=env)
    given = {**env, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "x.y", "GIT_CONFIG_VALUE_0": "z"}
    script = "echo big > README.MD && git config x.y"
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=given)
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text() == "z\n"
    assert b"b/README.MD" in _patch(run)


@pytest.mark.hostile
@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_ignore_case_the_command_set_hides_no_new_file(env, make_repo, sandbox: str) -> None:
    """The command sets the repository's ``core.ignoreCase=true`` (read as
    it left it, by git-isopatch's own git after it) and makes ``README.MD``
    beside the tracked ``README.md``: folding case, git would take the new
    file for the tracked one and leave it out of the patch."""
    repo = make_repo({"README.md": "r\n"})
    script = "git config core.ignoreCase true && echo big > README.MD"
    run = isopatch("--porcelain", sandbox, "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"diff --git a/README.MD b/README.MD" in _patch(run)


def test_a_file_named_git_in_a_folder_is_named_in_a_warning(env, make_repo) -> None:
    """A regular ``.git`` file (a broken ``gitdir:`` line, a tool's marker),
    in a new folder or in a tracked one, is never in a patch: git skips
    every path named ``.git``; the rest of the folder is in the patch."""
    repo = make_repo({"src/a": "a\n"})
    script = (
        "mkdir d && echo x > d/x && echo 'gitdir: /nowhere' > d/.git && "
        "echo junk > src/.git && echo b > src/b"
    )
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = _patch(run)
    assert b"b/d/x" in patch and b"b/src/b" in patch and b".git\n" not in patch
    assert "warning: 'd/.git' is not in the patch" in run.err
    assert "warning: 'src/.git' is not in the patch" in run.err


def test_a_file_named_git_alone_in_a_tracked_folder_is_named(env, make_repo) -> None:
    """Nothing else new: the tracked folders are looked at too."""
    repo = make_repo({"src/a": "a\n", "deep/er/b": "b\n"})
    run = isopatch("--", "sh", "-c", "echo junk > deep/er/.git", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning: 'deep/er/.git' is not in the patch" in run.err
    assert "src/.git" not in run.err


def test_a_nested_repository_keeps_its_gitlink_warning_only(env, make_repo) -> None:
    repo = make_repo()
    script = "git init -q inner && git -C inner commit -q --allow-empty -m i"
    run = isopatch("--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "'inner' is a repository the command made" in run.err
    assert "inner/.git" not in run.err


#: ``eol=crlf`` files are stored with LF and checked out with CRLF: a
#: command that empties ``.gitattributes`` leaves CRLF files that git sees
#: as modified, if it looks at them (issue 21: ``: > .gitattributes`` on
#: git/git gave 4 files in one run and 1 in another).
EOL_FILES = {".gitattributes": "*.bat eol=crlf\n", "a.bat": "a\n", "b.bat": "b\n", "c": "c\n"}


def test_changed_attributes_give_the_same_patch_whatever_the_stat_cache(env, make_repo) -> None:
    """The same files on disk, once with the index's entries racy (fresh
    checkout) and once made clean by a ``git status`` before the change:
    the same patch."""
    repo = make_repo(EOL_FILES)
    patches, errs = [], []
    empty = ": > .gitattributes"
    for script in (empty, f"sleep 0.1; git status -s > /dev/null; {empty}"):
        run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        patches.append(_patch(run))
        errs.append(run.err)
    assert patches[0] == patches[1], errs
    assert b"b/a.bat" in patches[0] and b"b/b.bat" in patches[0]


def test_changed_info_attributes_give_the_same_patch(env, make_repo) -> None:
    repo = make_repo({"a.txt": "a\r\n", "c": "c\n"})
    (repo / ".git" / "info").mkdir(exist_ok=True)
    patches = []
    write = 'echo "*.txt text" > "$(git rev-parse --git-common-dir)/info/attributes"'
    for script in (write, f"sleep 0.1; git status -s > /dev/null; {write}"):
        (repo / ".git" / "info" / "attributes").unlink(missing_ok=True)
        # unconfined: in the sandbox the write to the git directory is discarded
        run = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        patches.append(_patch(run))
    assert patches[0] == patches[1]
    assert b"b/a.txt" in patches[0]


#: A smudge filter that waits for the next second (plus 50 ms) before it
#: gives the content back: the file it converts is written just after a
#: second starts, and what was written before it, in an earlier second.
TICK = (
    f"{sys.executable} -c 'import sys, time; time.sleep(1.05 - time.time() % 1);"
    " sys.stdout.buffer.write(sys.stdin.buffer.read())'"
)

#: Says how git takes ``f.txt``'s index entry: ``racy`` when the index
#: file is not older than the entry (to the second: git then reads the
#: file again, read-cache.c ``is_racy_timestamp``), else ``trusted`` (git
#: takes the stat data for the content).
STAT_CACHE_PROBE = (
    'i=$(stat -c %Y "$(git rev-parse --git-path index)");'
    " e=$(git ls-files --debug f.txt | sed -n 's/^  mtime: \\([0-9]*\\):.*/\\1/p');"
    ' if [ "$i" -le "$e" ]; then echo racy; else echo trusted; fi'
)


@pytest.mark.parametrize("mode", ["pool", "base tree"])
@pytest.mark.parametrize("where", ["info", "tracked"])
def test_a_checkout_change_stays_out_whatever_the_stat_cache(env, make_repo, where, mode) -> None:
    """``f.txt`` differs from the base after checkout alone and the command
    rewrites ``.gitattributes``, which has git read every file again: the
    same patch, without ``f.txt``, whether git read ``f.txt`` before the
    command (its entry racy: written in the second the index was) or
    trusted its stat data (written a second before the index: a slow
    checkout), cold and warm: unconfined, from the pool; sandboxed, over a
    base tree made for the run and over one kept.  The filters only set
    when the checkout writes ``f.txt``: ``early`` holds it back until a
    second starts, with a ``late`` one the checkout writes ``f.txt`` and
    then waits for the next second before it writes the index."""
    repo = make_repo({**CRLF_STORED, "z.tick": b"z\n"})
    rules = "*.txt text\nf.txt filter=early\nz.tick filter=late\n"
    if where == "info":
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "attributes").write_text(rules)
    else:
        (repo / ".gitattributes").write_text(rules)
        git("add", ".gitattributes", cwd=repo, env=env)
        git("commit", "-q", "-m", "attributes", cwd=repo, env=env)
    script = f"pwd; {STAT_CACHE_PROBE}; echo '*.md text' >> .gitattributes"
    racy = ("-c", f"filter.early.smudge={TICK}")
    trusted = ("-c", "filter.early.smudge=cat", "-c", f"filter.late.smudge={TICK}")
    if mode == "pool":
        kept = ("-c", "isopatch.pool=1", "-c", "isopatch.sandbox=false")
        cold = ("-c", "isopatch.sandbox=false")
    else:  # a base tree made and removed, then one made and kept
        kept, cold = (), ("-c", "isopatch.baseTrees=0")
    runs = []
    for options in ((*racy, *cold), (*trusted, *kept), (*trusted, *kept)):  # cold, cold, warm
        run = isopatch(
            "--porcelain", "--", "sh", "-c", script, cwd=repo, env=env, git_options=options
        )
        assert run.returncode == 0, run.err
        runs.append(run)
    seen = [Path(run.fields()["stdout"]).read_text().split() for run in runs]
    if mode == "pool":
        assert [said for _, said in seen] == ["racy", "trusted", "trusted"]
        assert seen[2][0] == seen[1][0], "the last run claimed the worktree of the one before"
    else:
        assert [said for _, said in seen[:2]] == ["racy", "trusted"]
        assert len(base_trees(repo, env)) == 1
    patches = [_patch(run) for run in runs]
    assert patches[0] == patches[1] == patches[2], [run.err for run in runs]
    assert b"a/f.txt" not in patches[0] and b"b/.gitattributes" in patches[0]
    for run in runs:
        assert "warning: 'f.txt' differs from the base right after checkout" in run.err


def test_the_look_before_reads_again_a_converted_file_git_trusts(env, make_repo) -> None:
    """In process, ``f.txt``'s entry trusted (the index a minute newer
    than it): git's own look takes it for unchanged, the look where
    attributes apply reads it, and the index keeps its time."""
    repo = _crlf_repo(make_repo, env)
    worktree = repo.parent / "wt"
    git("worktree", "add", "-q", "--detach", worktree, cwd=repo, env=env)
    admin = GitDirPath(str(repo / ".git" / "worktrees" / "wt"))
    base = CommitId(git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip())
    index = Path(admin) / "index"
    later = time.time() + 60
    os.utime(index, (later, later))
    trusted = index.stat().st_mtime_ns
    looks = {
        conversions: read_baseline(
            WorktreePath(str(worktree)), base, git_dir=admin, env=env, conversions=conversions
        )
        for conversions in (False, True)
    }
    assert [list(look.value.paths) for look in looks.values() if isinstance(look, Ok)] == [
        [],
        [b"f.txt"],
    ]
    assert index.stat().st_mtime_ns == trusted


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_a_tracked_attributes_file_is_found_in_the_index(env, make_repo, version) -> None:
    """Found in the index's bytes, also in version 4 where ``d/.gitattributes``
    shares ``d/.gita`` with the path before it; a repository without one
    is not taken for one that has it."""
    names = {"d/.git-blame-ignore-revs": "x\n", "d/.gitallowed": "y\n", "keep": "k\n"}
    repo = make_repo({**names, "d/.gitattributes": "*.txt text\n"})
    other = make_repo(names, name="other")
    for top in (repo, other):
        git("update-index", "--index-version", version, cwd=top, env=env)
    assert index_may_track_attributes(GitDirPath(str(repo / ".git")))
    assert not index_may_track_attributes(GitDirPath(str(other / ".git")))
