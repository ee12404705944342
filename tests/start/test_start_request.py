"""One request: every field of a run's ``CaptureRequest`` is reachable from
a flag, from configuration where a key exists, and from the Python API; the
flags win over the configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer.main
from repo_helpers import base_trees, git

from git_isopatch import capture, cli
from git_isopatch.git.repo import open_user_repository
from git_isopatch.request import CaptureRequest, OutputMode, conflicts
from git_isopatch.settings import CONFIG_KEYS, complete_request

#: field -> (command-line arguments that set it, the value they give, or
#: None when no flag sets it; the configuration key, or None).
SOURCES: dict[str, tuple[list[str] | None, object, str | None]] = {
    "command": (["--", "fmt", "-x"], ("fmt", "-x"), None),
    "base": (["--base", "main~1", "--", "true"], "main~1", None),
    "include_uncommitted": (["--include-uncommitted", "--", "true"], True, None),
    "repo_path": (["-C", "sub", "--", "true"], "sub", None),
    "link": (["--link", "a", "--link", "b", "--", "true"], ("a", "b"), None),
    "copy": (["--copy", ".env", "--", "true"], (".env",), None),
    "configured_links": (["--no-link", "--", "true"], (), "isopatch.link"),
    "configured_copies": (["--no-copy", "--", "true"], (), "isopatch.copy"),
    "worktree_include": (["--no-copy", "--", "true"], False, None),
    "output": (["-o", "out.patch", "--", "true"], "out.patch", None),
    "capture_output": (["--porcelain", "--", "true"], True, None),
    "command_stdout": (["--stdout", "--", "true"], 2, None),
    "keep": (["--keep", "--", "true"], True, "isopatch.keep"),
    "timeout": (["--timeout", "2.5", "--", "true"], 2.5, "isopatch.timeout"),
    "tmpdir": (None, None, "isopatch.tmpdir"),
    "max_worktrees": (None, None, "isopatch.maxWorktrees"),
    "pool": (None, None, "isopatch.pool"),
    "base_trees": (None, None, "isopatch.baseTrees"),
    "staged": (["--staged", "--", "true"], True, None),
    "apply": (["--apply", "--", "true"], True, None),
    # from the terminal: progress and the terminal's width only on one
    "progress": (None, None, None),
    "diffstat": (["-q", "--", "true"], False, None),
    "informational_hints": (["-q", "--", "true"], False, None),
    "terminal_columns": (None, None, None),
    "sandbox": (["--sandbox", "--", "true"], True, "isopatch.sandbox"),
    "allow_write": (["--allow-write", "c", "--", "true"], ("c",), "isopatch.allowWrite"),
    "allow_network": (["--allow-network", "--", "true"], True, "isopatch.allowNetwork"),
    "recurse_submodules": (
        ["--recurse-submodules", "--", "true"],
        True,
        "isopatch.recurseSubmodules",
    ),
    "max_processes": (["--max-processes", "2k", "--", "true"], 2048, "isopatch.maxProcesses"),
    "max_memory": (["--max-memory", "512m", "--", "true"], 512 << 20, "isopatch.maxMemory"),
    "session": (["--session", "fix", "--", "true"], "fix", None),
    "cache": (["--no-cache", "--", "true"], False, "isopatch.cache"),
    "cache_limit": (None, None, "isopatch.cacheLimit"),
}


def parse(argv: list[str]) -> tuple[CaptureRequest, OutputMode]:
    """The request and mode ``git isopatch <argv>`` builds (typer's real parser)."""
    command = typer.main.get_command(cli.app)
    context = command.make_context("git isopatch", list(argv))
    return cli.request_from_options(context.params)


def test_every_field_has_its_sources_listed() -> None:
    assert set(SOURCES) == set(CaptureRequest._fields)


@pytest.mark.parametrize("field", [f for f, (argv, _, _) in SOURCES.items() if argv])
def test_a_flag_sets_the_field(field: str) -> None:
    argv, value, _ = SOURCES[field]
    request, _ = parse(argv)
    assert getattr(request, field) == value
    assert getattr(parse(["--", "true"])[0], field) != value  # the flag made the difference


def test_the_configuration_table_sets_exactly_the_listed_fields() -> None:
    configured = {f"isopatch.{row.name}": row.field for row in CONFIG_KEYS}
    listed = {key: field for field, (_, _, key) in SOURCES.items() if key}
    assert configured == listed


def test_configuration_completes_the_request_and_flags_win(make_repo, env, tmp_path: Path) -> None:
    repo = make_repo()
    for key, value in [
        ("isopatch.keep", "true"),
        ("isopatch.timeout", "7"),
        ("isopatch.tmpdir", str(tmp_path / "elsewhere")),
        ("isopatch.maxWorktrees", "3"),
        ("isopatch.pool", "2"),
        ("isopatch.baseTrees", "3"),
        ("isopatch.link", "node_modules"),
        ("isopatch.copy", ".env"),
        ("isopatch.sandbox", "true"),
        ("isopatch.allowWrite", "~/cache"),
        ("isopatch.allowNetwork", "yes"),
    ]:
        git("config", key, value, cwd=repo, env=env)
    repository = open_user_repository(str(repo), env).value
    completed = complete_request(CaptureRequest(command=("true",)), repository, env)
    assert (completed.keep, completed.timeout, completed.max_worktrees) == (True, 7.0, 3)
    assert completed.pool == 2
    assert completed.base_trees == 3
    assert completed.tmpdir == str(tmp_path / "elsewhere")
    assert (completed.sandbox, completed.allow_network) == (True, True)
    assert completed.allow_write == (str(Path(env["HOME"]) / "cache"),)
    assert (completed.configured_links, completed.configured_copies) == (
        ("node_modules",),
        (".env",),
    )
    given = CaptureRequest(
        command=("true",), keep=False, timeout=0, configured_links=(), configured_copies=()
    )
    given = given._replace(sandbox=False, allow_write=("/given",), allow_network=False)
    flags_win = complete_request(given, repository, env)
    assert (flags_win.keep, flags_win.timeout) == (False, 0)
    assert (flags_win.sandbox, flags_win.allow_write, flags_win.allow_network) == (
        False,
        ("/given",),
        False,
    )
    assert (flags_win.configured_links, flags_win.configured_copies) == ((), ())


def test_defaults_without_configuration(make_repo, env) -> None:
    repository = open_user_repository(str(make_repo()), env).value
    completed = complete_request(CaptureRequest(command=("true",)), repository, env)
    assert completed.keep is False
    assert completed.timeout == 0  # no limit
    assert completed.tmpdir == env["TMPDIR"]
    assert completed.max_worktrees == 25
    assert completed.recurse_submodules is False
    assert (completed.configured_links, completed.configured_copies) == ((), ())
    # issue 19: confined where the machine allows it
    assert (completed.sandbox, completed.allow_write, completed.allow_network) == (
        "auto",
        (),
        False,
    )


#: Fields :func:`test_the_api_reaches_the_staged_and_summary_fields` sets
#: (``staged`` cannot go with the other test's ``base``).
STAGED_AND_SUMMARY_FIELDS = {"staged", "apply", "progress", "diffstat", "terminal_columns"}

#: The field :func:`test_the_api_reaches_the_hint_field` sets (its hint
#: needs a run from HEAD that changes nothing).
HINT_FIELDS = {"informational_hints"}

#: The field :func:`test_the_api_reaches_the_base_trees_field` sets (base
#: trees are for sandboxed runs without ``--recurse-submodules``, which the
#: run of every field asks for).
BASE_TREE_FIELDS = {"base_trees"}


def test_the_api_reaches_every_field(make_repo, env, tmp_path: Path) -> None:
    """One real capture through ``capture(command, **options)`` with every
    field set, each visible in the result or in what the run did."""
    repo = make_repo({"README": "hello\n", "sub/file": "x\n", ".gitignore": "local/\n"})
    (repo / "local").mkdir()
    (repo / "local" / "data").write_text("local\n")
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo, env=env)
    private_root = tmp_path / "private"
    private_root.mkdir()
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    options = {
        "base": "main~1",
        "include_uncommitted": False,
        "repo_path": str(repo / "sub"),
        "link": [],
        "copy": ["../local"],
        "configured_links": [],
        "configured_copies": [],
        "worktree_include": False,
        "output": "api.patch",
        "capture_output": True,
        "command_stdout": None,
        "keep": True,
        "timeout": 30,
        "tmpdir": str(private_root),
        "max_worktrees": 5,
        "pool": 1,
        "sandbox": True,
        "allow_write": [str(allowed)],
        "allow_network": True,
        "recurse_submodules": True,  # no submodule here; test_patch_submodules.py uses it
        "max_processes": 512,
        "max_memory": 1 << 30,
        "cache": False,
        "cache_limit": 1 << 20,
    }
    # session cannot go with keep: test_the_api_runs_the_steps_of_a_session
    others = STAGED_AND_SUMMARY_FIELDS | HINT_FIELDS | BASE_TREE_FIELDS
    assert set(options) | {"command", "session"} | others == set(SOURCES)
    script = (
        "cat ../local/data > copied && echo out && pwd >&2"
        f" && cat /proc/self/net/dev > {allowed}/net; touch {tmp_path}/denied;"
        f" cat /proc/self/cgroup > {allowed}/cgroup; true"
    )
    result = capture(["sh", "-c", script], **options)
    first = git("rev-parse", "main~1", cwd=repo, env=env).decode().strip()
    assert result.base == first
    assert result.patch_path == str(repo / "sub" / "api.patch")
    assert b"+++ b/sub/copied" in Path(result.patch_path).read_bytes()
    assert b"local" in Path(result.patch_path).read_bytes()
    assert result.worktree_path is not None and Path(result.worktree_path).is_dir()
    # with a pool the worktree has a folder of its own, apart from the run's
    assert Path(result.worktree_path).parent.parent == private_root
    assert Path(result.worktree_path).parent != Path(result.tmpdir)
    assert result.timeout == 30
    assert Path(result.tmpdir).parent == private_root
    assert Path(result.stdout).read_text() == "out\n"
    assert Path(result.stderr).read_text().splitlines()[0].endswith("/sub")
    assert not (tmp_path / "denied").exists(), "sandbox"

    def names(text: str) -> list[str]:
        return [line.split(":")[0].strip() for line in text.splitlines()[2:]]

    interfaces = names(Path("/proc/self/net/dev").read_text())
    seen = names((allowed / "net").read_text())
    assert seen == interfaces, "allow_write, allow_network: the network is ours"
    if os.geteuid() == 0:  # max_processes, max_memory: a cgroup of the run's own
        assert "git-isopatch-" in (allowed / "cgroup").read_text()
    git("worktree", "remove", "--force", result.worktree_path, cwd=repo, env=env)


