"""The human summary on stderr: a diffstat of the patch (coloured as git
colours a diff for where it goes), the summary line, and the next step,
which a user can paste into a shell where they stand."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from repo_helpers import git, isopatch
from terminal_helpers import isopatch_on_terminal

CHANGE = "printf 'one\\n2\\n' > a; printf 'x' > 'new file'; rm gone; chmod +x tool"
ESC = "\x1b["


def _repo(make_repo):
    return make_repo({"a": "one\ntwo\n", "gone": "bye\n", "tool": "#!/bin/sh\n", "sub/b": "b\n"})


def test_diffstat_summary_and_next_step(env, make_repo) -> None:
    repo = _repo(make_repo)
    run = isopatch("--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    lines = run.err.splitlines()
    patch = lines[-2].split(", patch ", 1)[1]
    assert lines == [
        " a        | 2 +-",
        " gone     | 1 -",
        " new file | 1 +",
        " tool     | 0",
        " 4 files changed, 2 insertions(+), 2 deletions(-)",
        " delete mode 100644 gone",
        " create mode 100644 new file",
        " mode change 100644 => 100755 tool",
        f"isopatch: 4 files changed, exit 0, patch {patch}",
        f"hint: to apply it: git apply --whitespace=nowarn {shlex.quote(patch)}",
    ]
    assert ESC not in run.err


def test_the_next_step_works_pasted_into_a_shell_in_a_subfolder(env, make_repo, tmp_path) -> None:
    """``git apply`` in a subfolder would leave out the paths outside it: the
    hint names the top; a name with a space and a quote is quoted."""
    repo = _repo(make_repo)
    output = tmp_path / "it's a fix.patch"
    run = isopatch("-o", output, "--", "sh", "-c", f"cd .. && {CHANGE}", cwd=repo / "sub", env=env)
    assert run.returncode == 0, run.err
    hint = run.err.splitlines()[-1]
    assert hint.startswith("hint: to apply it: git -C .. apply --whitespace=nowarn ")
    command = hint.removeprefix("hint: to apply it: ")
    subprocess.run(["sh", "-c", command], cwd=repo / "sub", env=env, check=True)
    status = git("status", "--porcelain", cwd=repo, env=env).decode().splitlines()
    assert sorted(status) == [" D gone", " M a", " M tool", '?? "new file"']


def test_exit_code_shows_the_same_and_quiet_shows_nothing(env, make_repo) -> None:
    repo = _repo(make_repo)
    shown = isopatch("--exit-code", "--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert shown.returncode == 1
    assert " 4 files changed, 2 insertions(+), 2 deletions(-)" in shown.err.splitlines()
    assert shown.err.splitlines()[-1].startswith(
        "hint: to apply it: git apply --whitespace=nowarn "
    )
    for quiet in (("-q",), ("--exit-code", "-q"), ("--porcelain",), ("--json",)):
        run = isopatch(*quiet, "--", "sh", "-c", CHANGE, cwd=repo, env=env)
        assert run.err == "", quiet


def test_stdout_shows_the_diffstat_but_no_next_step(env, make_repo) -> None:
    repo = _repo(make_repo)
    run = isopatch("--stdout", "--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert run.returncode == 0
    assert run.out.startswith("diff --git a/a b/a\n")
    assert run.err.splitlines()[-2:] == [
        " mode change 100644 => 100755 tool",
        "isopatch: 4 files changed, exit 0",
    ]


def test_nothing_changed_shows_no_diffstat_no_patch_and_no_next_step(env, make_repo) -> None:
    repo = _repo(make_repo)
    run = isopatch("--", "true", cwd=repo, env=env)
    assert (run.returncode, run.err) == (0, "isopatch: 0 files changed, exit 0\n")


def test_no_colour_in_a_pipe_unless_the_configuration_says_always(env, make_repo) -> None:
    repo = _repo(make_repo)
    git("config", "color.ui", "always", cwd=repo, env=env)
    run = isopatch("--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert f"{ESC}32m+" in run.err  # as git diff --stat | cat shows it
    git("config", "color.diff", "auto", cwd=repo, env=env)
    run = isopatch("--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert ESC not in run.err


@pytest.mark.parametrize(
    ("config", "term", "coloured"),
    [
        ((), "xterm", True),
        (("color.ui", "false"), "xterm", False),
        (("color.diff", "never"), "xterm", False),
        (("color.diff", "always"), "dumb", True),
        ((), "dumb", False),
    ],
)
def test_colour_on_a_terminal_as_git_decides(env, make_repo, config, term, coloured) -> None:
    repo = _repo(make_repo)
    if config:
        git("config", *config, cwd=repo, env=env)
    run = isopatch_on_terminal(
        "--", "sh", "-c", CHANGE, cwd=repo, env={**env, "TERM": term}, columns=60
    )
    assert run.returncode == 0, run.shown
    assert (f"{ESC}32m+" in run.shown) is coloured
    assert " 4 files changed, 2 insertions(+), 2 deletions(-)" in run.shown


def test_the_diffstat_fits_the_terminal(env, make_repo) -> None:
    long_name = "a-rather-long-folder-name/" * 3 + "file"
    repo = make_repo({long_name: "x\n" * 100})
    change = f"seq 200 > {long_name}"
    wide = isopatch_on_terminal("--", "sh", "-c", change, cwd=repo, env=env, columns=200)
    narrow = isopatch_on_terminal("--", "sh", "-c", change, cwd=repo, env=env, columns=50)
    stat = [line for line in wide.shown.splitlines() if " | " in line][0]
    assert long_name in stat
    stat = [line for line in narrow.shown.splitlines() if " | " in line][0]
    assert ".../" in stat and len(stat.replace(ESC, "")) <= 60


def test_the_ci_recipe_shows_what_would_change_and_hands_over_the_patch(env, make_repo) -> None:
    """README: ``git isopatch --exit-code --stdout -- <fmt> > format.patch``."""
    repo = _repo(make_repo)
    run = isopatch("--exit-code", "--stdout", "--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert run.returncode == 1
    assert " 4 files changed, 2 insertions(+), 2 deletions(-)" in run.err.splitlines()
    assert run.err.splitlines()[-1] == "isopatch: 4 files changed, exit 0"
    git("apply", "--check", "-", cwd=repo, env=env, input=run.stdout)
    clean = isopatch("--exit-code", "--stdout", "--", "true", cwd=repo, env=env)
    assert (clean.returncode, clean.stdout) == (0, b"")
    assert clean.err == "isopatch: 0 files changed, exit 0\n"


def test_a_session_step_that_applies_says_the_session_came_home(env, make_repo) -> None:
    """``--session s --apply`` brings home the session's whole change, not
    the step's: the step's line says what the step changed (nothing, here),
    and the session's line says that its change was applied, never a step
    line of "0 files changed ... applied" over a session that brought four."""
    repo = _repo(make_repo)
    first = isopatch("--session", "s", "-q", "--", "sh", "-c", CHANGE, cwd=repo, env=env)
    assert first.returncode == 0, first.err
    run = isopatch("--session", "s", "--apply", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err.splitlines() == [
        "isopatch: 0 files changed, exit 0",
        "isopatch: session s: 4 files changed, applied to the work tree",
    ]
    assert (repo / "a").read_text() == "one\n2\n" and not (repo / "gone").exists()
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
