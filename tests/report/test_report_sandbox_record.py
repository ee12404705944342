"""The ``sandbox true|false`` record (design: Porcelain v1, a key added for
the ``auto`` default of issue 19): under ``isopatch.sandbox=auto`` the
machine decides whether the command is confined, and a script or an agent
reads here what happened; the ``warning:`` of the fallback is on stderr
only.  Absent when the command did not run."""

from __future__ import annotations

import json
from pathlib import Path

from repo_helpers import isopatch


def test_the_default_says_it_ran_in_the_sandbox(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["sandbox"] == "true"
    lines = run.out.splitlines()
    assert lines.index("sandbox true") < min(
        i for i, line in enumerate(lines) if line.startswith(("files ", "duration "))
    )


def test_no_sandbox_says_so(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--json", "--no-sandbox", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert json.loads(run.out)["sandbox"] is False


def test_the_fallback_says_it_ran_unconfined(make_repo, no_bwrap, no_leftovers) -> None:  # noqa: F811
    repo = make_repo()
    run = isopatch("--json", "--", "/bin/sh", "-c", "exit 3", cwd=repo, env=no_bwrap)
    assert run.returncode == 3, run.err
    assert json.loads(run.out)["sandbox"] is False


def test_absent_when_nothing_ran(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--base", "no-such-rev", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert "sandbox" not in run.fields()
