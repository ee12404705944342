"""A base tree is chosen by the settings that convert files on checkout
too: one made under other settings (``core.autocrlf``, ``core.eol``, an
attributes file outside the tree) serves no run, whose patch and view are
then what an unconfined run's are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_helpers import base_trees, git, isopatch


def _run(repo: Path, env: dict[str, str], where: str, *command: str) -> tuple[bytes, bytes]:
    """The patch and the output of ``command`` run ``where``."""
    run = isopatch("--porcelain", where, "--", *command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    return Path(fields["patch"]).read_bytes(), Path(fields["stdout"]).read_bytes()


def _attributes_file(home: Path, value: str) -> list[tuple[str, str]]:
    (home / "attributes").write_text(value)
    return [("core.attributesFile", str(home / "attributes")), ("core.eol", "crlf")]


CASES = {
    "autocrlf": lambda home, on: [("core.autocrlf", "true" if on else "false")],
    "eol": lambda home, on: [("core.eol", "crlf" if on else "lf")],
    "attributes-file": lambda home, on: _attributes_file(home, "*.txt text\n" if on else ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_base_tree_made_under_other_conversions_serves_no_run(env, make_repo, case) -> None:
    files = {"a.txt": "one\ntwo\n", "b.txt": "three\n"}
    if case == "eol":
        files[".gitattributes"] = "*.txt text\n"
    repo = make_repo(files)
    home = Path(env["HOME"])
    for key, value in CASES[case](home, True):
        git("config", "--global", key, value, cwd=repo, env=env)
    _, seen = _run(repo, env, "--sandbox", "cat", "a.txt")
    assert seen == b"one\r\ntwo\r\n"  # the base tree is checked out with CRLF
    for key, value in CASES[case](home, False):
        git("config", "--global", key, value, cwd=repo, env=env)
    for command in (["true"], ["touch", "a.txt"], ["sh", "-c", "echo x >> b.txt"]):
        expected = _run(repo, env, "--no-sandbox", *command)
        assert _run(repo, env, "--sandbox", *command) == expected
    patch, seen = _run(repo, env, "--sandbox", "cat", "a.txt")
    assert seen == b"one\ntwo\n" and patch == b""


def _settings_reads(trace: Path) -> list[list[str]]:
    """The ``git config`` processes of a run that read the conversion settings."""
    started = [json.loads(line) for line in trace.read_text().splitlines()]
    return [
        event["argv"]
        for event in started
        if event["event"] == "start" and "config" in event["argv"] and "core" in event["argv"][-1]
    ]


def _global_file(home: Path, repo: Path, env: dict[str, str], how: str) -> Path:
    """The file the conversion settings go to, read from git alone (libgit2
    reads neither): ``GIT_CONFIG_GLOBAL``, or a file the global
    configuration includes on ``hasconfig:remote.*.url``."""
    if how == "GIT_CONFIG_GLOBAL":
        env["GIT_CONFIG_GLOBAL"] = str(home / "elsewhere.gitconfig")
        return home / "elsewhere.gitconfig"
    git("remote", "add", "origin", "https://example.invalid/r.git", cwd=repo, env=env)
    (home / ".gitconfig").write_text(
        '[includeIf "hasconfig:remote.*.url:https://example.invalid/**"]\n\tpath = included\n'
    )
    return home / "included"


@pytest.mark.parametrize("how", ["GIT_CONFIG_GLOBAL", "hasconfig"])
def test_settings_only_git_reads_choose_the_base_tree_read_once(env, make_repo, how) -> None:
    repo = make_repo({"a.txt": "one\ntwo\n"})
    home = Path(env["HOME"])
    settings = _global_file(home, repo, env, how)
    trace = home / "trace"
    traced = {**env, "GIT_TRACE2_EVENT": str(trace)}
    for autocrlf, seen, trees in [("true", b"one\r\ntwo\r\n", 1), ("false", b"one\ntwo\n", 2)]:
        settings.write_text(f"[core]\n\tautocrlf = {autocrlf}\n")
        for _ in range(2):  # made (or chosen), then reused
            trace.unlink(missing_ok=True)
            assert _run(repo, traced, "--sandbox", "cat", "a.txt") == (b"", seen)
            assert len(base_trees(repo, env)) == trees
        assert len(_settings_reads(trace)) == 1, _settings_reads(trace)
        for command in (["touch", "a.txt"], ["sh", "-c", "echo x >> a.txt"]):
            assert _run(repo, env, "--sandbox", *command) == _run(
                repo, env, "--no-sandbox", *command
            )
    settings.write_text("[core]\n\tautocrlf = true\n")
    assert _run(repo, env, "--sandbox", "cat", "a.txt") == (b"", b"one\r\ntwo\r\n")
    assert len(base_trees(repo, env)) == 2  # the first one, chosen again


@pytest.mark.parametrize("reader", ["libgit2", "git"])
def test_a_setting_linked_worktrees_alone_read_is_read_in_the_run(env, make_repo, reader) -> None:
    """``includeIf "gitdir:..."`` can give the run's worktree other settings
    than the repository: the look reads them there, as an unconfined run's
    does (the command's ``core.ignoreCase`` pinned to what the file system
    does)."""
    repo = make_repo({"a.txt": "one\n"})
    home = Path(env["HOME"])
    if reader == "git":
        env["GIT_CONFIG_GLOBAL"] = str(home / "empty.gitconfig")
    (home / "worktrees-only").write_text("[core]\n\tignoreCase = true\n")
    condition = f"includeIf.gitdir:{repo}/.git/worktrees/**.path"
    git("config", condition, str(home / "worktrees-only"), cwd=repo, env=env)
    command = ("git", "config", "core.ignoreCase")
    expected = _run(repo, env, "--no-sandbox", *command)
    assert expected == (b"", b"false\n")
    for _ in range(2):
        assert _run(repo, env, "--sandbox", *command) == expected


def test_a_relative_attributes_file_is_the_worktrees_own(env, make_repo, tmp_path) -> None:
    """git reads a relative ``core.attributesFile`` from the top of the
    worktree it runs in: in a run's, the commit's file (here none), not
    the copy in the checkout the run starts from.  Runs from the checkout,
    a folder of it and a linked worktree of the user's each with a copy
    of their own go over one base tree, with an unconfined run's view and
    patch."""
    repo = make_repo({"a.txt": "one\ntwo\n", "sub/b.txt": "three\n"})
    git("config", "core.attributesFile", "local.attributes", cwd=repo, env=env)
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", "--detach", str(linked), cwd=repo, env=env)
    (repo / "local.attributes").write_text("*.txt text eol=crlf\n")
    (linked / "local.attributes").write_text("*.txt text eol=lf\n")
    for where in (repo, repo / "sub", linked, linked / "sub"):
        name = "b.txt" if where.name == "sub" else "a.txt"
        view = ["sh", "-c", f"cat {name}; echo x >> {name}"]
        expected = _run(where, env, "--no-sandbox", *view)
        assert expected[1] in (b"one\ntwo\n", b"three\n")
        assert _run(where, env, "--sandbox", *view) == expected
        assert len(base_trees(repo, env)) == 1
    (repo / "local.attributes").write_text("*.txt -text\n")  # the user's copy changes
    assert _run(repo, env, "--sandbox", "cat", "a.txt") == (b"", b"one\ntwo\n")
    assert len(base_trees(repo, env)) == 1


def test_git_isopatch_and_git_dash_isopatch_share_one_base_tree(env, make_repo) -> None:
    """``git isopatch`` runs with git's exec path first in ``PATH``, which
    git puts first for every program it runs anyway; ``git-isopatch`` (as
    the MCP server and scripts start it) without: both take one base tree."""
    repo = make_repo({"a.txt": "one\n"})
    for via_git in (True, False, True):
        run = isopatch("-q", "--sandbox", "--", "true", cwd=repo, env=env, via_git=via_git)
        assert run.returncode == 0, run.err
    assert len(base_trees(repo, env)) == 1


def _lfs_repo(env, make_repo, tmp_path: Path) -> Path:
    """git-lfs installed for the user; ``data.bin`` stored by it, its
    content in the repository's own LFS store."""
    git("lfs", "install", "--skip-repo", cwd=tmp_path, env=env)
    return make_repo(
        {".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n", "data.bin": "content\n"}
    )


