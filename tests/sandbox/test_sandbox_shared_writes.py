"""What a sandboxed command wrote to the state its worktree shares with the
user's repository (hooks, ``info/exclude``, configuration, registered
worktrees) is read from its copy-on-write layer and reported as
discarded (design: procedure step 7).  The git directory is copy-on-write
whatever the run allows, so a file the layer does not hold is as it was
before the command: it is not read again, and what the user changes
there meanwhile is never taken for the command's write.

Real bubblewrap, real git.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH
from sandbox_helpers import run_as_nobody


def _records(output: bytes) -> list[str]:
    return [line for line in output.decode().splitlines() if line.startswith("shared-write ")]


def _sandboxed_records(repo: Path, env: dict[str, str], script: str) -> list[str]:
    """The shared-write records of a sandboxed run of ``sh -c script``, which succeeds."""
    run = subprocess.run(
        [ISOPATCH, "--porcelain", "--sandbox", "--", "sh", "-c", script],
        cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return _records(run.stdout)


def test_what_the_user_changes_meanwhile_is_not_the_commands(
    env, make_repo, tmp_path: Path
) -> None:
    """The user edits a hook and ``info/exclude`` while the sandboxed
    command runs: the run reports no shared write."""
    repo = make_repo()
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    sync = tmp_path / "sync"  # really writable in the sandbox
    sync.mkdir()
    script = ': > "$SYNC/started"; while [ ! -e "$SYNC/go" ]; do sleep 0.01; done; echo x > f'
    process = subprocess.Popen(
        [ISOPATCH, "--porcelain", "--sandbox", "--allow-write", sync, "--", "sh", "-c", script],
        cwd=repo, env={**env, "SYNC": str(sync)}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until(lambda: (sync / "started").exists() or process.poll() is not None)
        (hooks / "pre-commit").write_text("#!/bin/sh\necho the user's own\n")
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "exclude").write_text("*.log\n")
        (sync / "go").touch()
        stdout, stderr = process.communicate(timeout=120)
    finally:
        (sync / "go").touch()
        process.wait()
    assert process.returncode == 0, stderr
    assert b"\nfiles 1\n" in stdout, stdout
    assert _records(stdout) == []


def test_what_the_command_writes_in_its_view_is_reported_discarded(env, make_repo) -> None:
    """A hook made, one removed, ``info/exclude`` and the configuration
    changed, a worktree registered, in the command's view: each reported,
    discarded, and none of it reaches the repository."""
    repo = make_repo()
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-merge").write_text("#!/bin/sh\n")
    script = (
        'c="$(git rev-parse --git-common-dir)"; echo hook > "$c/hooks/pre-commit"; '
        'rm "$c/hooks/post-merge"; mkdir -p "$c/info"; echo "*.x" >> "$c/info/exclude"; '
        "git config --local user.name planted; git worktree add -q --detach ../agent"
    )
    records = _sandboxed_records(repo, env, script)
    assert "shared-write config changed discarded" in records
    assert "shared-write hooks/pre-commit created discarded" in records
    assert "shared-write hooks/post-merge deleted discarded" in records
    assert "shared-write info/exclude changed discarded" in records
    registered = [r for r in records if r.startswith("shared-write worktrees/")]
    assert [r.rsplit(" ", 2)[1:] for r in registered] == [["created", "discarded"]], records
    assert not (hooks / "pre-commit").exists()
    assert (hooks / "post-merge").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("anew", [True, False], ids=["made-anew", "removed-whole"])
def test_what_a_folder_removed_whole_held_is_reported_deleted(env, make_repo, anew: bool) -> None:
    """The command removes the hooks folder and the ``info`` folder whole,
    or makes them anew, empty (the layer holds a whiteout for the folder,
    or an opaque folder, with no whiteout for what they held): the hook and
    ``info/exclude`` it removed are reported deleted, as ``rm`` of each
    would be; the repository keeps them."""
    repo = make_repo()
    hooks, info = repo / ".git" / "hooks", repo / ".git" / "info"
    hooks.mkdir(exist_ok=True)
    info.mkdir(exist_ok=True)
    (hooks / "post-merge").write_text("#!/bin/sh\n")
    (info / "exclude").write_text("*.x\n")
    script = (
        'c="$(git rev-parse --git-common-dir)"; rm -rf "$c/hooks" "$c/info";'
        f' {"mkdir" if anew else "true"} "$c/hooks" "$c/info"; echo n > new.txt'
    )
    records = _sandboxed_records(repo, env, script)
    assert "shared-write hooks/post-merge deleted discarded" in records, records
    assert "shared-write info/exclude deleted discarded" in records, records
    assert (hooks / "post-merge").exists() and (info / "exclude").read_text() == "*.x\n"


#: As uid 65534: a hook of the repository, the hooks folder made anew by
#: the command; prints the run's exit, stderr and shared-write records.
HOOKS_ANEW_AS_NOBODY = """
hooks = os.path.join(repo, ".git", "hooks")
os.makedirs(hooks, exist_ok=True)
with open(os.path.join(hooks, "post-merge"), "w") as handle:
    handle.write("#!/bin/sh\\n")
script = 'c="$(git rev-parse --git-common-dir)"; rm -rf "$c/hooks"; mkdir "$c/hooks"; echo n > n'
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--", "sh", "-c", script],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
records = [ln for ln in done.stdout.decode().splitlines() if ln.startswith("shared-write ")]
print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "records": records,
                  "kept": os.path.exists(os.path.join(hooks, "post-merge"))}))
"""


@pytest.mark.hostile
def test_a_hooks_folder_made_anew_is_reported_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, HOOKS_ANEW_AS_NOBODY) as seen:
        assert seen["code"] == 0, seen["err"]
        assert "shared-write hooks/post-merge deleted discarded" in seen["records"], seen
        assert seen["kept"], seen
