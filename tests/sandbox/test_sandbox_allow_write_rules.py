"""``--allow-write`` and ``isopatch.allowWrite`` (design: Command line,
Configuration; issue 19): an empty value is fatal for the flag and the key
alike (``--allow-write "$UNSET"`` made the whole checkout and ``.git``
writable), a configured path that does not exist is skipped with one
``warning:`` naming it (so that a policy can live in the global
configuration), and a ``--allow-write`` naming nothing stays fatal.  The
README and the manual say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import isopatch, repo_state

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.hostile


def _refused(run, repo: Path, env, before, first: str) -> None:
    assert run.returncode == 128, run.err
    assert run.err.splitlines()[0] == first, run.err
    assert "Traceback" not in run.err
    assert repo_state(repo, env) == before
    assert not list(repo.parent.glob("repo.isopatch-*")), "no worktree was made"


@pytest.mark.parametrize(
    "sandbox", [("--sandbox",), ("--no-sandbox",), ()], ids=["sandbox", "no-sandbox", "default"]
)
def test_an_empty_allow_write_flag_is_fatal(env, make_repo, tmp_path: Path, sandbox) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    marker = tmp_path / "ran"
    run = isopatch(*sandbox, "--allow-write", "", "--", "touch", marker, cwd=repo, env=env)
    _refused(run, repo, env, before, "fatal: --allow-write needs a path, not an empty value")
    assert not marker.exists(), "the command did not run"


def test_an_empty_allow_write_flag_in_porcelain(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--allow-write=", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert "error-code empty-path" in run.out.splitlines()


@pytest.mark.parametrize(
    "values", [("",), ("{other}", ""), ("", "{other}")], ids=["empty", "after", "before"]
)
def test_an_empty_configured_value_is_fatal(env, make_repo, tmp_path: Path, values) -> None:
    """Not a reset of the list, as an empty ``isopatch.link`` is: a
    variable that expands to nothing in a configuration script must not
    loosen the sandbox, nor silently drop the paths before it."""
    repo = make_repo()
    other = tmp_path / "other"
    other.mkdir()
    before = repo_state(repo, env)
    options = [w for v in values for w in ("-c", f"isopatch.allowWrite={v.format(other=other)}")]
    run = isopatch("--sandbox", "--", "true", cwd=repo, env=env, git_options=tuple(options))
    _refused(run, repo, env, before, "fatal: bad config value for 'isopatch.allowWrite'")


def test_a_configured_path_that_does_not_exist_is_skipped(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    missing = tmp_path / "no-such-cache"
    there = tmp_path / "cache"
    there.mkdir()
    options = ("-c", f"isopatch.allowWrite={missing}", "-c", f"isopatch.allowWrite={there}")
    run = isopatch(
        "--sandbox", "--", "sh", "-c", f"echo hi > '{there}/file'",
        cwd=repo, env=env, git_options=options,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    warnings = [line for line in run.err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: isopatch.allowWrite: '{missing}' does not exist; skipped"]
    assert (there / "file").read_text() == "hi\n", "the path that exists is writable"
    unconfined = isopatch("--no-sandbox", "--", "true", cwd=repo, env=env, git_options=options)
    assert unconfined.returncode == 0, unconfined.err
    assert "does not exist" not in unconfined.err, "no sandbox asked: nothing to say"


def test_a_flag_naming_a_path_that_does_not_exist_stays_fatal(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    missing = tmp_path / "no-such-cache"
    run = isopatch(
        "--sandbox", "--allow-write", missing, "--", "true",
        cwd=repo, env=env, git_options=("-c", f"isopatch.allowWrite={tmp_path}"),
    )  # fmt: skip
    _refused(
        run,
        repo,
        env,
        before,
        f"fatal: cannot allow writes to '{missing}': No such file or directory",
    )


def test_the_manual_says_the_rules() -> None:
    manual = " ".join((ROOT / "man" / "git-isopatch.rst").read_text().split())
    assert "An empty value is a bad value (fatal, exit 128), as for **--allow-write**" in manual
    assert "An empty *<path>* (an unset variable) is fatal, exit 128." in manual
    assert "a path that does not exist is skipped with a **warning:** naming it" in manual
    assert "An empty value clears" not in manual.split("**isopatch.allowWrite**")[1][:400]