@pytest.mark.needs("git-lfs")
def test_a_base_tree_made_under_other_lfs_settings_serves_no_run(env, make_repo, tmp_path) -> None:
    """git-lfs leaves a path ``lfs.fetchexclude`` names as its pointer on
    checkout: a base tree smudged before the user set it serves no run."""
    repo = _lfs_repo(env, make_repo, tmp_path)
    _, seen = _run(repo, env, "--sandbox", "cat", "data.bin")
    assert seen == b"content\n"
    git("config", "lfs.fetchexclude", "*", cwd=repo, env=env)
    command = ["sh", "-c", "cat data.bin > seen.txt"]
    expected = _run(repo, env, "--no-sandbox", *command)
    assert b"+version https://git-lfs.github.com/spec/v1\n" in expected[0]
    assert _run(repo, env, "--sandbox", *command) == expected


@pytest.mark.needs("git-lfs")
def test_a_base_tree_moved_to_another_lfsconfig_is_written_again(env, make_repo, tmp_path) -> None:
    """A ``.lfsconfig`` that differs between two commits changes how
    git-lfs checks out files neither changes, as a ``.gitattributes``
    does: the base tree moved there holds what a checkout there holds."""
    repo = _lfs_repo(env, make_repo, tmp_path)
    (repo / ".lfsconfig").write_text("[lfs]\n\tfetchexclude = *\n")
    git("add", ".lfsconfig", cwd=repo, env=env)
    git("commit", "-q", "-m", "no LFS content on checkout", cwd=repo, env=env)
    made = isopatch("--porcelain", "--base", "HEAD~", "--", "cat", "data.bin", cwd=repo, env=env)
    assert made.returncode == 0 and made.fields()["sandbox"] == "true", made.err
    assert Path(made.fields()["stdout"]).read_bytes() == b"content\n"
    command = ["sh", "-c", "cat data.bin > seen.txt"]
    expected = _run(repo, env, "--no-sandbox", *command)
    assert b"+version https://git-lfs.github.com/spec/v1\n" in expected[0]
    assert _run(repo, env, "--sandbox", *command) == expected