@pytest.mark.parametrize("count", [0, 1])
def test_the_api_reaches_the_base_trees_field(make_repo, env, count: int) -> None:
    repo = make_repo({"README": "hello\n"})
    result = capture(
        ["sh", "-c", "echo more >> README"],
        repo_path=str(repo),
        environ=env,
        sandbox=True,
        base_trees=count,
        capture_output=True,
    )
    assert b"+more" in Path(result.patch_path).read_bytes()
    assert len(base_trees(repo, env)) == count


def test_the_api_reaches_the_staged_and_summary_fields(make_repo, env, capfd) -> None:
    repo = make_repo({"a": "a\n", "b": "b\n"})
    (repo / "a").write_text("staged\n")
    git("add", "a", cwd=repo, env=env)
    (repo / "b").write_text("unstaged\n")
    options = {
        "staged": True,
        "apply": True,
        "progress": True,
        "diffstat": True,
        "terminal_columns": 50,
    }
    assert set(options) == STAGED_AND_SUMMARY_FIELDS
    capfd.readouterr()
    result = capture(
        ["sh", "-c", "cat b > seen; sed -i s/staged/fixed/ a"],
        repo_path=str(repo),
        environ={**env, "TERM": "xterm"},
        **options,
    )
    assert result.exit_code == 0 and result.error is None
    assert git("show", f"{result.base}:a", cwd=repo, env=env) == b"staged\n"  # staged
    assert result.applied is True  # apply
    assert (repo / "a").read_text() == "fixed\n" and (repo / "seen").read_text() == "b\n"
    assert "Preparing worktree (detached HEAD " in capfd.readouterr().err  # progress
    assert result.diffstat is not None and b" seen | 1 \x1b[32m+" in result.diffstat  # colour
    assert b" a    | 2 \x1b[32m+\x1b[m\x1b[31m-" in result.diffstat  # diffstat, columns


