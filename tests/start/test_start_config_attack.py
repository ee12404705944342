"""Configuration read in process against odd configurations (design:
Configuration, "any level, `git -c`"): wherever libgit2 would read
otherwise than git, git is asked, so git-isopatch follows git.  Found by
attacking ``git/config_read.py``: an ``includeIf "gitdir:~/..."`` under a
``$HOME`` that is a symbolic link (git resolves the pattern's links,
libgit2 does not, and git-isopatch ignored the included settings), include
paths git refuses (none, empty, a folder) that libgit2 read on, and a
``GIT_CONFIG_COUNT`` of non-ASCII digits (a traceback).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch
from test_start_config_in_process import by_git, in_process


def _git_or_refusal(git_dir: Path, env) -> list | None:
    try:
        return by_git(git_dir, env)
    except Exception:  # git refuses the configuration: so must the reading
        return None


CASES = {
    "missing include": "[include]\n\tpath = nothere\n[isopatch]\n\tkeep = true\n",
    "relative include": "[include]\n\tpath = ../included\n",
    "include of a folder": "[include]\n\tpath = /\n[isopatch]\n\tkeep = true\n",
    "include without a value": "[include]\n\tpath\n[isopatch]\n\tkeep = 1\n",
    "include of an empty path": "[include]\n\tpath =\n[isopatch]\n\tkeep = 1\n",
    "includeIf relative pattern": '[includeIf "gitdir:repo/"]\n\tpath = ../included\n',
    "includeIf ./ pattern": '[includeIf "gitdir:./"]\n\tpath = ../included\n',
    "includeIf condition in upper case": '[includeIf "Gitdir:/"]\n\tpath = ../included\n',
    "includeIf section in mixed case": '[IncludeIf "gitdir:/"]\n\tpath = ../included\n',
    "key and section case": "[IsoPatch]\n\tKeep = true\n",
    "deprecated subsection": "[isopatch.Sub]\n\tkeep = true\n",
    "crlf": "[isopatch]\r\n\tlink = a\r\n",
    "quoting": '[isopatch]\n\tlink = "a;b" ; c\n\tcopy = x\\\n y\n\ttmpdir = "\\t\\n\\\\"\n',
}


@pytest.mark.hostile
@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_an_odd_configuration_reads_as_git_reads_it(env, make_repo, text: str) -> None:
    repo = make_repo()
    (repo / ".git" / "included").write_text("[isopatch]\n\tlink = included\n")
    with open(repo / ".git" / "config", "a") as handle:
        handle.write(text)
    found = in_process(repo / ".git", env)
    assert found is None or found == _git_or_refusal(repo / ".git", env)


def _home_through_a_link(env, tmp_path: Path) -> tuple[dict[str, str], Path]:
    """``$HOME`` a symbolic link to the real home, a repository in it, and
    a global ``includeIf "gitdir:~/src/"`` with a bad isopatch value."""
    link = tmp_path / "home-link"
    os.symlink(env["HOME"], link)
    linked = {**env, "HOME": str(link)}
    repo = link / "src" / "repo"
    repo.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo, env=linked)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo, env=linked)
    (link / ".gitconfig").write_text('[includeIf "gitdir:~/src/"]\n\tpath = ~/included\n')
    (link / "included").write_text("[isopatch]\n\ttimeout = bogus\n")
    return linked, repo


@pytest.mark.hostile
def test_an_include_through_a_linked_home_is_read_as_git_reads_it(env, tmp_path: Path) -> None:
    linked, repo = _home_through_a_link(env, tmp_path)
    assert git("config", "--get", "isopatch.timeout", cwd=repo, env=linked) == b"bogus\n"
    found = in_process(repo.resolve() / ".git", linked)
    assert found is None or found == by_git(repo.resolve() / ".git", linked)
    run = isopatch("--", "true", cwd=repo, env=linked)
    assert run.returncode == 128, run.err
    assert "fatal: bad config value for 'isopatch.timeout'" in run.err


@pytest.mark.hostile
@pytest.mark.parametrize("count", ["\u00b2", "\u0661", "1\u00b9"])
def test_a_config_count_of_other_digits_is_refused_as_git_refuses_it(
    env, make_repo, count: str
) -> None:
    repo = make_repo()
    odd = {**env, "GIT_CONFIG_COUNT": count, "GIT_CONFIG_KEY_0": "isopatch.keep"}
    odd["GIT_CONFIG_VALUE_0"] = "true"
    run = isopatch("--", "true", cwd=repo, env=odd)
    assert run.returncode == 128, run.err
    assert "Traceback" not in run.err
    assert run.err.startswith("fatal: "), run.err
    assert len(run.err.strip().splitlines()) == 1, run.err
