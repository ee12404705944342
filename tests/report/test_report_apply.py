"""Bringing the patch home: :func:`git_isopatch.git.apply.apply_to_work_tree`
writes the user's work tree all or nothing, never the index, and whatever
the user's ``apply.*``, ``core.autocrlf`` or current folder; and
``--apply`` on the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, repo_state, tree_manifest, write_tree

from git_isopatch.git.apply import apply_to_work_tree
from git_isopatch.git.result import Err, Ok
from git_isopatch.git.run import own_git_environment


def _patch(
    repo: Path,
    env: dict[str, str],
    change: dict[str, str | bytes],
    tmp: Path,
    executable: tuple[str, ...] = (),
) -> Path:
    """A patch (as git-isopatch writes it) of ``change`` (``"DELETE"``
    deletes) and mode changes (``executable``) on top of ``repo``'s HEAD,
    made in a clone ``tmp/clone``; ``repo`` is left as it is."""
    tmp.mkdir(exist_ok=True)
    clone = tmp / "clone"
    git("clone", "-q", repo, clone, cwd=tmp, env=env)
    write_tree(clone, {k: v for k, v in change.items() if v != "DELETE"})
    for name, value in change.items():
        if value == "DELETE":
            (clone / name).unlink()
    for name in executable:
        (clone / name).chmod(0o755)
    git("add", "-A", cwd=clone, env=env)
    patch = tmp / "change.patch"
    patch.write_bytes(git("diff", "--cached", "--binary", "--full-index", "-M", cwd=clone, env=env))
    return patch


def _apply(repo: Path, patch: Path, env: dict[str, str]):
    git_dir = git("rev-parse", "--absolute-git-dir", cwd=repo, env=env).decode().strip()
    return apply_to_work_tree(git_dir, str(repo), str(patch), env=own_git_environment(env))


def test_binary_modes_symlinks_renames_and_deletions_apply(env, make_repo, tmp_path) -> None:
    repo = make_repo(
        {
            "text": "one\ntwo\n",
            "image.bin": bytes(range(256)) * 4,
            "script": "#!/bin/sh\n",
            "old-name": "a file that moves\n" * 20,
            "gone": "bye\n",
        }
    )
    patch = _patch(
        repo,
        env,
        {
            "text": "one\n2\n",
            "image.bin": bytes(reversed(range(256))) * 4 + b"\0",
            "new.bin": b"\0\1\2\xff",
            "link": "symlink:text",
            "new-name": "a file that moves\n" * 20,
            "old-name": "DELETE",
            "gone": "DELETE",
        },
        tmp_path,
        executable=("script",),
    )
    assert b"rename from old-name" in patch.read_bytes()
    assert b"GIT binary patch" in patch.read_bytes()
    assert b"new mode 100755" in patch.read_bytes()
    index = (repo / ".git" / "index").read_bytes()
    assert isinstance(_apply(repo, patch, env), Ok)
    assert tree_manifest(repo) == tree_manifest(tmp_path / "clone")
    assert (repo / ".git" / "index").read_bytes() == index


def test_a_patch_that_does_not_apply_writes_nothing(env, make_repo, tmp_path) -> None:
    """Two files: the first applies, the second conflicts; neither is written."""
    repo = make_repo({"a": "a\n", "b": "b\n"})
    patch = _patch(repo, env, {"a": "A\n", "b": "B\n"}, tmp_path)
    (repo / "b").write_text("the user's edit\n")
    before = repo_state(repo, env)
    match _apply(repo, patch, env):
        case Err(error):
            assert "patch does not apply" in error.stderr.decode()
        case Ok():
            pytest.fail("a conflicting patch applied")
    assert repo_state(repo, env) == before
    assert not list(repo.rglob("*.rej")) and not list(repo.rglob("*.orig"))


def test_the_users_apply_configuration_does_not_change_what_is_written(
    env, make_repo, tmp_path
) -> None:
    """``apply.whitespace=error`` would refuse a trailing space the command
    wrote, ``fix`` would strip it; ``apply.ignoreWhitespace`` would let a
    patch apply on context that differs."""
    repo = make_repo({"a": "x\n", "b": "a b\ntwo\nthree\nfour\n"})
    patch = _patch(repo, env, {"a": "x  \n\ty \n"}, tmp_path)
    expected = b"x  \n\ty \n"
    for value in ("error", "fix", "error-all"):
        git("config", "apply.whitespace", value, cwd=repo, env=env)
        assert isinstance(_apply(repo, patch, env), Ok), value
        assert (repo / "a").read_bytes() == expected
        git("checkout", "--", "a", cwd=repo, env=env)
    patch = _patch(repo, env, {"b": "a b\ntwo\n3\nfour\n"}, tmp_path / "second")
    (repo / "b").write_text("a  b\ntwo\nthree\nfour\n")  # the user's edit of the context
    git("config", "apply.ignoreWhitespace", "change", cwd=repo, env=env)
    assert isinstance(_apply(repo, patch, env), Err)
    assert (repo / "b").read_text() == "a  b\ntwo\nthree\nfour\n"


def test_core_autocrlf_work_tree_keeps_its_line_endings(env, make_repo, tmp_path) -> None:
    repo = make_repo({"a": "one\ntwo\n"})
    git("config", "core.autocrlf", "true", cwd=repo, env=env)
    (repo / "a").unlink()
    git("checkout", "--", "a", cwd=repo, env=env)
    assert (repo / "a").read_bytes() == b"one\r\ntwo\r\n"
    patch = _patch(repo, env, {"a": "one\n2\n"}, tmp_path)
    assert isinstance(_apply(repo, patch, env), Ok)
    assert (repo / "a").read_bytes() == b"one\r\n2\r\n"


def test_applies_from_the_top_whatever_the_current_folder(env, make_repo, tmp_path) -> None:
    """``git apply`` in a subfolder skips the paths outside it; ours runs at
    the top."""
    repo = make_repo({"top": "t\n", "sub/inner": "i\n"})
    patch = _patch(repo, env, {"top": "T\n", "sub/inner": "I\n"}, tmp_path)
    cwd = os.getcwd()
    os.chdir(repo / "sub")
    try:
        assert isinstance(_apply(repo, patch, env), Ok)
    finally:
        os.chdir(cwd)
    assert (repo / "top").read_text() == "T\n"
    assert (repo / "sub" / "inner").read_text() == "I\n"


# --apply on the command line ------------------------------------------------

#: Changes ``a`` (second line), then waits until the test says go: the test
#: edits the user's checkout while the command runs.
WAITING_CHANGE = (
    "printf 'one\\nTWO\\nthree\\nfour\\nfive\\nsix\\nseven\\n' > a; : > \"$READY\"; "
    'while [ ! -e "$GO" ]; do sleep 0.05; done'
)
SEVEN = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n"


def _run_while_the_user_edits(repo: Path, env: dict[str, str], tmp_path: Path, edit, *args):
    """Run ``git isopatch --porcelain --apply <args> -- sh -c WAITING_CHANGE``;
    call ``edit()`` once the command has written its change and waits."""
    import subprocess
    import time

    from repo_helpers import ISOPATCH, Run

    signals = tmp_path / "signals"  # outside: really writable in the sandbox
    signals.mkdir()
    ready, go = signals / "ready", signals / "go"
    if "--no-sandbox" not in args:
        args = ("--allow-write", str(signals), *args)
    process = subprocess.Popen(
        [str(ISOPATCH), "--porcelain", "--apply", *args, "--", "sh", "-c", WAITING_CHANGE],
        cwd=repo,
        env={**env, "READY": str(ready), "GO": str(go)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the command did not start"
        time.sleep(0.02)
    edit()
    go.touch()
    stdout, stderr = process.communicate(timeout=120)
    return Run(process.returncode, stdout, stderr)


def test_an_overlapping_edit_made_during_the_run_is_never_lost(env, make_repo, tmp_path) -> None:
    repo = make_repo({"a": SEVEN, "b": "b\n"})
    edited = "one\nthe user's two\nthree\nfour\nfive\nsix\nseven\n"
    before = {}

    def edit() -> None:
        (repo / "a").write_text(edited)
        before.update(repo_state(repo, env))
        del before["worktree list"]  # the run's own worktree is in it now

    # unconfined: in the sandbox the look for checkout changes is skipped
    run = _run_while_the_user_edits(repo, env, tmp_path, edit, "--no-sandbox")
    assert run.returncode == 128, run.err
    after = repo_state(repo, env)
    del after["worktree list"]
    assert after == before  # nothing written, the index untouched
    assert (repo / "a").read_text() == edited
    fields = run.fields()
    assert fields["error-code"] == "apply-failed"
    assert fields["exit"] == "0"
    patch = Path(fields["patch"])
    assert patch.is_file() and b"+TWO" in patch.read_bytes()
    assert fields["error"] == (
        "the patch does not apply to the work tree as it is now: "
        "patch failed: a:1; a: patch does not apply"
    )
    # The user's edit is also a change of the checkout during the run, which
    # every run without --sandbox reports before the apply is tried.
    assert fields["checkout-change"] == "a"
    assert run.err.splitlines() == [
        "warning: your work tree changed while the command ran: a",
        "hint: use --sandbox to keep the command's writes in its worktree; "
        "if you edited these files meanwhile, nothing is wrong",
        f"error: {fields['error']}",
        f"hint: nothing was written; the patch is kept at '{patch}'",
        INCLUDE_HINT,
    ]


def test_an_edit_elsewhere_made_during_the_run_stays_and_the_patch_applies(
    env, make_repo, tmp_path
) -> None:
    repo = make_repo({"a": SEVEN, "b": "b\n"})
    index = (repo / ".git" / "index").stat()

    def edit() -> None:
        (repo / "a").write_text(SEVEN.replace("seven", "the user's seven"))
        (repo / "b").write_text("the user's b\n")

    run = _run_while_the_user_edits(repo, env, tmp_path, edit)
    assert run.returncode == 0, run.err
    assert "error" not in run.fields()
    assert (repo / "a").read_text() == "one\nTWO\nthree\nfour\nfive\nsix\nthe user's seven\n"
    assert (repo / "b").read_text() == "the user's b\n"
    after = (repo / ".git" / "index").stat()
    assert (after.st_ino, after.st_mtime_ns) == (index.st_ino, index.st_mtime_ns)


def test_apply_brings_every_kind_of_change_home_from_a_subfolder(env, make_repo) -> None:
    from repo_helpers import isopatch

    repo = make_repo({"a": "a\n", "bin": b"\0\1", "old": "moves\n" * 10, "sub/s": "s\n"})
    change = (
        "cd .. && printf '\\0\\2\\3' > bin && git mv old new && ln -s a link && "
        "chmod +x a && echo S > sub/s && echo n > untracked"
    )
    before = (repo / ".git" / "index").read_bytes()
    run = isopatch("--apply", "--", "sh", "-c", change, cwd=repo / "sub", env=env)
    assert run.returncode == 0, run.err
    assert run.err.splitlines()[-1] == "isopatch: 6 files changed, exit 0, applied to the work tree"
    assert (repo / "bin").read_bytes() == b"\0\2\3"
    assert (repo / "new").read_text() == "moves\n" * 10 and not (repo / "old").exists()
    assert os.readlink(repo / "link") == "a"
    assert os.access(repo / "a", os.X_OK)
    assert (repo / "sub" / "s").read_text() == "S\n"
    assert (repo / "untracked").read_text() == "n\n"
    assert (repo / ".git" / "index").read_bytes() == before
    # the patch is home: nothing is left behind for anyone to read
    assert not list(Path(env["TMPDIR"]).glob("git-isopatch-*"))


@pytest.mark.parametrize(
    ("command", "status"), [("echo x > a; exit 3", 3), ("true", 0), ("echo x > a; sleep 5", 124)]
)
def test_nothing_is_applied_unless_the_command_succeeded_with_a_change(
    env, make_repo, command, status
) -> None:
    from repo_helpers import isopatch

    repo = make_repo({"a": "a\n"})
    before = repo_state(repo, env)
    run = isopatch("--apply", "--timeout", "1", "--", "sh", "-c", command, cwd=repo, env=env)
    assert run.returncode == status, run.err
    assert repo_state(repo, env) == before
    if status:
        assert f"hint: not applied: the command exited {status}" in run.err.splitlines()


def test_apply_with_include_uncommitted_goes_on_top_of_the_work_in_progress(env, make_repo) -> None:
    from repo_helpers import isopatch

    repo = make_repo({"a": SEVEN})
    (repo / "a").write_text(SEVEN.replace("one", "mine"))
    (repo / "untracked").write_text("u\n")
    run = isopatch(
        "--include-uncommitted",
        "--apply",
        "--",
        "sh",
        "-c",
        "sed -i s/six/6/ a untracked",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert (repo / "a").read_text() == SEVEN.replace("one", "mine").replace("six", "6")
    assert git("status", "--porcelain", cwd=repo, env=env) == b" M a\n?? untracked\n"


INCLUDE_HINT = (
    "hint: the patch was made from HEAD; if your work tree already differed from it "
    "near these lines, --include-uncommitted starts from your work tree as it is"
)


def test_an_uncommitted_edit_near_a_hunk_fails_the_apply_and_the_hint_names_the_way_out(
    env, make_repo
) -> None:
    """git apply needs each hunk's 3 context lines unchanged: an edit made
    before the run, two lines from the command's change, fails the whole
    apply (nothing lost); the hint names the file that held the edit and
    --include-uncommitted, which starts from the work tree as it is and
    then applies."""
    from repo_helpers import isopatch

    repo = make_repo({"a": SEVEN})
    mine = SEVEN.replace("four", "my four")
    (repo / "a").write_text(mine)
    before = repo_state(repo, env)
    change = ("sh", "-c", "sed -i s/two/TWO/ a")
    run = isopatch("--apply", "--", *change, cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert repo_state(repo, env) == before
    lines = run.err.splitlines()
    assert lines[-3].startswith("error: the patch does not apply to the work tree as it is now")
    assert lines[-2].startswith("hint: nothing was written; the patch is kept at ")
    assert lines[-1] == (
        "hint: the command started from HEAD, without your uncommitted edits to 'a'; "
        "--include-uncommitted starts from your work tree as it is"
    )
    # an edit four lines away is outside the context: the same run applies
    (repo / "a").write_text(SEVEN.replace("six", "my six"))
    far = isopatch("-q", "--apply", "--", *change, cwd=repo, env=env)
    assert far.returncode == 0, far.err
    (repo / "a").write_text(mine)
    run = isopatch("-q", "--include-uncommitted", "--apply", "--", *change, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (repo / "a").read_text() == mine.replace("two", "TWO")


def test_no_include_uncommitted_hint_where_it_cannot_help(env, make_repo, tmp_path) -> None:
    """A run that used --include-uncommitted, or --staged (which cannot go
    with it), or another --base, is not told to use it."""
    from repo_helpers import isopatch

    repo = make_repo({"a": SEVEN})
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo, env=env)

    def edit() -> None:
        (repo / "a").write_text(SEVEN.replace("one", "the user's one"))

    run = _run_while_the_user_edits(repo, env, tmp_path, edit, "--include-uncommitted")
    assert run.fields()["error-code"] == "apply-failed", run.err
    assert INCLUDE_HINT not in run.err.splitlines()
    (repo / "a").write_text(SEVEN.replace("three", "3"))
    run = isopatch(
        "--apply", "--base", "HEAD~1", "--", "sed", "-i", "s/two/TWO/", "a", cwd=repo, env=env
    )
    assert run.returncode == 128, run.err
    assert INCLUDE_HINT not in run.err.splitlines()
    git("checkout", "-q", "a", cwd=repo, env=env)
    (repo / "a").write_text(SEVEN.replace("two", "2"))
    git("add", "a", cwd=repo, env=env)
    (repo / "a").write_text(SEVEN.replace("two", "2").replace("three", "3"))
    run = isopatch("--staged", "--apply", "--", "sed", "-i", "s/one/ONE/", "a", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert INCLUDE_HINT not in run.err.splitlines()


def test_no_include_uncommitted_hint_for_an_apply_that_fails_otherwise(env, make_repo) -> None:
    """A patch that would apply but cannot be written (here, a smudge
    filter that fails as the new file is checked out) is not the work
    tree's edits near a hunk: the hint that says so would send the user
    the wrong way."""
    from repo_helpers import isopatch

    repo = make_repo({".gitattributes": "*.x filter=broken\n", "a": "a\n"})
    for key, value in (("clean", "cat"), ("smudge", "false"), ("required", "true")):
        git("config", f"filter.broken.{key}", value, cwd=repo, env=env)
    run = isopatch("--apply", "--", "sh", "-c", "echo new > n.x", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert not (repo / "n.x").exists()
    lines = run.err.splitlines()
    assert lines[-2].startswith("error: external filter 'false' failed"), run.err
    assert lines[-1].startswith("hint: nothing was written; the patch is kept at "), run.err
    assert INCLUDE_HINT not in lines
