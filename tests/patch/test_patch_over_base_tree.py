"""The patch over a base tree (design: procedure step 6): a sandboxed run
compares only the paths its layer holds (files, whiteouts, opaque folders)
and the entries the command changed in its index, unless a change can alter
how untouched files convert; the patch is the one a worktree of its own
gives, byte for byte.  Each case is a command that makes the layer odd
(whiteouts, opaque folders, a file replaced by a folder, a commit, a
rewritten ``.gitattributes``), run sandboxed over the base tree it makes
and again over the kept one, and unconfined in a worktree of its own
(every path compared): the three patches are the same, and ``git apply``
of it on a clean checkout gives the tree the command left."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, base_trees, git, isopatch, tree_manifest

FILES: dict[str, bytes] = {
    "a.txt": b"a\n",
    "keep.txt": b"keep\n",
    "run.sh": b"#!/bin/sh\necho run\n",
    "src/a.c": b"int a;\n",
    "src/c.c": b"int c;\n",
    "src/deep/b.c": b"int b;\n",
    "crlf.txt": b"one\r\ntwo\r\n",
    ".gitignore": b"*.log\n",
}

#: name -> (the command's script, bytes the patch must hold; b"" for an empty patch)
CASES: dict[str, tuple[str, bytes]] = {
    "whiteout": ("rm a.txt", b"deleted file mode"),
    "whiteout then the same file again": ("rm a.txt && printf 'a\\n' > a.txt", b""),
    "a folder emptied and made again (opaque)": (
        "rm -rf src && mkdir src && echo new > src/a.c",
        b"--- a/src/deep/b.c\n+++ /dev/null",
    ),
    "a whole folder deleted": ("rm -rf src", b"--- a/src/deep/b.c\n+++ /dev/null"),
    "a deep folder deleted": ("rm -r src/deep", b"--- a/src/deep/b.c\n+++ /dev/null"),
    "mode only": ("chmod +x a.txt", b"old mode 100644\nnew mode 100755"),
    "mode only, and back": ("chmod +x a.txt && chmod -x a.txt", b""),
    "touched, not changed": ("touch a.txt src/deep/b.c && cat keep.txt >/dev/null", b""),
    "a file replaced by a folder": (
        "rm a.txt && mkdir a.txt && echo in > a.txt/in",
        b"+++ b/a.txt/in",
    ),
    "a folder replaced by a file": ("rm -rf src && echo f > src", b"+++ b/src\n"),
    "a folder renamed": ("mv src lib", b"rename from src/deep/b.c"),
    "a file replaced by a symlink": ("rm a.txt && ln -s keep.txt a.txt", b"new file mode 120000"),
    "a folder replaced by a symlink": ("rm -rf src && ln -s a.txt src", b"+++ b/src\n"),
    "a symlink to a folder": ("ln -s src here", b"+++ b/here\n"),
    "a commit made by the command": (
        "echo more >> a.txt && echo n > new.txt && git add -A && git commit -qm c",
        b"+++ b/new.txt",
    ),
    "a commit, then a reset to the base": (
        "echo more >> a.txt && git commit -qam c && git reset -q --hard HEAD~1 && echo x > x.txt",
        b"+++ b/x.txt",
    ),
    "a path removed from the index alone": ("git rm -q --cached keep.txt", None),
    "a path added to the index alone": ("echo s > staged.txt && git add staged.txt", b"staged"),
    "the .gitattributes made: an untouched file converts anew": (
        "echo '*.txt text' > .gitattributes",
        b"+++ b/.gitattributes",
    ),
    "the .gitattributes of a folder made": (
        "echo '*.c text eol=crlf' > src/.gitattributes && echo 'int d;' > src/deep/d.c",
        b"+++ b/src/.gitattributes",
    ),
    "info/attributes written": (
        "echo '*.txt text' > \"$(git rev-parse --git-common-dir)/info/attributes\"; echo >> a.txt",
        b"+++ b/a.txt",
    ),
    "core.autocrlf set": ("git config core.autocrlf input && echo >> a.txt", b"+++ b/a.txt"),
    "the .gitignore emptied: an ignored name becomes new": (
        "echo l > x.log && : > .gitignore",
        b"+++ b/x.log",
    ),
    "a new ignored file": ("echo l > y.log && echo n > n.txt", b"+++ b/n.txt"),
    "a change hidden by the index's flags, and a new file": (
        "git update-index --assume-unchanged a.txt && echo more >> a.txt "
        "&& git update-index --skip-worktree keep.txt && echo k >> keep.txt && echo n > n.txt",
        b"+++ b/keep.txt",
    ),
    "a repository the command made": (
        "mkdir inner && cd inner && git init -q && echo i > i && git add i "
        "&& git commit -qm i && cd .. && echo t > top.txt",
        b"+++ b/top.txt",
    ),
    "a hard link to a file of the base tree, then an edit": (
        "ln a.txt src/linked && echo more >> a.txt",
        b"+++ b/src/linked",
    ),
    "extended attributes set through the overlay, an overlay's own among them": (
        "python3 -c \"import os; os.setxattr('a.txt', 'user.x', b'1');"
        " os.setxattr('src', 'user.overlay.opaque', b'y')\" 2>/dev/null; echo n > src/n.c",
        b"+++ b/src/n.c",
    ),
    "a symlink replaced by a folder": (
        "ln -s a.txt l && git add l && git commit -qm l && rm l && mkdir l && echo x > l/f",
        b"+++ b/l/f",
    ),
    "a folder replaced by a symlink to another": ("rm -rf src && ln -s . src", b"+++ b/src\n"),
    "a new folder named with a newline and a byte that is no UTF-8, a case-only rename": (
        "mkdir -p \"$(printf 'n\\nl')/x\" && echo z > \"$(printf 'n\\nl/x/caf\\351')\""
        " && mv a.txt A.txt",
        b"rename to A.txt",
    ),
    "a .git file planted in a tracked folder": (
        "echo 'gitdir: /nowhere' > src/.git && echo z >> src/a.c",
        b"+++ b/src/a.c",
    ),
    "a file 400 folders deep": (
        "p=d; i=1; while [ $i -lt 400 ]; do p=$p/d; i=$((i + 1)); done; "
        "mkdir -p $p && echo deep > $p/f",
        b"+++ b/d/d/d/d/",
    ),
    "more new folders than paths compared": (
        "for i in $(seq 300); do mkdir d$i && echo $i > d$i/f; done",
        b"+++ b/d300/f",
    ),
    "more new files in one folder than paths compared": (
        "for i in $(seq 300); do echo $i > src/deep/n$i; done; rm src/c.c",
        b"+++ b/src/deep/n300",
    ),
}


def _patch(repo: Path, env: dict[str, str], script: str, *options: str) -> tuple[bytes, Path]:
    run = isopatch("--porcelain", "--keep", *options, "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    return Path(fields["patch"]).read_bytes(), Path(fields["worktree"])


def _tree(kept: Path) -> dict[bytes, tuple]:
    """The kept worktree's files, but the git folder of a repository the
    command made (its index holds stat data)."""
    return {p: v for p, v in tree_manifest(kept).items() if not p.startswith(b"inner/.git")}


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_patch_over_a_base_tree_is_byte_identical(env, make_repo, tmp_path, case) -> None:
    script, holds = CASES[case]
    repo = make_repo(FILES)
    cold, kept_cold = _patch(repo, env, script, "--sandbox")
    assert len(base_trees(repo, env)) == 1, "the run went over a base tree"
    warm, kept_warm = _patch(repo, env, script, "--sandbox")
    unconfined, kept_own = _patch(repo, env, script, "--no-sandbox")
    assert cold == unconfined, (cold, unconfined)
    assert warm == unconfined, (warm, unconfined)
    if holds == b"":
        assert unconfined == b""
    elif holds is not None:
        assert holds in unconfined, unconfined
    # the kept worktree over the base tree is a real folder: the command's tree
    assert _tree(kept_cold) == _tree(kept_own)
    assert _tree(kept_warm) == _tree(kept_own)
    patch = tmp_path / "p.patch"
    patch.write_bytes(unconfined)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    applied = apply_to_clean_checkout(repo, head, patch, tmp_path / "applied", env)
    ignored = {p for p in tree_manifest(kept_own) if p == b"y.log" or p.startswith(b"inner/")}
    # a .git the command planted is disarmed in a kept worktree; git never tracks one
    ignored |= {p for p in tree_manifest(kept_own) if p.endswith(b".git.isopatch-disarmed")}
    expected = {p: v for p, v in tree_manifest(kept_own).items() if p not in ignored}
    if "crlf" not in case and "attributes" not in case and "autocrlf" not in case:
        assert tree_manifest(applied) == expected
    for kept in (kept_cold, kept_warm, kept_own):
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)


@pytest.mark.hostile
def test_an_ignored_gitattributes_makes_untouched_files_compared(env, make_repo) -> None:
    """A ``.gitattributes`` the command writes applies whether or not it is
    ignored: git reads every one in the tree.  Ignored, it is never listed
    as a new file, yet it changes how the untouched ``crlf.txt`` converts
    (``text``: stored with LF), so the patch over a base tree compares
    every path as it does for one that is not ignored."""
    repo = make_repo(FILES)
    listed = "echo '*.txt text' > .gitattributes"
    ignored = f"{listed} && echo .gitattributes >> .gitignore"
    for run in ("cold", "warm"):
        patch, kept = _patch(repo, env, ignored, "--sandbox")
        assert len(base_trees(repo, env)) == 1, "the run went over a base tree"
        assert b"+++ b/.gitattributes" not in patch, (run, patch)
        assert b"diff --git a/crlf.txt b/crlf.txt" in patch, (run, patch)
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)
    shown, kept = _patch(repo, env, listed, "--sandbox")
    assert b"diff --git a/crlf.txt b/crlf.txt" in shown, shown
    git("worktree", "remove", "--force", kept, cwd=repo, env=env)


#: Rewrites, in place, the object id of the run's index entry ``argv[1]``
#: to ``argv[2]`` and puts the index's times back: same inode, same size,
#: same modification time.
REWRITE_IN_PLACE = """\
import hashlib, os, struct, subprocess, sys
index = subprocess.run(["git", "rev-parse", "--git-path", "index"],
                       capture_output=True, text=True, check=True).stdout.strip()
