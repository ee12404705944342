"""Start-up: the patch application module (``git_isopatch.git.apply``,
``--apply`` and the diffstat's colour) is loaded only by the runs that use
it; a quiet capture that applies nothing leaves it unloaded (issue 23: the
warm path imports only what it uses).  No time is asserted."""

from __future__ import annotations

from startup_helpers import imported

APPLY = "git_isopatch.git.apply"


def test_a_quiet_capture_does_not_load_the_apply_module(env, make_repo) -> None:
    repo = make_repo()
    assert APPLY not in imported(["-q", "--", "true"], repo, env)
    assert APPLY not in imported(["-q", "--", "true"], repo, env, config="'isopatch.pool=1'")


def test_apply_and_the_summary_load_it(env, make_repo) -> None:
    """The check above can fail: the same probe sees the module when the
    run applies the patch or shows its diffstat."""
    repo = make_repo()
    edit = ["sh", "-c", "echo x >> README"]
    assert APPLY in imported(["-q", "--apply", "--", *edit], repo, env)
    assert APPLY in imported(["--", *edit], repo, env)