def _program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"#!/bin/sh\n{script}\n")
    (folder / name).chmod(0o755)
    return folder


def test_a_folder_put_first_on_path_makes_no_base_tree(env, make_repo, tmp_path) -> None:
    """A virtual environment activated between two runs: nothing of a
    checkout changes, so the base tree serves both."""
    repo = make_repo({"a.txt": "one\n"})
    venv = _program(tmp_path / "venv" / "bin", "python", "exit 0")
    for path in (env["PATH"], f"{venv}:{env['PATH']}"):
        assert _run(repo, {**env, "PATH": path}, "--sandbox", "true") == (b"", b"")
    assert len(base_trees(repo, env)) == 1


def test_a_filter_program_found_elsewhere_on_path_makes_its_base_tree(
    env, make_repo, tmp_path
) -> None:
    """The smudge filter's program as PATH finds it chooses the base tree:
    the command sees what an unconfined run's checkout holds."""
    repo = make_repo({".gitattributes": "*.txt filter=up\n", "a.txt": "one\n"})
    git("config", "filter.up.smudge", "up", cwd=repo, env=env)
    git("config", "filter.up.clean", "cat", cwd=repo, env=env)
    upper = _program(tmp_path / "upper", "up", "tr a-z A-Z")
    zeros = _program(tmp_path / "zeros", "up", "sed s/o/0/g")
    for folder, seen in ((upper, b"ONE\n"), (zeros, b"0ne\n"), (upper, b"ONE\n")):
        moved = {**env, "PATH": f"{folder}:{env['PATH']}"}
        assert _run(repo, moved, "--no-sandbox", "cat", "a.txt") == (b"", seen)
        assert _run(repo, moved, "--sandbox", "cat", "a.txt") == (b"", seen)
    assert len(base_trees(repo, env)) == 2


def test_a_tracked_attributes_file_is_read_by_no_base_trees_checkout(env, make_repo) -> None:
    """A relative ``core.attributesFile`` names a file git reads from the
    top of the worktree on its first look at an attribute: a new checkout
    (``git worktree add``) has not written it yet and converts nothing by
    it; a base tree moved from a commit that holds it would convert the
    paths it writes by the old commit's rules.  Runs at each commit see
    and capture what unconfined ones do."""
    repo = make_repo({"a.txt": "one\n", "attributes": "*.txt text eol=crlf\n"})
    git("config", "core.attributesFile", "attributes", cwd=repo, env=env)
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "attributes").write_text("")
    git("commit", "-q", "-am", "no conversion", cwd=repo, env=env)
    command = ["sh", "-c", "cat a.txt; echo x >> a.txt"]
    for base in ("main~", "main"):
        git("checkout", "-q", "--detach", base, cwd=repo, env=env)
        expected = _run(repo, env, "--no-sandbox", *command)
        assert b"\r" not in expected[1]
        assert _run(repo, env, "--sandbox", *command) == expected
