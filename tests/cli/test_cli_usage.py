"""`git isopatch` on the command line behaves as a git command (design:
"Command line"): ``-h`` prints a short git-style usage (exit 129), every
usage error prints ``error: ...`` and the usage on stderr, exits 129 and
creates nothing, and ``--version`` prints the version."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
from pathlib import Path

import pytest
from repo_helpers import (
    git,
    isopatch,
    repo_state,
)

import git_isopatch
from git_isopatch import cli

SYNOPSIS = "usage: git isopatch [<options>] [--] <command> [<arg>...]"
ROOT = Path(__file__).resolve().parents[2]


def _option_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("    ")]


def _nothing_created(repo: Path, env: dict[str, str], before: dict) -> None:
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert repo_state(repo, env) == before
    assert not (repo / ".git" / "worktrees").exists()
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env)
    assert listed.count(b"worktree ") == 1


USAGE_ERRORS = [
    (["--bogus", "--", "touch", "x"], "unknown option 'bogus'"),
    (["--no-bogus", "--", "touch", "x"], "unknown option 'no-bogus'"),
    (["-Y", "--", "touch", "x"], "unknown switch 'Y'"),
    (["-qY", "--", "touch", "x"], "unknown switch 'Y'"),
    ([], "no command given"),
    (["--porcelain"], "no command given"),
    (["--porcelain", "--"], "no command given"),
    (["--base"], "option 'base' requires a value"),
    (["-C"], "switch 'C' requires a value"),
    (["--keep=yes", "--", "touch", "x"], "option 'keep' takes no value"),
    (["--timeout", "soon", "--", "touch", "x"], "option 'timeout' expects a number of seconds"),
    (["--timeout=-1", "--", "touch", "x"], "option 'timeout' expects a number of seconds"),
    (["--timeout", "inf", "--", "touch", "x"], "option 'timeout' expects a number of seconds"),
    (["--timeout", "nan", "--", "touch", "x"], "option 'timeout' expects a number of seconds"),
    (["--timeout", "", "--", "touch", "x"], "option 'timeout' expects a number of seconds"),
    (
        ["--max-memory", "lots", "--", "touch", "x"],
        "option 'max-memory' expects a non-negative integer value with an optional k/m/g suffix",
    ),
    (
        ["--max-processes=-1", "--", "touch", "x"],
        "option 'max-processes' expects a non-negative integer value with an optional k/m/g suffix",
    ),
    (["-o", "", "--", "touch", "x"], "option 'output' expects a file name"),
    (["--output=", "--", "touch", "x"], "option 'output' expects a file name"),
    (["-z", "--", "touch", "x"], "the option '-z' requires '--porcelain'"),
    (["-z", "--json", "--", "touch", "x"], "the option '-z' requires '--porcelain'"),
    (
        ["--porcelain", "--json", "--", "touch", "x"],
        "options '--porcelain' and '--json' cannot be used together",
    ),
    (
        ["--stdout", "--porcelain", "--", "touch", "x"],
        "options '--stdout' and '--porcelain' cannot be used together",
    ),
    (
        ["--stdout", "--json", "--", "touch", "x"],
        "options '--stdout' and '--json' cannot be used together",
    ),
    (
        ["--stdout", "-o", "x.patch", "--", "touch", "x"],
        "options '--stdout' and '--output' cannot be used together",
    ),
]


def _usage_record(args: list[str], message: str) -> str:
    """What a usage error prints on stdout: its record under ``--json`` or
    ``--porcelain`` (not both) before ``--``, else nothing."""
    options = args[: args.index("--")] if "--" in args else args
    if ("--json" in options) == ("--porcelain" in options):
        return ""
    if "--json" in options:
        return json.dumps({"version": 1, "error": message, "error-code": "usage"}) + "\n"
    return f"version 1\nerror {message}\nerror-code usage\n"


BOGUS = "unknown option 'bogus'"


@pytest.mark.parametrize(
    ("args", "out"),
    [
        (["--json", "--bogus"], _usage_record(["--json"], BOGUS)),
        (["--bogus", "--json", "--", "true"], _usage_record(["--json"], BOGUS)),
        (
            ["--json", "--timeout", "x", "--", "true"],
            _usage_record(["--json"], "option 'timeout' expects a number of seconds"),
        ),
        (["--porcelain", "-z", "--bogus"], f"version 1\0error {BOGUS}\0error-code usage\0"),
        (
            ["-qz", "--porcelain", "--timeout"],
            "version 1\0error option 'timeout' requires a value\0error-code usage\0",
        ),
        (["--porcelain", "--json", "--", "true"], ""),  # itself the usage error
        (["--bogus", "--", "sh", "--json"], ""),  # the command's --json, not ours
        (["--session", "--json", "--", "true"], ""),  # the name --json, refused
        (["list", "--json", "--bogus"], _usage_record(["--json"], BOGUS)),
        (
            ["list", "--porcelain", "-z", "-Y"],
            "version 1\0error unknown switch 'Y'\0error-code usage\0",
        ),
        (["prune", "--json"], ""),  # neither takes --json
        (["mcp", "--json"], ""),
    ],
)
def test_a_usage_error_under_json_or_porcelain_is_a_record_on_stdout_too(
    env, make_repo, args: list[str], out: str
) -> None:
    """A program that asked for ``--json`` or ``--porcelain`` [``-z``] reads
    the usage error as it reads a fatal one, ``error-code usage``; stderr
    and the exit status stay git's, nothing is made."""
    repo = make_repo()
    before = repo_state(repo, env)
    run = isopatch(*args, cwd=repo, env=env)
    assert run.returncode == 129, run.err
    assert run.out == out
    assert run.err.startswith("error: ") and "\nusage: git isopatch" in run.err
    _nothing_created(repo, env, before)