def test_the_api_reaches_the_hint_field(make_repo, env) -> None:
    """``informational_hints=False`` leaves out the advice that only
    informs: here, that the uncommitted change was not in the worktree."""
    repo = make_repo({"a": "a\n"})
    (repo / "a").write_text("edited\n")
    hinted = capture(["true"], repo_path=str(repo), sandbox=True)
    assert any("uncommitted changes" in hint for hint in hinted.informational_hints)
    spared = capture(["true"], repo_path=str(repo), sandbox=True, informational_hints=False)
    assert spared.exit_code == 0 and spared.files == 0
    assert not any("uncommitted changes" in hint for hint in spared.informational_hints)


def test_the_api_refuses_an_unknown_option(make_repo, env) -> None:
    with pytest.raises(TypeError, match="tmp_dir"):
        capture(["true"], repo_path=str(make_repo()), tmp_dir="/tmp")


@pytest.mark.parametrize(
    ("request_", "mode", "message"),
    [
        (CaptureRequest(command=()), None, "no command given"),
        (CaptureRequest(command=("",)), None, "the command name is empty"),
        (
            CaptureRequest(command=("x",), include_uncommitted=True, base="main"),
            None,
            "options '--include-uncommitted' and '--base' cannot be used together",
        ),
        (CaptureRequest(command=("x",)), OutputMode(nul=True), "requires '--porcelain'"),
        (
            CaptureRequest(command=("x",)),
            OutputMode(stdout=True, json=True),
            "options '--stdout' and '--json' cannot be used together",
        ),
        (
            CaptureRequest(command=("x",), output="x.patch"),
            OutputMode(stdout=True),
            "options '--stdout' and '--output' cannot be used together",
        ),
        # the API writes the patch to the file and the command's stdout
        # where it is told: nothing to refuse
        (CaptureRequest(command=("x",), output="x.patch", command_stdout=2), None, None),
        (CaptureRequest(command=("x",)), OutputMode(porcelain=True, nul=True), None),
    ],
)
def test_conflicts_are_decided_in_one_place(request_, mode, message) -> None:
    found = conflicts(request_, mode)
    if message is None:
        assert found is None
    else:
        assert found is not None and message in found


def test_the_api_runs_the_steps_of_a_session(make_repo, env) -> None:
    """``capture(..., session=...)``: each call a step; ``end_session`` ends it."""
    from git_isopatch.manage import end_session

    repo = make_repo()
    first = capture(["sh", "-c", "echo a > a.txt"], repo_path=str(repo), session="api")
    second = capture(["sh", "-c", "echo b > b.txt"], repo_path=str(repo), session="api")
    assert (first.session, first.files, second.files, second.session_files) == ("api", 1, 1, 2)
    assert second.session_patch is not None and b"+b" in Path(second.session_patch).read_bytes()
    with pytest.raises(ValueError, match="'--session' and '--keep'"):
        capture(["true"], repo_path=str(repo), session="api", keep=True)
    assert end_session(str(repo), "api") and not end_session(str(repo), "api")
