"""A sandboxed command cannot reach git-isopatch's own git calls after the
run through the worktree's ``config.worktree`` (issue 19, "git-isopatch's
own steps cannot be redirected").

With ``extensions.worktreeConfig`` (``git sparse-checkout`` sets it) git
reads ``worktrees/<id>/config.worktree``, a file of the worktree's private
folder, which the command may write even in the sandbox.  A filter named
there would be run by the extraction's ``git diff`` outside the
namespaces: it changed the mode of the user's tracked file and left a
process running after the run.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state

#: The leftover's argv, looked for in /proc after the run.
MARKER = "31.4159265"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv:
                found.append(int(entry))
    return found


@pytest.mark.hostile
def test_a_filter_the_command_names_in_config_worktree_does_not_run(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({"README": "hello\n"})
    git("config", "extensions.worktreeConfig", "true", cwd=repo, env=env)
    os.chmod(repo / "README", 0o644)
    before = repo_state(repo, env)
    mode = os.stat(repo / "README").st_mode
    script = tmp_path / "evil.sh"
    clean = (
        f"sh -c 'chmod 600 {repo}/README; touch {repo}/filter-ran 2>/dev/null; "
        f"(setsid sleep {MARKER} </dev/null >/dev/null 2>&1 &); cat'"
    )
    script.write_text(
        textwrap.dedent(
            f"""\
            git config --worktree filter.evil.clean "{clean}"
            echo '* filter=evil' > .gitattributes
            echo changed >> README
            """
        )
    )
    try:
        run = isopatch("--sandbox", "--porcelain", "--", "sh", script, cwd=repo, env=env)
        left = _processes_with(MARKER)
    finally:
        for pid in _processes_with(MARKER):
            os.kill(pid, signal.SIGKILL)
    assert run.returncode == 0, run.err
    assert left == [], "a process the command's filter started outlived the run"
    assert os.stat(repo / "README").st_mode == mode
    assert not (repo / "filter-ran").exists()
    assert repo_state(repo, env) == before
    assert "config.worktree" in run.err
    patch = Path(run.fields()["patch"])
    clean_copy = apply_to_clean_checkout(repo, "HEAD", patch, tmp_path / "check", env)
    assert (clean_copy / "README").read_text() == "hello\nchanged\n"
    assert (clean_copy / ".gitattributes").read_text() == "* filter=evil\n"


@pytest.mark.hostile
def test_excludes_the_command_names_in_config_worktree_hide_nothing(env, make_repo) -> None:
    """``config.worktree`` is put back before git-isopatch's own git reads
    it: an excludes file and an ``autocrlf`` the command set there shape
    nothing of the patch."""
    repo = make_repo({"README": "hello\n"})
    git("config", "extensions.worktreeConfig", "true", cwd=repo, env=env)
    script = (
        'echo "*" > "$TMPDIR/all" && git config --worktree core.excludesFile "$TMPDIR/all"'
        " && git config --worktree core.autocrlf true"
        " && echo n > new.txt && printf 'b\\r\\n' >> README"
    )
    run = isopatch("--sandbox", "--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"+++ b/new.txt" in patch, patch
    assert b"\n+b\r\n" in patch, patch


@pytest.mark.hostile
def test_a_sparse_checkout_the_command_sets_up_hides_nothing(env, make_repo) -> None:
    """``core.sparseCheckout`` and the worktree's ``info/sparse-checkout``
    written by the command: a new file outside the patterns, and an edit
    of a tracked one, are still in the patch."""
    repo = make_repo({"README": "hello\n", "b.txt": "b\n"})
    script = (
        "git config core.sparseCheckout true"
        ' && mkdir -p "$(git rev-parse --git-dir)/info"'
        ' && echo /README > "$(git rev-parse --git-dir)/info/sparse-checkout"'
        " && echo n > new.txt && echo more >> b.txt"
    )
    run = isopatch("--sandbox", "--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"+++ b/new.txt" in patch and b"+more" in patch, patch