before = os.stat(index)
data = bytearray(open(index, "rb").read())
_, _, count = struct.unpack(">4sLL", data[:12])
at = 12
for _ in range(count):
    flags = struct.unpack(">H", data[at + 60 : at + 62])[0]
    start = at + 62 + (2 if flags & 0x4000 else 0)
    end = data.index(b"\\0", start)
    if data[start:end] == sys.argv[1].encode():
        data[at + 40 : at + 60] = bytes.fromhex(sys.argv[2])
    at += (end - at + 8) & ~7
body = bytes(data[:-20])
with open(index, "r+b") as handle:
    handle.write(body + hashlib.sha1(body).digest())
os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))
after = os.stat(index)
assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
    before.st_ino, before.st_size, before.st_mtime_ns)
"""


@pytest.mark.hostile
def test_an_index_rewritten_in_place_with_its_times_put_back_is_compared(
    env, make_repo, tmp_path
) -> None:
    """The command changes a gitlink's commit in its index alone (nothing
    in its layer), writing the index in place and setting its modification
    time back: the run's index still has the inode, size and time
    git-isopatch left.  Its change time moved all the same, so the entry is
    compared: the patch over the base tree is the one a worktree of its own
    gives, the gitlink's new commit."""
    repo = make_repo({"a.txt": "a\n"})
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "sub", cwd=repo, env=env)
    rewrite = tmp_path / "rewrite.py"
    rewrite.write_text(REWRITE_IN_PLACE)
    script = f"python3 {rewrite} sub {'2' * 40}"
    patches = []
    for mode in ("--sandbox", "--sandbox", "--no-sandbox"):
        patch, kept = _patch(repo, env, script, mode)
        patches.append(patch)
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)
    assert len(base_trees(repo, env)) == 1, "the runs went over a base tree"
    assert f"+Subproject commit {'2' * 40}".encode() in patches[2], patches[2]
    assert patches[0] == patches[2], patches
    assert patches[1] == patches[2], patches