def test_a_usage_error_against_a_session_is_a_record_on_stdout_too(env, make_repo) -> None:
    """The new user's case: an option a session's later step cannot take
    (found once the repository is open)."""
    repo = make_repo()
    assert isopatch("--session", "a", "--include-uncommitted", "-q", "--", "true",
                    cwd=repo, env=env).returncode == 0  # fmt: skip
    run = isopatch("--json", "--session", "a", "--include-uncommitted", "--", "true",
                   cwd=repo, env=env)  # fmt: skip
    message = "option '--include-uncommitted' cannot be used with the existing session 'a'"
    assert run.returncode == 129, run.err
    assert json.loads(run.out) == {"version": 1, "error": message, "error-code": "usage"}
    assert run.err.startswith(f"error: {message}\nusage: git isopatch")
    assert isopatch("--session", "a", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.hostile
def test_an_empty_command_name_is_a_usage_error(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--", "", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.startswith("error: the command name is empty\nusage: git isopatch")
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_short_help_is_git_style_usage_on_stdout_with_129(env, make_repo) -> None:
    repo = make_repo()
    for via_git in (False, True):
        run = isopatch("-h", cwd=repo, env=env, via_git=via_git)
        assert run.returncode == 129
        assert run.err == ""
        lines = run.out.split("\n")
        assert lines[0] == SYNOPSIS
        # the subcommands' forms follow, as git prints them ("   or: ...")
        assert lines[1:6] == [
            "   or: git isopatch list [--porcelain [-z] | --json] [-C <path>]",
            "   or: git isopatch prune [--expire <time>] [--sessions] [-n] [-v] [-C <path>]",
            "   or: git isopatch --session <name> --end [-C <path>]",
            "   or: git isopatch mcp [-C <path>] [--allow-unconfined] [--allow-network] "
            "[--allow-write <path>]",
            "",
        ]
        assert run.out.endswith("\n\n"), "git ends the usage with a blank line"
        assert "    --base <ref>          commit to start from (default HEAD)" in lines
        assert "    -o, --output <file>   write the patch to <file>" in lines
        assert (
            "    --[no-]keep           keep the worktree after the run, whatever its exit status"
            in lines
        )


def test_short_help_names_every_form_of_the_manual_synopsis(env, make_repo) -> None:
    """Each form the manual page's SYNOPSIS gives (but ``-h | --help |
    --version``) is a line of ``-h``, in the same order: a user who reads
    only ``-h`` still learns how to end a session."""
    page = (ROOT / "man" / "git-isopatch.rst").read_text(encoding="utf-8")
    synopsis = page.split("SYNOPSIS\n========\n", 1)[1].strip().split("\n\n", 1)[0]
    forms = [re.sub(r"[*]", "", line.removeprefix("| ")) for line in synopsis.splitlines()]
    forms = [form for form in forms if "--version" not in form]
    run = isopatch("-h", cwd=make_repo(), env=env)
    assert run.returncode == 129
    shown = [
        re.sub(r"^(usage|   or): ", "", line)
        for line in run.out.splitlines()
        if line.startswith(("usage: ", "   or: "))
    ]
    assert shown == forms


def test_short_help_columns_match_gits_own(env, make_repo) -> None:
    """Help text starts where git's parse-options puts it (column 26 after a
    name of up to 20 characters), as `git worktree list -h` shows."""
    repo = make_repo()
    theirs = subprocess.run(
        ["git", "worktree", "list", "-h"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert theirs.returncode == 129
    ours = isopatch("-h", cwd=repo, env=env)

    def help_columns(text: str) -> set[int]:
        columns = set()
        for line in _option_lines(text):
            match = re.match(r"    (\S+(?: \S+)*?)(  +)(\S.*)$", line)
            if match and len(match.group(1)) <= 20:
                columns.add(match.start(3))
        return columns

    assert help_columns(theirs.stdout) == {26}
    assert help_columns(ours.out) == {26}


def test_short_help_lists_every_option_of_the_command(env, make_repo) -> None:
    run = isopatch("-h", cwd=make_repo(), env=env)
    listed = " ".join(_option_lines(run.out))
    for names, text in cli.option_rows():
        assert names in listed and text in listed


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS, ids=lambda v: repr(v))
def test_usage_error_prints_error_and_usage_exits_129_creates_nothing(
    env, make_repo, args: list[str], message: str
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    run = isopatch(*args, cwd=repo, env=env)
    assert run.returncode == 129, run.err
    assert run.out == _usage_record(args, message)
    lines = run.err.split("\n")
    assert lines[0] == f"error: {message}"
    assert lines[1] == SYNOPSIS
    assert run.err.endswith("\n\n")
    for typer_default in ("Usage:", "Error:", "Try ", "Possible options", "╭", "Traceback"):
        assert typer_default not in run.err
    _nothing_created(repo, env, before)


def test_usage_error_through_git_is_129_too(env, make_repo) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    run = isopatch("--bogus", "--", "touch", "x", cwd=repo, env=env, via_git=True)
    assert run.returncode == 129
    assert run.err.startswith("error: unknown option 'bogus'\n" + SYNOPSIS + "\n")
    _nothing_created(repo, env, before)


def test_options_after_the_command_belong_to_the_command(env, make_repo) -> None:
    """`git isopatch touch --bogus` runs `touch --bogus`: options are only
    read before the command (and before `--`)."""
    repo = make_repo()
    run = isopatch("--porcelain", "sh", "-c", 'echo "$@" > args', "sh", "--bogus", "-h",
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 0, run.err
    assert b"+--bogus -h" in Path(run.fields()["patch"]).read_bytes()


def test_zero_timeout_means_no_limit(env, make_repo) -> None:
    run = isopatch("--porcelain", "--timeout", "0", "--", "true", cwd=make_repo(), env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["exit"] == "0"


def test_version_prints_the_package_version(env, make_repo) -> None:
    for via_git in (False, True):
        run = isopatch("--version", cwd=make_repo(name=f"r{via_git}"), env=env, via_git=via_git)
        assert run.returncode == 0
        assert run.out == f"git-isopatch {git_isopatch.__version__}\n"
        assert run.err == ""


def test_version_is_the_installed_distributions(env) -> None:
    """One source of truth: the wheel's metadata takes its version from
    ``git_isopatch.__version__`` (pyproject: ``[tool.hatch.version]``)."""
    from importlib.metadata import version

    assert version("git-isopatch") == git_isopatch.__version__


def test_help_and_version_do_not_load_pygit2(env) -> None:
    """Start-up stays light (issue 6): -h and --version import neither
    pygit2 nor the capture machinery."""
    import sys

    code = (
        "import sys\n"
        "from git_isopatch import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('pygit2', 'git_isopatch.capture') if m in sys.modules]\n"
        "sys.stderr.write(repr(heavy))\n"
    )
    for flag in ("-h", "--version"):
        done = subprocess.run(
            [sys.executable, "-c", code, flag], env=env, capture_output=True, text=True, check=False
        )
        assert done.stderr == "[]", done.stderr


def test_library_warnings_get_gits_prefix() -> None:
    stream = io.StringIO()
    handler = cli.configure_logging(stream)
    try:
        logging.getLogger("git_isopatch.worktrees").warning("could not remove worktree '%s'", "x")
        logging.getLogger("git_isopatch").error("it broke")
        logging.getLogger("git_isopatch").debug("not shown")
    finally:
        logging.getLogger("git_isopatch").removeHandler(handler)
    assert stream.getvalue() == "warning: could not remove worktree 'x'\nerror: it broke\n"


def test_fatal_messages_follow_gits_guidelines(env, make_repo, tmp_path: Path) -> None:
    """Known failures: one `fatal:` line, lowercase, no full stop, subject
    quoted; nothing on stdout in human mode."""
    repo = make_repo()
    cases = [
        (["--base", "nosuch", "--", "true"], repo, "fatal: unknown revision 'nosuch'"),
        (["-C", str(tmp_path / "nowhere"), "--", "true"], repo, "fatal: cannot change to '"),
        (["--", "true"], tmp_path / "home", "fatal: not a git repository"),
    ]
    for args, cwd, start in cases:
        run = isopatch(*args, cwd=cwd, env=env)
        assert run.returncode == 128
        assert run.out == ""
        lines = run.err.splitlines()
        assert lines[0].startswith(start), run.err
        assert not lines[0].endswith(".")
        assert all(re.match(r"(fatal|error|warning|hint): [a-z']", line) for line in lines)


@pytest.mark.hostile
@pytest.mark.parametrize("target", ["nowhere", "file", "file/below"])
def test_dash_c_somewhere_no_folder_says_what_git_says(env, make_repo, target) -> None:
    """``-C`` to a path that is not a folder: the line git prints for its
    own ``-C`` (the reason is the system's, ``Not a directory`` for a
    file), exit 128, nothing else."""
    repo = make_repo({"file": "f\n"})
    path = str(repo / target)
    theirs = subprocess.run(["git", "-C", path, "status"], capture_output=True, env=env, text=True)
    run = isopatch("-C", path, "--", "true", cwd=repo, env=env)
    assert run.returncode == 128 == theirs.returncode
    assert run.err == theirs.stderr, (run.err, theirs.stderr)
    assert run.out == ""
