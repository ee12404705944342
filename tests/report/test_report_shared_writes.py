"""Report: writes to shared state (design: procedure step 7).  What the
command wrote to refs and configuration shared with the user's checkout is
reported, and nothing when it kept to its worktree.

A linked worktree also shares the repository's hooks, ``info/exclude``,
``info/attributes``, ``objects/info/alternates`` and ``shallow`` with the
user's checkout: a command that writes one of them (``pre-commit install``
writes ``hooks/pre-commit`` in the common git directory, pre-commit issue
#808) changes what git does there.  Each such write is a ``shared-write
<name> <change>`` record, after the refs and ``config``, in the order of
the names, and the ``warning:`` names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_helpers import git, isopatch


@pytest.fixture(autouse=True)
def unconfined(env) -> None:
    """These tests specify unconfined runs, which report what they wrote:
    ``isopatch.sandbox=false`` in the user's global configuration (the
    sandbox, the default since issue 19, discards such writes)."""
    git("config", "--global", "isopatch.sandbox", "false", cwd=Path(env["HOME"]), env=env)


#: What ``pre-commit install`` does in a linked worktree: a hook in
#: ``$(git rev-parse --git-common-dir)/hooks``.
PRE_COMMIT_INSTALL = (
    'hooks="$(git rev-parse --git-common-dir)/hooks" && mkdir -p "$hooks" && '
    'printf "#!/bin/sh\\nexit 0\\n" > "$hooks/pre-commit" && chmod +x "$hooks/pre-commit"'
)


def _tail(stdout: bytes) -> list[bytes]:
    return [line for line in stdout.split(b"\n") if line.startswith(b"shared-write ")]


def test_an_installed_hook_is_a_shared_write(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--", "sh", "-c", PRE_COMMIT_INSTALL, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _tail(run.stdout) == [b"shared-write hooks/pre-commit created"]
    assert "hooks/pre-commit (created)" in run.err
    assert (repo / ".git" / "hooks" / "pre-commit").is_file()


def test_a_changed_or_removed_hook_and_a_mode_change_are_shared_writes(env, make_repo) -> None:
    repo = make_repo()
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-push").write_text("#!/bin/sh\n")
    (hooks / "post-merge").write_text("#!/bin/sh\n")
    script = (
        'h="$(git rev-parse --git-common-dir)/hooks"; chmod +x "$h/pre-push"; rm "$h/post-merge"'
    )
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _tail(run.stdout) == [
        b"shared-write hooks/post-merge deleted",
        b"shared-write hooks/pre-push changed",
    ]


def test_info_files_alternates_and_shallow_are_shared_writes(env, make_repo, tmp_path) -> None:
    """A line in ``info/exclude`` hides the user's new files from ``git
    status``; ``info/attributes`` changes every checkout's conversions;
    ``objects/info/alternates`` and ``shallow`` change the object store."""
    repo = make_repo()
    other = tmp_path / "other.git"
    git("init", "-q", "--bare", other, cwd=tmp_path, env=env)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).strip()
    script = (
        'c="$(git rev-parse --git-common-dir)"; mkdir -p "$c/info" "$c/objects/info"; '
        'echo "*.log" >> "$c/info/exclude"; echo "* -text" > "$c/info/attributes"; '
        f'echo "{other}/objects" > "$c/objects/info/alternates"; '
        f'echo {head} > "$c/shallow"; git tag v1'
    )
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _tail(run.stdout) == [
        b"shared-write refs/tags/v1 created",
        b"shared-write info/attributes created",
        b"shared-write info/exclude changed",
        b"shared-write objects/info/alternates created",
        b"shared-write shallow created",
    ]
    fields = json.loads(
        isopatch(
            "--json", "--", "sh", "-c", 'rm "$(git rev-parse --git-common-dir)/shallow"',
            cwd=repo, env=env,
        ).stdout
    )  # fmt: skip
    assert fields["shared-write"] == ["shallow deleted"]


def test_a_command_that_touches_nothing_shared_has_no_record(env, make_repo) -> None:
    repo = make_repo()
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    script = 'cat "$(git rev-parse --git-common-dir)/hooks/pre-commit" > /dev/null; echo x > f'
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _tail(run.stdout) == []
    assert "warning" not in run.err


def test_writes_to_shared_refs_and_configuration_are_reported(env, make_repo) -> None:
    """A linked worktree shares refs, the stash and configuration with the
    user's repository: git-isopatch cannot prevent a command writing there,
    so it says so (found by a new user trying lint-staged-like commands)."""
    repo = make_repo()
    script = (
        "git tag v9; git branch feature; echo s > s.txt; git add s.txt; git stash -q; "
        "git config user.name Mallory"
    )
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    warning = next(line for line in run.err.splitlines() if line.startswith("warning: "))
    assert warning == (
        "warning: your repository changed while the command ran: refs/heads/feature (created), "
        "refs/stash (created), refs/tags/v9 (created), the configuration file"
    )
    assert "hint: a worktree shares refs" in run.err


def test_nothing_is_reported_when_the_command_keeps_to_its_worktree(env, make_repo) -> None:
    repo = make_repo()
    script = "echo x > new; git add new; git commit -qm 'in the worktree'"
    run = isopatch("--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0
    assert "warning" not in run.err