#: Makes git take ``a.txt`` for unchanged: the repository's configuration
#: (read as the command left it) told to trust fewer stat fields, then an
#: edit of the same size with the file's times put back.
HIDE_AN_EDIT = (
    "git config {key} {value} && cp -p a.txt \"$TMPDIR/ref\" && printf 'A\\n' > a.txt"
    ' && touch -r "$TMPDIR/ref" a.txt && echo n > new.txt'
)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("key", "value"),
    [("core.checkStat", "minimal"), ("core.trustctime", "false")],
)
def test_an_edit_with_its_times_put_back_is_in_the_patch_whatever_stat_git_is_told(
    env, make_repo, key: str, value: str
) -> None:
    """Over a base tree whose index is older than its files (no entry
    racily clean), the command edits ``a.txt`` keeping its size, puts its
    times back, and sets the repository's ``core.checkStat`` or
    ``core.trustctime`` so that git would trust the index's stat data: the
    edit is in the patch all the same."""
    repo = make_repo(FILES)
    for script in ("true", "echo n > new.txt"):  # the base tree's index written anew
        run = isopatch("--sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        time.sleep(1.1)  # its files are now older than any index written after
    patch, _ = _patch(repo, env, HIDE_AN_EDIT.format(key=key, value=value), "--sandbox")
    assert b"+++ b/new.txt" in patch, patch
    assert b"-a\n+A\n" in patch, patch


def test_a_tracked_gitattributes_the_command_left_alone_compares_the_changed_path_alone(
    env, make_repo, tmp_path
) -> None:
    """A ``.gitattributes`` the base commit tracks (most large projects
    have one at the top) is no ignored one: a run that changes one file
    lists that file alone, never every file of the worktree with the
    untracked ones (``ls-files --others`` of no pathspec), and its patch
    is an unconfined run's."""
    repo = make_repo({**FILES, ".gitattributes": b"*.c text\n"})
    assert isopatch("-q", "--sandbox", "--", "true", cwd=repo, env=env).returncode == 0
    traces = tmp_path / "traces"
    traces.mkdir()
    traced = {**env, "GIT_TRACE2_EVENT": str(traces / "events")}
    command = ["sh", "-c", "echo x >> src/a.c"]
    run = isopatch("--porcelain", "--sandbox", "--allow-write", traces, "--", *command,
                   cwd=repo, env=traced)  # fmt: skip
    assert run.returncode == 0, run.err
    unconfined = isopatch("--porcelain", "--no-sandbox", "--", *command, cwd=repo, env=env)
    patch = Path(run.fields()["patch"]).read_bytes()
    assert patch == Path(unconfined.fields()["patch"]).read_bytes()
    started = [json.loads(line) for line in (traces / "events").read_text().splitlines()]
    listings = [e["argv"] for e in started if e["event"] == "start" and "ls-files" in e["argv"]]
    assert [argv for argv in listings if argv[-1] == "--"] == [], listings


@pytest.mark.hostile
@pytest.mark.parametrize("tracked", [True, False], ids=["tracked", "ignored"])
def test_a_relative_attributes_file_the_command_writes_makes_untouched_files_compared(
    env, make_repo, tracked
) -> None:
    """A relative ``core.attributesFile`` names a file git reads from the
    top of the worktree it runs in, tracked or ignored: the command's
    ``*.txt text`` there makes the untouched ``crlf.txt`` convert anew
    (stored with LF, as ``git status`` in place shows it modified), so
    the patch over a base tree and the unconfined one hold it, as for a
    ``.gitattributes``, the index's entries racy (fresh checkout) or made
    clean by a ``git status`` a second later (git compares the times to
    the second where built without nanoseconds), before the change."""
    files = {**FILES, "attributes": b""} if tracked else {**FILES, ".gitignore": b"attributes\n"}
    repo = make_repo(files)
    git("config", "core.attributesFile", "attributes", cwd=repo, env=env)
    write = "echo '*.txt text' > attributes"
    for script in (write, f"sleep 1; git status -s > /dev/null; {write}"):
        unconfined, kept = _patch(repo, env, script, "--no-sandbox")
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)
        assert b"diff --git a/crlf.txt b/crlf.txt" in unconfined, (script, unconfined)
        for run in ("cold", "warm"):
            patch, kept = _patch(repo, env, script, "--sandbox")
            assert len(base_trees(repo, env)) == 1, "the run went over a base tree"
            assert patch == unconfined, (script, run, patch, unconfined)
            git("worktree", "remove", "--force", kept, cwd=repo, env=env)
