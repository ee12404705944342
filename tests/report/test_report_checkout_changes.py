"""Without --sandbox, a run says when the user's work tree changed while
the command ran, as ``git status`` sees it (a write through an absolute
path, a ``--link``, or the user's own edits meanwhile), and the look
writes nothing: no index refresh."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state

from git_isopatch.git.status import read_checkout


@pytest.fixture(autouse=True)
def unconfined(env) -> None:
    """These tests specify unconfined runs, which report what they wrote:
    ``isopatch.sandbox=false`` in the user's global configuration (the
    sandbox, the default since issue 19, discards such writes)."""
    git("config", "--global", "isopatch.sandbox", "false", cwd=Path(env["HOME"]), env=env)


HINT = (
    "hint: use --sandbox to keep the command's writes in its worktree; "
    "if you edited these files meanwhile, nothing is wrong\n"
)


def _path_hint(repo: Path, lead: str) -> str:
    return (
        f"{lead}'{repo}' leads into your checkout, not the worktree, and the command wrote "
        "there: pass paths relative to the current folder"
    )


def test_a_write_through_an_absolute_path_is_reported(env, make_repo, no_leftovers) -> None:
    repo = make_repo({"README": "hello\n", "dirty.txt": "a\n", ".gitignore": "build/\n"})
    (repo / "dirty.txt").write_text("already modified\n")
    (repo / "build").mkdir()
    script = (
        'echo more >> "$1/README" && echo again >> "$1/dirty.txt" && echo new > "$1/new file" '
        '&& echo ignored > "$1/build/out" && echo in-worktree > mine.txt'
    )
    run = isopatch("--", "sh", "-c", script, "sh", str(repo), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err.startswith(
        _path_hint(repo, "hint: ")
        + "\nwarning: your work tree changed while the command ran: README, dirty.txt, new file\n"
        + HINT
    ), run.err
    assert "isopatch: 1 file changed" in run.err


def test_porcelain_and_json_name_each_path_in_order(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    script = 'git tag v1 && echo x > "$1/b" && echo y > "$1/a\tb"'
    run = isopatch("--porcelain", "--", "sh", "-c", script, "sh", str(repo), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    lines = run.out.splitlines()
    assert lines[-1] == _path_hint(repo, "hint "), "the argument that led there"
    assert lines[-2].startswith("duration ")
    assert lines[-5:-2] == [
        "shared-write refs/tags/v1 created",
        'checkout-change "a\\tb"',
        "checkout-change b",
    ], run.out
    run = isopatch(
        "--porcelain",
        "-z",
        "--",
        "sh",
        "-c",
        'echo z >> "$1/b"',
        "sh",
        str(repo),
        cwd=repo,
        env=env,
    )
    assert b"\0checkout-change b\0duration " in run.stdout
    run = isopatch(
        "--json", "--", "sh", "-c", 'rm "$1/b" "$1/a\tb"', "sh", str(repo), cwd=repo, env=env
    )
    assert json.loads(run.out)["checkout-change"] == ["a\tb", "b"]


def test_nothing_changed_nothing_reported_and_the_index_is_not_refreshed(
    env, make_repo, no_leftovers
) -> None:
    repo = make_repo({"README": "hello\n"})
    (repo / "README").write_text("hello\n")  # same content, new mtime: a refresh would rewrite
    (repo / "untracked.txt").write_text("u\n")
    before = repo_state(repo, env)
    run = isopatch("--json", "--", "sh", "-c", "echo x > inside", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "checkout-change" not in json.loads(run.out)
    assert run.err == ""
    assert repo_state(repo, env) == before


def test_our_own_folders_inside_the_work_tree_are_not_reported(
    env, make_repo, no_leftovers
) -> None:
    repo = make_repo()
    (repo / "scratch").mkdir()
    git("config", "status.showUntrackedFiles", "all", cwd=repo, env=env)
    git("config", "isopatch.tmpdir", "scratch", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "sh", "-c", "echo out; echo x > f", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "checkout-change" not in run.out
    assert run.err == ""
    assert Path(run.fields()["stdout"]).read_text() == "out\n"


def _moving_repo(make_repo, env) -> tuple[Path, str, str]:
    """Two commits on the checked-out ``main``, and the user's work: a
    staged change, an unstaged one, an untracked file.  Returns the
    repository and the two commit ids."""
    repo = make_repo({"a": "one\n", "b": "b\n"})
    first = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    (repo / "a").write_text("two\n")
    (repo / "c").write_text("c\n")
    git("add", "a", "c", cwd=repo, env=env)
    git("commit", "-q", "-m", "second", cwd=repo, env=env)
    second = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    (repo / "b").write_text("b, staged\n")
    git("add", "b", cwd=repo, env=env)
    (repo / "a").write_text("two, unstaged\n")
    (repo / "mine").write_text("untracked\n")
    return repo, first, second


def test_a_command_that_moves_the_branch_is_said_to_move_head_not_the_work_tree(
    env, make_repo, no_leftovers
) -> None:
    """The command moves the checked-out branch (a ref the worktree
    shares) and touches no file: ``git status`` of the checkout now lists
    what differs from the other commit, but the work tree did not change,
    and the summary says what happened instead, with the way back."""
    repo, first, second = _moving_repo(make_repo, env)
    status = git("status", "--porcelain", cwd=repo, env=env)
    run = isopatch("--", "git", "update-ref", "refs/heads/main", "HEAD~1", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "your work tree changed" not in run.err and "nothing is wrong" not in run.err, run.err
    moved = (
        f"warning: your HEAD moved while the command ran, from {second[:12]} to {first[:12]}; "
        "your work tree did not move with it, so git status compares it with the new commit"
    )
    back = f"hint: 'git reset --soft {second[:12]}' puts HEAD back and leaves the index and "
    lines = run.err.splitlines()
    assert moved in lines and lines[lines.index(moved) + 1].startswith(back), run.err
    assert "warning: your repository changed while the command ran: refs/heads/main" in run.err
    record = isopatch(
        "--porcelain", "--", "git", "update-ref", "refs/heads/main", second, cwd=repo, env=env
    )
    assert "checkout-change" not in record.out, record.out
    git("reset", "-q", "--soft", second, cwd=repo, env=env)  # as the hint says: all as it was
    assert git("status", "--porcelain", cwd=repo, env=env) == status


def test_a_file_written_while_the_branch_moves_is_still_named(env, make_repo, no_leftovers) -> None:
    repo, first, second = _moving_repo(make_repo, env)
    script = 'git update-ref refs/heads/main HEAD~1 && echo x >> "$1/c" && echo n > "$1/new"'
    run = isopatch("--", "sh", "-c", script, "sh", str(repo), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning: your work tree changed while the command ran: c, new\n" in run.err, run.err
    assert f"from {second[:12]} to {first[:12]}" in run.err


def test_the_look_reads_what_git_status_lists_and_head_in_one_process(env, make_repo) -> None:
    """The look's one ``git status --porcelain=v2 --branch`` gives the same
    paths and letters as the first porcelain format, and the commit of
    ``HEAD``: for changes, a staged rename of a name with spaces, a
    deletion, an untracked file and an unmerged path."""
    repo = make_repo({"a": "1\n", "b c": "2\n", "d/e": "3\n", "both": "base\n"})
    git("checkout", "-q", "-b", "other", cwd=repo, env=env)
    (repo / "both").write_text("other\n")
    git("commit", "-qam", "other", cwd=repo, env=env)
    git("checkout", "-q", "main", cwd=repo, env=env)
    (repo / "both").write_text("main\n")
    git("commit", "-qam", "main", cwd=repo, env=env)
    git("merge", "-q", "other", cwd=repo, env=env, check=False)  # a conflict in "both"
    (repo / "a").write_text("changed\n")
    git("mv", "b c", "b d", cwd=repo, env=env)
    (repo / "d" / "e").unlink()
    (repo / "new file").write_text("untracked\n")
    v1 = git("status", "--porcelain", "-z", cwd=repo, env=env).split(b"\0")
    expected, records = {}, iter(v1)
    for record in records:
        if record:
            expected[record[3:]] = record[:2]
            if record[:1] == b"R":
                expected[next(records)] = record[:2]
    look = read_checkout(str(repo / ".git"), str(repo), env=env)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    assert look.value.head == head
    assert {path: letters for path, (letters, _) in look.value.entries.items()} == expected
    assert expected[b"both"] == b"UU" and expected[b"new file"] == b"??"
    assert os.path.exists(repo / ".git" / "MERGE_HEAD")
