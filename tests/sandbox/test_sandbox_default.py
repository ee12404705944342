"""``isopatch.sandbox=auto``, the default (issue 19, "Then make it the default";
design: "What it does", ``isopatch.sandbox``): ``auto`` confines where the
machine allows it and otherwise goes on unconfined with one ``warning:``
(``isopatch.sandbox=false`` silences it); ``--sandbox`` and
``isopatch.sandbox=true`` never run unconfined (``sandbox-unavailable``);
``--no-sandbox`` opts out for one run.  A command that fails in the
sandbox of ``auto`` after its network refused it gets a ``hint:`` naming
the network the sandbox took away and the way out; one that never tried
the network gets none.

A machine without the sandbox is made for real: a seccomp filter refuses
``unshare`` to git-isopatch and all it starts (``sandbox_helpers``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, Run, repo_state
from sandbox_helpers import CONNECT, NO_NAMESPACES, refuse_syscall

#: ``git -c isopatch.sandbox=...`` as git passes it on to git-isopatch.
AUTO = "'isopatch.sandbox'='auto'"
FALSE = "'isopatch.sandbox'='false'"
TRUE = "'isopatch.sandbox'='true'"


def _run(*args: str, cwd: Path, env: dict[str, str], config: str = AUTO, refuse=None) -> Run:
    """``git -c <config> isopatch <args>``; with ``refuse``, on a machine
    that refuses namespaces (a ``preexec_fn``)."""
    done = subprocess.run(
        [str(ISOPATCH), *args],
        cwd=cwd,
        env={**env, "GIT_CONFIG_PARAMETERS": config},
        capture_output=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=refuse,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _without_namespaces(*args: str, cwd: Path, env: dict[str, str], config: str = AUTO) -> Run:
    return _run(*args, cwd=cwd, env=env, config=config, refuse=refuse_syscall(*NO_NAMESPACES))


def _lines(run: Run, prefix: str) -> list[str]:
    return [line for line in run.err.splitlines() if line.startswith(prefix)]


def _write_outside(repo: Path) -> list[str]:
    return ["sh", "-c", f"echo x > '{repo}/outside'; echo edited >> README"]


def test_auto_confines_the_command(env, make_repo, no_leftovers) -> None:
    """The write to the checkout does not reach it; the edit in the
    worktree is the patch."""
    repo = make_repo()
    before = repo_state(repo, env)
    run = _run("--porcelain", "--", *_write_outside(repo), cwd=repo, env=env)
    assert run.fields()["files"] == "1", run.err
    assert not (repo / "outside").exists()
    assert repo_state(repo, env) == before
    assert _lines(run, "warning: no sandbox") == []


@pytest.mark.parametrize(
    "flags, config",
    [(("--no-sandbox",), AUTO), ((), FALSE), ((), "'isopatch.sandbox'='no'")],
    ids=["flag", "false", "no"],
)
def test_opting_out_runs_unconfined(env, make_repo, flags, config, no_leftovers) -> None:
    repo = make_repo()
    command = _write_outside(repo)
    run = _run("--porcelain", *flags, "--", *command, cwd=repo, env=env, config=config)
    assert run.returncode == 0, run.err
    assert (repo / "outside").read_text() == "x\n"
    assert run.fields()["checkout-change"] == "outside"


def test_the_flags_win_over_the_configuration(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = _run("-q", "--sandbox", "--", *_write_outside(repo), cwd=repo, env=env, config=FALSE)
    assert run.returncode != 128, run.err
    assert not (repo / "outside").exists()
    run = _run("-q", "--no-sandbox", "--", "true", cwd=repo, env=env, config=TRUE)
    assert run.returncode == 0 and run.err == "", run.err


@pytest.mark.parametrize("value", ["AUTO", "Auto", " auto"])
def test_auto_in_any_case(env, make_repo, value: str, no_leftovers) -> None:
    repo = make_repo()
    config = f"'isopatch.sandbox'='{value}'"
    run = _run("-q", "--", *_write_outside(repo), cwd=repo, env=env, config=config)
    assert run.returncode != 128, run.err
    assert not (repo / "outside").exists()


def test_a_bad_value_is_fatal_and_names_auto(env, make_repo) -> None:
    repo = make_repo()
    run = _run("--porcelain", "--", "true", cwd=repo, env=env, config="'isopatch.sandbox'='maybe'")
    assert run.returncode == 128
    assert run.err.splitlines()[0] == "fatal: bad config value for 'isopatch.sandbox'"
    assert "or 'auto'" in run.err
    assert run.fields()["error-code"] == "bad-config"


def test_without_namespaces_auto_runs_unconfined_with_one_warning(
    env, make_repo, no_leftovers
) -> None:
    repo = make_repo()
    run = _without_namespaces("--porcelain", "--", *_write_outside(repo), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (repo / "outside").exists(), "unconfined"
    assert run.fields()["checkout-change"] == "outside"
    warning = _lines(run, "warning: no sandbox")
    assert len(warning) == 1, run.err
    assert warning[0].startswith("warning: no sandbox here, the command runs unconfined: ")
    assert "isopatch.sandbox=false" in warning[0]
    clean = make_repo(name="clean")
    quiet = _without_namespaces("-q", "--", "true", cwd=clean, env=env)
    assert quiet.returncode == 0, quiet.err
    assert quiet.err.splitlines() == warning, "one warning, even with -q"


@pytest.mark.parametrize(
    "flags, config", [(("--no-sandbox",), AUTO), ((), FALSE)], ids=["flag", "configuration"]
)
def test_without_namespaces_opting_out_silences_the_warning(
    env, make_repo, flags, config, no_leftovers
) -> None:
    repo = make_repo()
    run = _without_namespaces("-q", *flags, "--", "true", cwd=repo, env=env, config=config)
    assert run.returncode == 0, run.err
    assert run.err == ""


@pytest.mark.parametrize(
    "flags, config", [(("--sandbox",), AUTO), ((), TRUE)], ids=["flag", "configuration"]
)
def test_without_namespaces_asking_for_the_sandbox_is_fatal(
    env, make_repo, tmp_path: Path, flags, config
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    marker = tmp_path / "ran"
    command = ("--porcelain", *flags, "--", "touch", str(marker))
    run = _without_namespaces(*command, cwd=repo, env=env, config=config)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: --sandbox is not available: "), run.err
    assert run.fields()["error-code"] == "sandbox-unavailable"
    assert not marker.exists()
    assert repo_state(repo, env) == before


SANDBOX_HINT = (
    "hint: the command failed after trying the network, which the sandbox keeps from it; "
    "--allow-network keeps the network, --no-sandbox runs it unconfined"
)


def test_a_command_failing_after_the_network_refused_it_gets_a_hint(env, make_repo) -> None:
    repo = make_repo()
    failing = ("--", sys.executable, "-c", CONNECT)
    for options in ((), ("--porcelain",)):
        run = _run(*options, *failing, cwd=repo, env=env)
        assert run.returncode == 1, run.err
        assert _lines(run, "hint:") == [SANDBOX_HINT], run.err
    network = _run("--allow-network", *failing, cwd=repo, env=env)
    assert network.returncode == 1, network.err
    assert _lines(network, "hint:") == [], network.err


def test_quiet_leaves_the_sandbox_hint_to_the_record(env, make_repo) -> None:
    """``-q``, as git's: the hint explains no failure of git-isopatch's,
    so only the porcelain record keeps it (the ``--porcelain`` stderr
    above keeps it too: ``-q`` was not given)."""
    repo = make_repo()
    quiet = _run("-q", "--", sys.executable, "-c", CONNECT, cwd=repo, env=env)
    assert quiet.returncode == 1
    assert _lines(quiet, "hint:") == [], quiet.err
    record = _run("-q", "--porcelain", "--", sys.executable, "-c", CONNECT, cwd=repo, env=env)
    assert _lines(record, "hint:") == [], record.err
    assert f"hint {SANDBOX_HINT.removeprefix('hint: ')}" in record.out.splitlines()


@pytest.mark.parametrize(
    "options, command",
    [
        ((), ("true",)),
        ((), ("sh", "-c", "exit 3")),
        ((), ("sh", "-c", "echo x > /etc/passwd")),
        (("--sandbox",), ("sh", "-c", "exit 3")),
        (("--no-sandbox",), ("sh", "-c", "exit 3")),
        (("--timeout", "0.5"), ("sleep", "30")),
        ((), ("no-such-program",)),
        ((), ("sh", "-c", "no-such-program")),
    ],
    ids=[
        "success",
        "offline",
        "read-only",
        "asked-for",
        "unconfined",
        "timed-out",
        "absent",
        "127",
    ],
)
def test_no_sandbox_hint_otherwise(env, make_repo, options, command) -> None:
    """Success; a failure that never tried the network (a linter's exit 1
    says "issues found"; a write the read-only system refuses says so
    itself); a sandbox the user asked for; no sandbox; a timeout and a
    program that is not there, which the sandbox does not explain."""
    repo = make_repo()
    run = _run(*options, "--", *command, cwd=repo, env=env)
    assert run.returncode != 0 or command == ("true",), run.err
    assert "in the sandbox" not in run.err, run.err


def test_without_namespaces_no_sandbox_hint(env, make_repo) -> None:
    repo = make_repo()
    run = _without_namespaces("--", "sh", "-c", "exit 3", cwd=repo, env=env)
    assert run.returncode == 3, run.err
    assert "in the sandbox" not in run.err, run.err


def test_the_api_takes_auto(env, make_repo) -> None:
    """``capture(..., sandbox="auto")``, as the configuration gives it."""
    from git_isopatch import capture

    repo = make_repo()
    result = capture(
        ["sh", "-c", f"echo x > '{repo}/outside'"], repo_path=str(repo), sandbox="auto"
    )
    assert result.error is None and not (repo / "outside").exists()


def test_auto_is_the_default(env, make_repo, no_leftovers) -> None:
    """No flag, no configuration: confined; a failure after the network
    refused the command gets the hint."""
    repo = make_repo()
    before = repo_state(repo, env)
    run = _run("--porcelain", "--", *_write_outside(repo), cwd=repo, env=env, config="")
    assert run.fields()["files"] == "1", run.err
    assert not (repo / "outside").exists()
    assert repo_state(repo, env) == before
    failed = _run("--", sys.executable, "-c", CONNECT, cwd=repo, env=env, config="")
    assert _lines(failed, "hint:") == [SANDBOX_HINT], failed.err


def test_without_namespaces_the_default_runs_unconfined_with_one_warning(
    env, make_repo, no_leftovers
) -> None:
    repo = make_repo()
    run = _without_namespaces("-q", "--", "true", cwd=repo, env=env, config="")
    assert run.returncode == 0, run.err
    assert len(run.err.splitlines()) == 1, run.err
    assert run.err.startswith("warning: no sandbox here, the command runs unconfined: ")
