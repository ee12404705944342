"""Without --sandbox, a run says when the user's work tree changed while
the command ran, as ``git status`` sees it (a write through an absolute
path, a ``--link``, or the user's own edits meanwhile), and the look
writes nothing: no index refresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state


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
        "warning: your work tree changed while the command ran: README, dirty.txt, new file\n"
        + HINT
    ), run.err
    assert "isopatch: 1 file changed" in run.err


def test_porcelain_and_json_name_each_path_in_order(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    script = 'git tag v1 && echo x > "$1/b" && echo y > "$1/a\tb"'
    run = isopatch("--porcelain", "--", "sh", "-c", script, "sh", str(repo), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    lines = run.out.splitlines()
    assert lines[-1].startswith("duration ")
    assert lines[-4:-1] == [
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
