"""Configuration read in process (design: Configuration, "any level, `git
-c`"): where libgit2 answers instead of `git config`, it answers what git
does, and where it cannot (GIT_CONFIG_GLOBAL, includeIf onbranch or
hasconfig, a malformed `git -c`), git is asked.  Each case compares
`read_entries` in a fresh process with `git config --list` under the same
environment, and the run honours the setting end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch

_DUMP = """\
import json, os, sys
from git_isopatch.git.config_read import read_entries
print(json.dumps(read_entries(sys.argv[1], os.environ)))
"""


def in_process(git_dir: Path, env: dict[str, str]) -> list[tuple[str, str | None]] | None:
    """``read_entries`` in a process started under ``env`` (libgit2 takes
    ``$HOME`` from the process when it starts)."""
    done = subprocess.run(
        [sys.executable, "-c", _DUMP, str(git_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    return None if found is None else [tuple(entry) for entry in found]


def by_git(git_dir: Path, env: dict[str, str]) -> list[tuple[str, str | None]]:
    """``git config -z --list`` for ``git_dir``: keys as git prints them,
    ``None`` for a key without ``=``."""
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "config", "-z", "--list"],
        env=env,
        capture_output=True,
        check=True,
    )
    entries = []
    for record in done.stdout.split(b"\0"):
        if record:
            key, newline, value = record.decode().partition("\n")
            entries.append((key, value if newline else None))
    return entries


def command_line_env(env: dict[str, str], *settings: str) -> dict[str, str]:
    """``env`` with ``GIT_CONFIG_PARAMETERS`` as ``git -c <setting>...``
    writes it for the commands it runs."""
    shown = subprocess.run(
        ["git", *(arg for s in settings for arg in ("-c", s)), "-c", "alias.env=!env -0", "env"],
        env=env,
        capture_output=True,
        check=True,
    )
    variables = dict(
        record.decode().split("=", 1) for record in shown.stdout.split(b"\0") if b"=" in record
    )
    return {**env, "GIT_CONFIG_PARAMETERS": variables["GIT_CONFIG_PARAMETERS"]}


@pytest.fixture
def layered(env, make_repo, tmp_path) -> Path:
    """A repository with isopatch keys at every level: global, XDG,
    repository, worktree (extensions.worktreeConfig), a plain include and an
    includeIf gitdir that matches."""
    repo = make_repo()
    home = Path(env["HOME"])
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "config").write_text("[isopatch]\n\tlink = xdg\n")
    (home / ".gitconfig").write_text('[isopatch]\n\tkeep\n\tlink = "a b"\n\tempty =\n')
    (tmp_path / "included").write_text("[isopatch]\n\tpool = 2\n")
    (tmp_path / "matched").write_text("[isopatch]\n\ttimeout = 9\n")
    git("config", "--add", "include.path", str(tmp_path / "included"), cwd=repo, env=env)
    git(
        "config", f"includeIf.gitdir:{tmp_path}/.path", str(tmp_path / "matched"), cwd=repo, env=env
    )
    git("config", "extensions.worktreeConfig", "true", cwd=repo, env=env)
    git("config", "--worktree", "isopatch.tmpdir", str(tmp_path), cwd=repo, env=env)
    git("config", "isopatch.Link", 'it\'s "quoted"\\ttab', cwd=repo, env=env)
    return repo


def test_every_level_reads_as_git_reads_it(env, layered) -> None:
    found = in_process(layered / ".git", env)
    assert found is not None, "libgit2 can read these: no need to ask git"
    assert found == by_git(layered / ".git", env)
    keys = [key for key, _ in found]
    assert {"isopatch.keep", "isopatch.pool", "isopatch.timeout", "isopatch.tmpdir"} <= set(keys)
    assert ("isopatch.keep", None) in found  # a key without `=`


def test_a_linked_worktree_reads_its_own_config(env, layered, tmp_path) -> None:
    git("worktree", "add", "--detach", str(tmp_path / "wt"), cwd=layered, env=env)
    admin = layered / ".git" / "worktrees" / "wt"
    git("config", "--worktree", "isopatch.maxWorktrees", "4", cwd=tmp_path / "wt", env=env)
    found = in_process(admin, env)
    assert found == by_git(admin, env)
    assert ("isopatch.maxworktrees", "4") in found


def test_git_dash_c_is_parsed_as_git_parses_it(env, layered) -> None:
    settings = (
        "isopatch.keep",  # no value: true
        "isopatch.keep=",  # empty: false
        'isopatch.link=it\'s a "b" !x= y',
        "isopatch.Sub.KEY=two\nlines",
        "isopatch.pool=1",
    )
    with_c = command_line_env(env, *settings)
    with_c.update(
        GIT_CONFIG_COUNT="2",
        GIT_CONFIG_KEY_0="isopatch.Copy",
        GIT_CONFIG_VALUE_0="'quoted'",
        GIT_CONFIG_KEY_1="isopatch.copy",
        GIT_CONFIG_VALUE_1="",
    )
    found = in_process(layered / ".git", with_c)
    assert found is not None
    assert found == by_git(layered / ".git", with_c)
    ours = [entry for entry in found if entry[0].startswith("isopatch.")]
    assert ours[-1] == ("isopatch.pool", "1")  # git -c comes last, after GIT_CONFIG_COUNT


def test_system_file_left_out_under_nosystem(env, layered) -> None:
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    found = in_process(layered / ".git", env)
    assert found is not None
    assert found == by_git(layered / ".git", env)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"GIT_CONFIG_GLOBAL": os.devnull}, id="GIT_CONFIG_GLOBAL"),
        pytest.param({"GIT_CONFIG_SYSTEM": os.devnull}, id="GIT_CONFIG_SYSTEM"),
        pytest.param({"GIT_CONFIG_PARAMETERS": "'isopatch.keep"}, id="unterminated -c"),
        pytest.param({"GIT_CONFIG_PARAMETERS": "'include.path'='/x'"}, id="-c include"),
        pytest.param({"GIT_CONFIG_COUNT": "x"}, id="bogus count"),
        pytest.param({"GIT_CONFIG_COUNT": "1"}, id="missing key"),
        pytest.param({"GIT_CONFIG_NOSYSTEM": "maybe"}, id="NOSYSTEM not a boolean"),
        pytest.param({"GIT_CONFIG_NOSYSTEM": "0"}, id="system file, git's prefix unknown"),
    ],
)
def test_git_is_asked_where_libgit2_reads_otherwise(env, layered, change) -> None:
    assert in_process(layered / ".git", {**env, **change}) is None


@pytest.mark.parametrize(
    "condition", ["onbranch:main", "hasconfig:remote.*.url:https://example.com/**"]
)
def test_git_is_asked_for_an_include_condition_libgit2_lacks(env, layered, condition) -> None:
    git("config", f"includeIf.{condition}.path", os.devnull, cwd=layered, env=env)
    assert in_process(layered / ".git", env) is None


def test_a_global_file_git_config_global_names_is_honoured(env, make_repo, tmp_path) -> None:
    """libgit2 ignores GIT_CONFIG_GLOBAL: the run asks git, and keeps."""
    repo = make_repo()
    chosen = tmp_path / "chosen.gitconfig"
    chosen.write_text("[isopatch]\n\tkeep = true\n")
    run = isopatch(
        "--porcelain", "--", "true", cwd=repo, env={**env, "GIT_CONFIG_GLOBAL": str(chosen)}
    )
    assert run.returncode == 0, run.err
    assert "worktree" in run.fields()
    plain = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert "worktree" not in plain.fields()


def test_an_onbranch_include_of_the_checkout_counts(env, make_repo, tmp_path) -> None:
    """The user's checkout is on its branch: git includes the file, so the
    run keeps (libgit2's answer is not taken for onbranch)."""
    repo = make_repo()
    branch = git("symbolic-ref", "--short", "HEAD", cwd=repo, env=env).decode().strip()
    (tmp_path / "onbranch").write_text("[isopatch]\n\tkeep = true\n")
    git(
        "config", f"includeIf.onbranch:{branch}.path", str(tmp_path / "onbranch"), cwd=repo, env=env
    )
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "worktree" in run.fields()


def test_an_environment_other_than_the_process_one_asks_git(env, layered, tmp_path) -> None:
    """The API takes an ``environ`` of its own; libgit2 took ``$HOME`` from
    the process, so another ``HOME`` or ``XDG_CONFIG_HOME`` is git's to read."""
    snippet = (
        "import os, sys\n"
        "from git_isopatch.git.config_read import read_entries\n"
        "for key in ('HOME', 'XDG_CONFIG_HOME'):\n"
        "    print(read_entries(sys.argv[1], {**os.environ, key: sys.argv[2]}) is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", snippet, str(layered / ".git"), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["True", "True"]
