"""Messages are terminal-safe: every path or name from the command's world
that a human message prints (the writes outside the worktree, the
checkout's changes, the shared writes and the worktrees the command
added, a kept worktree, the patch) is quoted as git quotes it, so that a
carriage return or an escape sequence in a name cannot erase or rewrite
the warning on a terminal (design: "Messages follow git")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

from git_isopatch.git.quote import quoted, terminal_safe

pytestmark = pytest.mark.hostile

#: A name that, printed raw, returns to the start of the line and erases it.
NAME = "x\r\x1b[2Kevil"
#: The same as git quotes it, alone and at the end of a path.
QUOTED = '"x\\r\\033[2Kevil"'
ESCAPED = 'x\\r\\033[2Kevil"'


def assert_safe(err: bytes) -> None:
    """Nothing of ``err`` acts on a terminal: no control byte but the
    newlines that end its lines."""
    raw = [b for b in err if (b < 0x20 and b != 0x0A) or b == 0x7F]
    assert not raw, err


def test_a_written_name_is_quoted_in_the_outside_write_warning(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--sandbox", "--", "sh", "-c", 'touch "$HOME/$1"', "sh", NAME, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert_safe(run.stderr)
    warning = [line for line in run.err.splitlines() if line.startswith("warning:")]
    assert warning and ESCAPED in warning[0], run.err


def test_names_in_the_checkout_and_shared_state_are_quoted(env, make_repo, tmp_path) -> None:
    """Unconfined, the command writes a file of that name in the checkout,
    a loose ref of that name (git itself refuses one, the file system
    does not) and adds a worktree whose folder has that name."""
    repo = make_repo()
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    added = tmp_path / NAME
    script = (
        'touch "$0/$1"; '
        'printf "%s\\n" "$2" > "$0/.git/refs/heads/$1"; '
        'git worktree add -q --detach "$3" HEAD'
    )
    run = isopatch(
        "--no-sandbox", "--", "sh", "-c", script, str(repo), NAME, head, str(added),
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert_safe(run.stderr)
    assert QUOTED in run.err  # the checkout's file
    assert f'"refs/heads/{ESCAPED}' in run.err  # the ref
    assert quoted(str(added)) in run.err  # the worktree's folder


def test_a_kept_worktree_and_the_patch_are_quoted(env, tmp_path) -> None:
    """The user's top folder and $TMPDIR are names of the user's world, the
    worktree (named after the top) and the patch are in them: quoted too."""
    top = tmp_path / NAME
    top.mkdir()
    git("init", "-q", "-b", "main", cwd=top, env=env)
    (top / "README").write_text("hello\n")
    git("add", "-A", cwd=top, env=env)
    git("commit", "-q", "-m", "base", cwd=top, env=env)
    tmp = tmp_path / f"tmp{NAME}"
    tmp.mkdir()
    environ = {**env, "TMPDIR": str(tmp)}
    run = isopatch("--keep", "--", "sh", "-c", "echo more >> README", cwd=top, env=environ)
    assert run.returncode == 0, run.err
    assert_safe(run.stderr)
    kept = [line for line in run.err.splitlines() if "worktree kept at" in line]
    assert kept and ESCAPED[:-1] in kept[0], run.err


def test_terminal_safe_escapes_every_control_character() -> None:
    assert terminal_safe("a\rb\x1b[2Kc\x9bd\x07") == "a\\rb\\033[2Kc\\302\\233d\\a"
    assert terminal_safe("plain 'text'") == "plain 'text'"
    assert quoted("a b") == "'a b'"
    assert quoted(NAME) == QUOTED
    assert quoted(os.fsdecode(b"caf\xe9")) == '"caf\\351"'
    assert Path  # the module's helpers
