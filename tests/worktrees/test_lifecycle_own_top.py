"""git inside a run's worktree takes it as its top (design: procedure step
3), and git is asked so only where the repository's configuration may say
otherwise (:func:`git_isopatch.git.config_read.linked_top_may_move`): on
odd repositories, whenever it is not asked, git's answer is the worktree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, started_gits

#: Settings of the repository's own ``config`` (``git config -f``), whether
#: git may take another folder as a linked worktree's top with them, and
#: what is left in the worktree's ``config.worktree`` (None: no file).
ODD_CONFIGS = {
    "plain": ((), False, None),
    "core.worktree": ((("core.worktree", "ELSE"),), False, None),
    "core.bare": ((("core.bare", "true"),), False, None),
    "worktreeConfig": ((("extensions.worktreeConfig", "true"),), False, None),
    "worktreeConfig off": (
        (("extensions.worktreeConfig", "off"), ("core.worktree", "ELSE")),
        False,
        None,
    ),
    "worktreeConfig, core.worktree": (
        (("extensions.worktreeConfig", "true"), ("core.worktree", "ELSE")),
        True,
        None,
    ),
    "worktreeConfig, core.bare": (
        (("extensions.worktreeConfig", "1"), ("core.bare", "true")),
        True,
        None,
    ),
    "worktreeConfig, config.worktree": (
        (("extensions.worktreeConfig", "yes"),),
        True,
        "[core]\n\tworktree = ELSE\n",
    ),
    "worktreeConfig not a boolean": ((("extensions.worktreeConfig", "maybe"),), True, None),
    "worktreeConfig in an include": (
        (("include.path", "INCLUDED"), ("core.worktree", "ELSE")),
        True,
        None,
    ),
}


def _settled(value: str, tmp_path: Path) -> str:
    return value.replace("ELSE", str(tmp_path / "else")).replace(
        "INCLUDED", str(tmp_path / "included")
    )


@pytest.mark.parametrize("case", sorted(ODD_CONFIGS))
@pytest.mark.parametrize("command_line", [False, True], ids=["", "git -c"])
def test_git_is_not_asked_only_where_it_takes_the_worktree(
    env, make_repo, tmp_path: Path, case: str, command_line: bool
) -> None:
    from git_isopatch.git.config_read import linked_top_may_move

    settings, may_move, config_worktree = ODD_CONFIGS[case]
    repo = make_repo()
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", "--detach", worktree, cwd=repo, env=env)
    (tmp_path / "else").mkdir()
    (tmp_path / "included").write_text("[extensions]\n\tworktreeConfig = true\n")
    admin = repo / ".git" / "worktrees" / "wt"
    for key, value in settings:
        git(
            "config",
            "-f",
            repo / ".git" / "config",
            key,
            _settled(value, tmp_path),
            cwd=repo,
            env=env,
        )
    if config_worktree is not None:
        (admin / "config.worktree").write_text(_settled(config_worktree, tmp_path))
    if command_line:  # what git's setup never reads for a linked worktree
        env = {
            **env,
            "GIT_CONFIG_PARAMETERS": f"'core.worktree'='{tmp_path / 'else'}' 'core.bare'='true'"
            " 'extensions.worktreeConfig'='true'",
        }
    asked = linked_top_may_move(str(repo / ".git"), str(admin))
    assert asked is may_move
    if not asked:
        top = git("rev-parse", "--show-toplevel", cwd=worktree, env=env).decode()
        assert top == f"{os.path.realpath(worktree)}\n"


@pytest.mark.parametrize("shared", [False, True], ids=["plain", "worktreeConfig, core.worktree"])
def test_a_sandboxed_run_asks_git_for_its_top_only_where_it_may_move(
    env, make_repo, tmp_path: Path, shared: bool
) -> None:
    """Over a base tree, from a subfolder: git inside takes the run's
    worktree as its top; ``git rev-parse --show-toplevel`` runs before the
    command only when the repository's ``config`` could make it otherwise."""
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n"})
    if shared:
        git("config", "extensions.worktreeConfig", "true", cwd=repo, env=env)
        git("config", "core.worktree", str(repo), cwd=repo, env=env)
    trace = tmp_path / "trace2"
    script = "echo x >> a.c; pwd -P; git rev-parse --show-prefix --show-toplevel"
    for _ in range(2):  # the base tree made, then a run over it
        trace.unlink(missing_ok=True)
        run = isopatch(
            "--porcelain",
            "--",
            "sh",
            "-c",
            script,
            cwd=repo / "src",
            env={**env, "GIT_TRACE2_EVENT": str(trace)},
        )
        assert run.returncode == 0, run.err
    assert run.fields()["sandbox"] == "true"
    asked = ["rev-parse", "--show-toplevel"] in started_gits(trace)
    assert asked is shared
    here, prefix, top = Path(run.fields()["stdout"]).read_text().splitlines()
    assert (prefix, Path(here)) == ("src/", Path(top) / "src")
    assert Path(top).name == "repo" and Path(top).parent.name.startswith("repo.isopatch-")
    assert b"+x" in Path(run.fields()["patch"]).read_bytes()
