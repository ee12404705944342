"""An unknown option of a subcommand (design: "Command line") is answered as
git answers one (``git worktree add --bogus``): ``error: unknown option
'<name>'``, then the usage of that subcommand alone, exactly what its
``-h`` prints, on stderr, nothing on stdout, exit 129.  Checked against
real git's own subcommands, so that the rule is git's and not ours.
``--help`` after a subcommand opens the manual page, as after the capture's
options."""

from __future__ import annotations

import re
import subprocess

import pytest
from packages import BIN_DIR
from repo_helpers import isopatch


def _quoted_alike(text: str) -> str:
    """git 2.39 quotes the option as `bogus', later gits as 'bogus'."""
    return re.sub(r"`(\w[\w-]*)'", r"'\1'", text)


@pytest.mark.parametrize("sub", ["add", "list", "prune"])
def test_git_answers_an_unknown_option_of_a_subcommand_with_its_usage(
    env, make_repo, sub: str
) -> None:
    """The rule, as git itself follows it."""
    repo = make_repo()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "worktree", sub, *args], cwd=repo, env=env, capture_output=True, text=True
        )

    bogus, short_help = run("--bogus"), run("-h")
    assert bogus.returncode == short_help.returncode == 129
    assert bogus.stdout == ""
    assert _quoted_alike(bogus.stderr) == "error: unknown option 'bogus'\n" + short_help.stdout


@pytest.mark.parametrize("sub", ["list", "prune", "mcp"])
@pytest.mark.parametrize("option", ["--bogus", "-Y"])
def test_an_unknown_option_of_a_subcommand_prints_its_usage_alone(
    env, make_repo, sub: str, option: str
) -> None:
    repo = make_repo()
    bogus = isopatch(sub, option, cwd=repo, env=env)
    short_help = isopatch(sub, "-h", cwd=repo, env=env)
    assert bogus.returncode == short_help.returncode == 129
    assert bogus.out == ""
    what = "option 'bogus'" if option == "--bogus" else "switch 'Y'"
    assert bogus.err == f"error: unknown {what}\n" + short_help.out
    assert short_help.out.startswith(f"usage: git isopatch {sub} ")
    assert "   or: " not in short_help.out, "the other commands' forms are not shown"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("list", "extra"), "'extra'"),
        (("prune", "--expire", "now", "now"), "'now'"),
        (("mcp", "a", "b"), "'a b'"),
    ],
)
def test_an_argument_a_subcommand_takes_none_of_is_one_git_style_error(
    env, make_repo, args: tuple[str, ...], extra: str
) -> None:
    """Not click's "Got unexpected extra argument(s) (...)": git's "too
    many arguments" (builtin/multi-pack-index.c), naming them in quotes."""
    repo = make_repo()
    extra_run = isopatch(*args, cwd=repo, env=env)
    short_help = isopatch(args[0], "-h", cwd=repo, env=env)
    assert extra_run.returncode == 129
    assert extra_run.out == ""
    assert extra_run.err == f"error: too many arguments: {extra}\n" + short_help.out


@pytest.mark.needs("man-db")
@pytest.mark.parametrize("sub", ["list", "prune", "mcp"])
def test_help_of_a_subcommand_shows_its_own_part_of_the_manual_page(
    env, make_repo, sub: str
) -> None:
    """``git isopatch list --help`` shows the part of the page that
    documents ``list`` (its synopsis, then its section), not the whole
    page ``git isopatch --help`` opens, as ``git worktree --help`` opens
    git-worktree(1) rather than git(1): after a subcommand's options too.
    (git's parse-options answers ``git worktree list --help`` with the
    short usage; ``-h`` gives that here.)"""
    repo = make_repo()
    paged = {**env, "MANPAGER": "cat", "PAGER": "cat"}
    page = isopatch("--help", cwd=repo, env=paged)
    assert page.returncode == 0, page.err
    assert page.out.startswith("GIT-ISOPATCH(1)") and "\nNAME\n" in page.out
    title, says = {
        "list": ("Kept worktrees: list and prune", "git isopatch list shows every worktree"),
        "prune": ("Kept worktrees: list and prune", "git isopatch prune removes the kept"),
        "mcp": ("For agents: mcp and the skill", "git isopatch mcp serves three tools"),
    }[sub]
    for via_git in (False, True):
        for args in ([sub, "--help"], [sub, "-C", ".", "--help"]):
            run = isopatch(*args, cwd=repo, env=paged, via_git=via_git)
            assert (run.returncode, run.err) == (0, ""), (args, via_git)
            lines = run.out.splitlines()
            assert lines[0] == "SYNOPSIS" and lines[1].strip().startswith(f"git isopatch {sub} ")
            assert title in [line.strip() for line in lines], run.out
            assert says in " ".join(run.out.split()), run.out
            headings = [line.strip() for line in lines]
            for elsewhere in ("OPTIONS", "EXIT STATUS", "Sandbox"):  # a "see" names them
                assert elsewhere not in headings, elsewhere
            assert "--include-uncommitted" not in run.out
            assert len(run.out) < len(page.out) / 5


@pytest.mark.parametrize("sub", ["list", "prune", "mcp"])
def test_help_of_a_subcommand_without_man_shows_its_usage(env, make_repo, sub: str) -> None:
    """No ``man`` program on ``PATH`` (only the test environment's bin):
    a ``warning:``, then the subcommand's own short usage, as ``-h`` prints
    it."""
    repo = make_repo()
    short_help = isopatch(sub, "-h", cwd=repo, env=env)
    no_man = {**env, "PATH": str(BIN_DIR)}
    run = isopatch(sub, "--help", cwd=repo, env=no_man)
    assert run.returncode == 0
    assert run.err == "warning: no 'man' program found; showing the short usage\n"
    assert run.out == short_help.out
    assert "    --help                open the manual page" in run.out.splitlines()
