"""A session keeps the confinement of its first step: a later step that
asks for none runs with it (over ``isopatch.sandbox``), one that asks for
the other is refused before anything changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state

FIRST_AND_OTHER = [
    pytest.param("--sandbox", "--no-sandbox", "false", id="sandboxed"),
    pytest.param("--no-sandbox", "--sandbox", "true", id="unconfined"),
]


def _step(repo: Path, env: dict[str, str], *command: str, options: tuple = ()) -> dict:
    done = isopatch("--session", "s", "--json", *options, "--", *command, cwd=repo, env=env)
    assert done.returncode == 0, done.err
    return json.loads(done.out)


@pytest.mark.parametrize(("first", "other", "configured"), FIRST_AND_OTHER)
def test_a_later_step_without_an_option_runs_as_the_first_did(
    make_repo, env, first, other, configured
) -> None:
    """The configuration asks for the other confinement: the session's
    own wins, as a flag would."""
    repo = make_repo({"a.txt": "one\n"})
    made = _step(repo, env, "sh", "-c", "echo two >> a.txt", options=(first,))
    assert made["sandbox"] is (first == "--sandbox")
    git("config", "isopatch.sandbox", configured, cwd=repo, env=env)
    later = _step(repo, env, "sh", "-c", "echo three >> a.txt")
    assert later["sandbox"] is made["sandbox"]
    again = _step(repo, env, "true", options=(first,))
    assert again["sandbox"] is made["sandbox"]
    assert "+three" in Path(again["session-patch"]).read_text()
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.hostile
@pytest.mark.parametrize(("first", "other", "configured"), FIRST_AND_OTHER)
def test_a_later_step_asking_for_the_other_confinement_is_refused(
    make_repo, env, first, other, configured
) -> None:
    repo = make_repo({"a.txt": "one\n"})
    made = _step(repo, env, "sh", "-c", "echo two >> a.txt", options=(first,))
    before = repo_state(repo, env)
    refused = isopatch(
        "--session", "s", "--porcelain", other, "--", "sh", "-c", "echo lost >> a.txt",
        cwd=repo, env=env,
    )  # fmt: skip
    assert refused.returncode == 128
    runs = "sandboxed" if first == "--sandbox" else "unconfined"
    fatal = [line for line in refused.err.splitlines() if line.startswith("fatal:")]
    assert fatal == [f"fatal: session 's' runs {runs}: '{other}' contradicts it"], refused.err
    assert refused.fields()["error-code"] == "session-confinement-differs"
    assert repo_state(repo, env) == before
    after = _step(repo, env, "true")
    assert after["sandbox"] is made["sandbox"]
    assert Path(after["session-patch"]).read_text() == Path(made["session-patch"]).read_text()
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
