"""Bash completion of `git isopatch` through git's own completion script
(issue 3): git-completion.bash calls _git_isopatch, which completes options,
--base revisions and, after `--` or the first non-option, command names."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from packages import GIT_COMPLETION
from repo_helpers import git, isopatch

from git_isopatch import cli

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "completion" / "git-isopatch.bash"
#: git's completion script, shipped by Debian's git package (and by git's
#: contrib/completion/git-completion.bash elsewhere)
GITS = GIT_COMPLETION

#: every test here sources git's completion script
pytestmark = pytest.mark.needs("git")

COMPLETE = r"""
complete_line () {
	COMP_LINE=$1
	COMP_POINT=${#COMP_LINE}
	read -ra COMP_WORDS <<<"$COMP_LINE"
	if [[ $COMP_LINE == *" " ]]; then COMP_WORDS+=(""); fi
	COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
	COMPREPLY=()
	__git_wrap__git_main
	printf '%s\n' "${COMPREPLY[@]}"
}
"""


def complete(line: str, cwd: Path, env: dict[str, str], setup: str | None = None) -> list[str]:
    """COMPREPLY for ``line`` (the cursor at its end), as bash fills it."""
    if setup is None:
        setup = f". {shlex.quote(str(GITS))}\n. {shlex.quote(str(OURS))}\n"
    script = setup + COMPLETE + f"complete_line {shlex.quote(line)}\n"
    done = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return [word for word in done.stdout.split("\n") if word]


@pytest.fixture
def repo(make_repo) -> Path:
    return make_repo()


def test_completes_porcelain(repo, env) -> None:
    assert complete("git isopatch --po", repo, env) == ["--porcelain "]


def test_offers_every_option(repo, env) -> None:
    offered = complete("git isopatch --", repo, env)
    offered += complete("git isopatch --no-", repo, env)
    offered += complete("git isopatch -", repo, env)
    import typer.main

    for param in typer.main.get_command(cli.app).params:
        if param.param_type_name != "option" or param.opts == ["-h"]:
            continue
        names = [*param.opts, *param.secondary_opts]
        longs = [n for n in names if n.startswith("--")] or names
        for name in longs:
            assert f"{name} " in offered or f"{name}=" in offered, name
    for word in offered:  # and nothing that is not an option
        name = word.strip().rstrip("=")
        assert name == "--no-..." or any(
            name in (*p.opts, *p.secondary_opts) for p in typer.main.get_command(cli.app).params
        ), word


def test_negation_and_values(repo, env) -> None:
    git("branch", "feature", cwd=repo, env=env)
    assert complete("git isopatch --no-k", repo, env) == ["--no-keep "]
    assert complete("git isopatch --base fea", repo, env) == ["feature "]
    assert complete("git isopatch --base=fea", repo, env) == ["feature "]
    assert sorted(complete("git isopatch --porcelain --base ", repo, env)) == [
        "HEAD ",
        "feature ",
        "main ",
    ]


def test_session_names_after_session(repo, env) -> None:
    """``--session``: the repository's sessions (``--end`` one, or a step
    of one); none offered where there are none."""
    assert complete("git isopatch --session ", repo, env) == []
    for name in ("lint", "fix"):
        made = isopatch("--session", name, "--", "true", cwd=repo, env=env)
        assert made.returncode == 0, made.err
    assert sorted(complete("git isopatch --session ", repo, env)) == ["fix ", "lint "]
    assert complete("git isopatch --session l", repo, env) == ["lint "]
    assert complete("git isopatch --session=f", repo, env) == ["fix "]


def test_paths_after_the_options_that_take_one(repo, env) -> None:
    """``--link``, ``--copy``, ``-o``, ``--allow-write``: files and folders
    (ignored ones too: what ``--link`` is for); ``-C``: folders; as
    ``git-completion.bash`` completes file names (``__gitcomp_file_direct``,
    which zsh's bridge takes too)."""
    (repo / "node_modules").mkdir()
    (repo / "notes.txt").write_text("n\n")
    for option in ("--link", "--copy", "-o", "--output", "--allow-write"):
        assert sorted(complete(f"git isopatch {option} no", repo, env)) == [
            "node_modules",
            "notes.txt",
        ], option
    for option in ("--link=", "--copy=", "--output=", "--allow-write="):
        assert sorted(complete(f"git isopatch {option}no", repo, env)) == [
            "node_modules",
            "notes.txt",
        ], option
    assert complete("git isopatch -C no", repo, env) == ["node_modules"]
    assert complete("git isopatch --porcelain -C no", repo, env) == ["node_modules"]
    assert complete("git isopatch list -C no", repo, env) == ["node_modules"]
    assert complete("git isopatch --timeout ", repo, env) == []


def test_command_names_after_dashdash_or_first_non_option(repo, env) -> None:
    for line in ("git isopatch -- gi", "git isopatch gi", "git isopatch -q --base main gi"):
        offered = complete(line, repo, env)
        assert "git " in offered, line
        assert "git-isopatch " in offered, line
        assert all(word.startswith("gi") for word in offered)


def test_command_arguments_and_options_after_the_command_are_left_alone(repo, env) -> None:
    assert complete("git isopatch -- git --po", repo, env) == []
    assert complete("git isopatch make --", repo, env) == []
    assert complete("git isopatch -- ./scr", repo, env) == []


def test_git_completes_the_subcommand_name(repo, env) -> None:
    """git's completion lists git-* programs on PATH: `git isopa` -> isopatch."""
    assert complete("git isopa", repo, env) == ["isopatch "]


@pytest.mark.needs("bash-completion")
def test_bash_completion_loads_it_by_name(repo, env, tmp_path: Path) -> None:
    """With the bash-completion package, nothing is sourced by hand: its
    loader finds git's script for `git`, and git's asks it for
    `git-isopatch`, which it finds under <dir>/bash-completion/completions
    for a <dir> in XDG_DATA_DIRS."""
    share = tmp_path / "share"
    (share / "bash-completion" / "completions").mkdir(parents=True)
    (share / "bash-completion" / "completions" / "git-isopatch").write_bytes(OURS.read_bytes())
    setup = (
        f"export XDG_DATA_DIRS={shlex.quote(str(share))}:/usr/share\n"
        ". /usr/share/bash-completion/bash_completion\n"
        "__load_completion git\n"
        "declare -F _git_isopatch >/dev/null && echo 'loaded too early' >&2\n"
    )
    assert complete("git isopatch --po", repo, env, setup) == ["--porcelain "]


def test_subcommands_are_offered_as_the_first_word_only(repo, env) -> None:
    """`git isopatch pru<Tab>` completes `prune` (a new user found it did not)."""
    assert complete("git isopatch pru", repo, env) == ["prune "]
    assert "list " in complete("git isopatch lis", repo, env)
    assert "prune " not in complete("git isopatch -- pru", repo, env)
    assert "prune " not in complete("git isopatch -q pru", repo, env)
