"""Defaults from `isopatch.*` configuration through git's whole chain, and
command-line flags that win over them (issue 3)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state

from git_isopatch.git.config_read import parse_bool
from git_isopatch.git.result import Err, Ok
from git_isopatch.settings import CONFIG_KEYS, parse_seconds


def _kept(run) -> bool:
    fields = run.fields()
    assert run.returncode == 0, run.err
    return "worktree" in fields


def _set_global(env: dict[str, str], key: str, value: str) -> None:
    git("config", "--global", key, value, cwd=Path(env["HOME"]), env=env)


def test_keep_from_global_config_and_no_keep_overrides(env, make_repo) -> None:
    repo = make_repo()
    assert not _kept(isopatch("--porcelain", "--", "true", cwd=repo, env=env))
    _set_global(env, "isopatch.keep", "true")
    assert (Path(env["HOME"]) / ".gitconfig").exists()
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert _kept(run)
    assert (Path(run.fields()["worktree"]) / ".git").is_file()
    assert not _kept(isopatch("--porcelain", "--no-keep", "--", "true", cwd=repo, env=env))


def test_repository_config_wins_over_global_and_flag_over_both(env, make_repo) -> None:
    repo = make_repo()
    _set_global(env, "isopatch.keep", "true")
    git("config", "isopatch.keep", "false", cwd=repo, env=env)
    assert not _kept(isopatch("--porcelain", "--", "true", cwd=repo, env=env))
    assert _kept(isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env))


def test_git_dash_c_reaches_isopatch_through_real_git(env, make_repo) -> None:
    repo = make_repo()
    git("config", "isopatch.keep", "false", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env, via_git=True)
    assert not _kept(run)
    # `git -c` arrives in GIT_CONFIG_PARAMETERS and wins over the files
    for setting in ("isopatch.keep=true", "isopatch.keep"):  # no `=`: true, as git reads it
        done = subprocess.run(
            ["git", "-c", setting, "isopatch", "--porcelain", "--", "true"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "\nworktree " in done.stdout, setting
    done = subprocess.run(
        ["git", "-c", "isopatch.keep=true", "isopatch", "--porcelain", "--no-keep", "--", "true"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "worktree" not in done.stdout


def test_empty_value_is_false_as_git_reads_it(env, make_repo) -> None:
    repo = make_repo()
    _set_global(env, "isopatch.keep", "true")
    git("config", "isopatch.keep", "", cwd=repo, env=env)
    assert not _kept(isopatch("--porcelain", "--", "true", cwd=repo, env=env))


def test_git_config_variable_does_not_redirect_the_configuration(env, make_repo) -> None:
    """``GIT_CONFIG`` is honoured by the `git config` command alone; git
    commands ignore it, and so does git-isopatch."""
    repo = make_repo()
    other = Path(env["HOME"]) / "other.config"
    other.write_text("[isopatch]\n\tkeep = false\n")
    git("config", "isopatch.keep", "true", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "true", cwd=repo, env={**env, "GIT_CONFIG": str(other)})
    assert _kept(run)


def test_timeout_from_config_stops_the_command_and_zero_flag_lifts_it(env, make_repo) -> None:
    repo = make_repo()
    git("config", "isopatch.timeout", "0.5", cwd=repo, env=env)
    run = isopatch("--", "sh", "-c", "echo x > before; sleep 30", cwd=repo, env=env)
    assert run.returncode == 124
    assert "error: the command timed out after 0.5 seconds" in run.err
    run = isopatch("--porcelain", "--timeout", "0", "--", "sleep", "1", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    git("config", "isopatch.timeout", "0", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "sleep", "1", cwd=repo, env=env)
    assert run.returncode == 0, run.err


def test_flag_timeout_wins_over_config(env, make_repo) -> None:
    repo = make_repo()
    git("config", "isopatch.timeout", "600", cwd=repo, env=env)
    run = isopatch("--timeout", "0.5", "--", "sleep", "30", cwd=repo, env=env)
    assert run.returncode == 124
    assert "after 0.5 seconds" in run.err


def test_tmpdir_from_config_absolute_relative_and_home(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (Path(env["HOME"]) / "isotmp").mkdir()
    (repo / "rel").mkdir()
    for value, expected in (
        (str(elsewhere), elsewhere),
        ("~/isotmp", Path(env["HOME"]) / "isotmp"),
        ("rel", repo / "rel"),  # from the top of the work tree, wherever we stand
    ):
        git("config", "isopatch.tmpdir", value, cwd=repo, env=env)
        (repo / "sub").mkdir(exist_ok=True)
        run = isopatch("--porcelain", "--", "touch", "made", cwd=repo / "sub", env=env)
        assert run.returncode == 0, run.err
        patch = Path(run.fields()["patch"])
        assert patch.parent.parent == expected, value
        assert b"b/sub/made" in patch.read_bytes()
    assert list(Path(env["TMPDIR"]).iterdir()) == []


SECONDS_HINT = "is not a number of seconds (0 for no limit)"
BAD_VALUES = [
    ("isopatch.timeout", "soon", f"'soon' {SECONDS_HINT}", "repository"),
    ("isopatch.timeout", "soon", f"'soon' {SECONDS_HINT}", "global"),
    ("isopatch.timeout", "soon", f"'soon' {SECONDS_HINT}", "git -c"),
    ("isopatch.timeout", "-5", f"'-5' {SECONDS_HINT}", "repository"),
    ("isopatch.timeout", "", f"'' {SECONDS_HINT}", "repository"),
    (
        "isopatch.keep",
        "maybe",
        "'maybe' is not a boolean (true/false, yes/no, on/off, 1/0)",
        "git -c",
    ),
    ("isopatch.tmpdir", "", "isopatch.tmpdir needs a path", "global"),
    ("isopatch.pool", "-1", "'-1' is not a number of worktrees (0 for no pool)", "repository"),
    ("isopatch.baseTrees", "few", "'few' is not a number of base trees (0 keeps none)", "git -c"),
]


@pytest.mark.parametrize(("key", "value", "hint", "level"), BAD_VALUES)
def test_bad_config_value_is_fatal_128_and_creates_nothing(
    env, make_repo, key: str, value: str, hint: str, level: str
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    args = ["--", "touch", "x"]
    if level == "global":
        _set_global(env, key, value)
        run = isopatch(*args, cwd=repo, env=env)
    elif level == "repository":
        git("config", key, value, cwd=repo, env=env)
        before = repo_state(repo, env)
        run = isopatch(*args, cwd=repo, env=env)
    else:
        run = isopatch(*args, cwd=repo, env={**env, "GIT_CONFIG_PARAMETERS": f"'{key}={value}'"})
    assert run.returncode == 128
    assert run.out == ""
    assert run.err.splitlines() == [f"fatal: bad config value for '{key}'", f"hint: {hint}"]
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert repo_state(repo, env) == before


def test_bad_config_value_in_porcelain_and_when_a_flag_overrides_it(env, make_repo) -> None:
    repo = make_repo()
    git("config", "isopatch.timeout", "soon", cwd=repo, env=env)
    run = isopatch("--porcelain", "-z", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.stdout == (
        b"version 1\0error bad config value for 'isopatch.timeout'\0error-code bad-config\0"
        b"hint 'soon' is not a number of seconds (0 for no limit)\0"
    )
    # the flag decides: the configuration value is not needed, so not read
    run = isopatch("--porcelain", "--timeout", "5", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err


@pytest.mark.parametrize("where", ["repository", "global", "environment"])
def test_unreadable_configuration_is_fatal_128_bad_config(env, make_repo, where: str) -> None:
    """A malformed file, or `git -c` variables git cannot parse: one
    `fatal:` line and the `bad-config` code, never 'not a git repository'
    or a crash."""
    repo = make_repo()
    if where == "environment":
        env = {**env, "GIT_CONFIG_COUNT": "1"}  # and no GIT_CONFIG_KEY_0
    else:
        path = (
            repo / ".git" / "config" if where == "repository" else Path(env["HOME"]) / ".gitconfig"
        )
        with open(path, "a") as handle:
            handle.write("[isopatch\n")
    run = isopatch("--porcelain", "--", "touch", "x", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.startswith("fatal: ") and len(run.err.splitlines()) == 1, run.err
    assert "config" in run.err
    assert "not a git repository" not in run.err
    assert run.fields()["error-code"] == "bad-config"
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_python_api_reads_config_and_arguments_win(env, make_repo) -> None:
    from git_isopatch import capture

    repo = make_repo()
    git("config", "isopatch.keep", "yes", cwd=repo, env=env)
    result = capture(["true"], repo_path=str(repo))
    assert result.worktree_path is not None
    result = capture(["true"], repo_path=str(repo), keep=False)
    assert result.worktree_path is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, True),  # `[isopatch] keep` with no `=`
        ("", False),
        ("true", True),
        ("YES", True),
        ("On", True),
        ("1", True),
        ("2k", True),
        ("-1", True),
        ("false", False),
        ("No", False),
        ("off", False),
        ("0", False),
        (" 1", True),  # strtoimax skips leading space
        ("0x10", True),  # and reads C's bases
        ("0X0", False),
        ("017", True),
        ("-0", False),
        ("2097151k", True),
        ("2147483647", True),
    ],
)
def test_parse_bool_reads_what_git_reads(env, tmp_path: Path, value, expected) -> None:
    assert parse_bool("isopatch.keep", value) == Ok(expected)
    if value is not None:  # git itself agrees
        repo = tmp_path
        got = git("-c", f"isopatch.keep={value}", "config", "--type=bool", "isopatch.keep",
                  cwd=repo, env=env)  # fmt: skip
        assert got.strip() == (b"true" if expected else b"false")


@pytest.mark.parametrize(
    "value",
    ["maybe", "1x", " true", "true ", "1 ", " ", "08", "0x", "2097152k", "-2147483648", "1.0"],
)
def test_parse_bool_refuses_what_git_refuses(env, tmp_path: Path, value: str) -> None:
    assert isinstance(parse_bool("isopatch.keep", value), Err)
    refused = subprocess.run(
        ["git", "-c", f"isopatch.keep={value}", "config", "--type=bool", "isopatch.keep"],
        cwd=tmp_path, env=env, capture_output=True,
    )  # fmt: skip
    assert refused.returncode == 128, refused.stdout


@pytest.mark.parametrize("text", ["90", "1.5", ".5", "0", " 7 ", "2."])
def test_parse_seconds_accepts(text: str) -> None:
    assert parse_seconds(text) == float(text)


@pytest.mark.parametrize("text", ["", "-1", "1e3", "inf", "nan", "5m", "1_000", "0x10", "+3"])
def test_parse_seconds_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_seconds(text)


def test_every_config_key_is_documented() -> None:
    root = Path(__file__).resolve().parents[2]
    page = (root / "man" / "git-isopatch.rst").read_text()
    configuration = page.split("\nCONFIGURATION\n")[1].split("\nENVIRONMENT\n")[0]
    for row in CONFIG_KEYS:
        assert f"**{row.key}**" in configuration, row.key


def test_config_is_read_from_a_linked_worktree_too(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", "--detach", linked, cwd=repo, env=env)
    git("config", "isopatch.keep", "true", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "true", cwd=linked, env=env)
    assert _kept(run)
    assert os.path.isdir(run.fields()["worktree"])
