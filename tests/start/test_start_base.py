"""Wherever git works, git-isopatch works, or says what git says (design:
procedure steps 1-2).  libgit2 (pygit2) refuses or lacks things git
accepts: an extension it does not know, a revision form it lacks, a
repository another user owns; then git itself (``git rev-parse``) decides,
and when git refuses too, its own message (and its advice, as ``hint:``
lines) is what the user reads, under ``fatal:``, with a stable error-code.
A base with control characters is one escaped line."""

from __future__ import annotations

from pathlib import Path

import pytest
from base_helpers import (
    colliding,
    commit_body,
    commit_of,
    commit_template,
    owned_by_another_user,
    write_object,
)
from repo_helpers import (
    git,
    isopatch,
    repo_state,
)


def _assert_fatal(run, code: str) -> None:
    assert run.returncode == 128, run.err
    assert "Traceback" not in run.err and "report it" not in run.err, run.err
    assert run.err.startswith("fatal: "), run.err
    assert run.fields()["error-code"] == code


def _new_file_command() -> tuple[str, ...]:
    return ("sh", "-c", "echo new > new.txt")


def _clone_with_upstream(env, make_repo, tmp_path: Path) -> Path:
    """A clone whose ``main`` tracks ``origin/main`` and is one commit ahead."""
    upstream = make_repo(name="upstream")
    clone = tmp_path / "clone"
    git("clone", "-q", upstream, clone, cwd=tmp_path, env=env)
    (clone / "ahead").write_text("ahead\n")
    git("add", "ahead", cwd=clone, env=env)
    git("commit", "-q", "-m", "ahead", cwd=clone, env=env)
    return clone


@pytest.mark.hostile
@pytest.mark.parametrize("base", ["HEAD\nx", "ma\x01in"])
def test_a_base_with_control_characters_is_one_escaped_line(env, make_repo, base: str) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", f"--base={base}", "--", "true", cwd=repo, env=env)
    _assert_fatal(run, "unknown-revision")
    assert run.err.count("\n") == 1 and repr(base) in run.err
    assert not any(ord(c) < 0x20 for c in run.err.rstrip("\n"))


@pytest.mark.parametrize(
    ("extension", "value"),
    [("partialClone", "origin"), ("worktreeConfig", "true"), ("preciousObjects", "true")],
)
def test_an_extension_libgit2_does_not_know(env, make_repo, extension: str, value: str) -> None:
    """``extensions.partialClone`` under repositoryformatversion 1 (what a
    partial clone has), and the other extensions git 2.39 knows: git works,
    so git-isopatch works."""
    repo = make_repo()
    git("config", "core.repositoryformatversion", "1", cwd=repo, env=env)
    git("config", f"extensions.{extension}", value, cwd=repo, env=env)
    before = repo_state(repo, env)
    run = isopatch("--porcelain", "--", *_new_file_command(), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["base"] == commit_of(repo, env, "HEAD")
    assert fields["files"] == "1"
    assert b"+new" in Path(fields["patch"]).read_bytes()
    assert repo_state(repo, env) == before


def test_an_extension_libgit2_does_not_know_from_a_subfolder(env, make_repo) -> None:
    """The same repository, started in a subfolder: git's answer gives the
    prefix, and the command runs in the mirrored folder."""
    repo = make_repo({"sub/file": "x\n"})
    git("config", "core.repositoryformatversion", "1", cwd=repo, env=env)
    git("config", "extensions.partialClone", "origin", cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "sh", "-c", "pwd > here", cwd=repo / "sub", env=env)
    assert run.returncode == 0, run.err
    assert b"+++ b/sub/here" in Path(run.fields()["patch"]).read_bytes()


def test_an_extension_git_does_not_know_either(env, make_repo) -> None:
    """An extension git refuses too: git's own message, not "not a git
    repository"."""
    repo = make_repo()
    git("config", "core.repositoryformatversion", "1", cwd=repo, env=env)
    git("config", "extensions.noSuchThing", "true", cwd=repo, env=env)
    said = git("status", cwd=repo, env={**env, "LC_ALL": "C"}, check=False)
    assert said == b""
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.splitlines() == [
        "fatal: unknown repository extension found:",
        "hint:   nosuchthing",
    ]
    assert "not a git repository" not in run.err
    assert run.fields()["error-code"] == "unsupported-repository"


@pytest.mark.parametrize("form", ["@{push}", "main@{push}"])
def test_push_revision(env, make_repo, tmp_path: Path, form: str) -> None:
    """``@{push}`` (libgit2 lacks it): the commit git names."""
    clone = _clone_with_upstream(env, make_repo, tmp_path)
    git("config", "push.default", "current", cwd=clone, env=env)
    expected = commit_of(clone, env, form)
    assert expected != commit_of(clone, env, "HEAD")
    run = isopatch("--porcelain", "--base", form, "--", "true", cwd=clone, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["base"] == expected


@pytest.mark.parametrize(
    "form", ["@{upstream}", "@{u}", "HEAD^{/^base}", ":/ahead", "@{1}", "HEAD@{1}", "main~1"]
)
def test_revision_forms_resolve_as_git_does(env, make_repo, tmp_path: Path, form: str) -> None:
    clone = _clone_with_upstream(env, make_repo, tmp_path)
    run = isopatch("--porcelain", "--base", form, "--", "true", cwd=clone, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["base"] == commit_of(clone, env, form)


def test_a_revision_git_refuses_gets_gits_message(env, make_repo) -> None:
    """No upstream: git says so, and so does git-isopatch."""
    repo = make_repo()
    run = isopatch("--porcelain", "--base", "@{upstream}", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.splitlines() == ["fatal: no upstream configured for branch 'main'"]
    assert run.fields()["error-code"] == "unknown-revision"


def test_an_unknown_revision(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--base", "no-such-branch", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.splitlines() == ["fatal: unknown revision 'no-such-branch'"]


def test_a_tree_is_not_a_commit(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--base", "HEAD^{tree}", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.splitlines() == ["fatal: 'HEAD^{tree}' is not a commit"]


def test_a_short_id_shared_with_a_blob_names_the_commit(env, make_repo) -> None:
    """git disambiguates a base as a commit-ish (``git worktree add``,
    ``rev-parse X^{commit}``); libgit2 calls it ambiguous."""
    repo = make_repo()
    commit = commit_of(repo, env, "HEAD")
    prefix = commit[:4]
    write_object(repo, env, "blob", colliding("blob", lambda n: b"%d\n" % n, prefix))
    run = isopatch("--porcelain", "--base", prefix, "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["base"] == commit


def test_a_short_id_shared_by_two_commits_is_refused_as_git_does(env, make_repo) -> None:
    repo = make_repo()
    first = write_object(repo, env, "commit", commit_body(repo, env, "first"))
    prefix = first[:4]
    template = commit_template(repo, env)
    body = colliding("commit", lambda n: template % b"second %d" % n, prefix)
    second = write_object(repo, env, "commit", body)
    said = git("rev-parse", "--verify", prefix, cwd=repo, env={**env, "LC_ALL": "C"}, check=False)
    assert said == b""
    run = isopatch("--porcelain", "--base", prefix, "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    lines = run.err.splitlines()
    assert lines[0] == f"fatal: short object ID {prefix} is ambiguous"
    assert lines[1] == "hint: The candidates are:"
    candidates = "\n".join(lines[2:])
    assert first[:7] in candidates and second[:7] in candidates
    assert all(line.startswith("hint:   ") for line in lines[2:]), lines
    assert run.fields()["error-code"] == "ambiguous-revision"


def test_dubious_ownership_says_what_git_says(env, make_repo) -> None:
    """git 2.39 refuses a repository whose owner is not the effective user,
    root included (safe.directory in git-config(1)); its advice becomes
    ``hint:`` lines."""
    repo = owned_by_another_user(env, make_repo)
    run = isopatch("--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128
    assert run.err.splitlines() == [
        f"fatal: detected dubious ownership in repository at '{repo}'",
        "hint: To add an exception for this directory, call:",
        f"hint:   git config --global --add safe.directory {repo}",
    ]
    assert run.fields()["error-code"] == "dubious-ownership"


def test_safe_directory_lets_git_isopatch_work(env, make_repo) -> None:
    """``git -c safe.directory=<repo> isopatch``, as for any git command."""
    repo = owned_by_another_user(env, make_repo)
    run = isopatch(
        "--porcelain",
        "--",
        *_new_file_command(),
        cwd=repo,
        env=env,
        git_options=("-c", f"safe.directory={repo}"),
    )
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "1"
    trusted = {**env, "GIT_CONFIG_PARAMETERS": f"'safe.directory={repo}'"}
    assert run.fields()["base"] == commit_of(repo, trusted, "HEAD")


def test_safe_directory_in_the_global_configuration(env, make_repo) -> None:
    repo = owned_by_another_user(env, make_repo)
    git("config", "--global", "--add", "safe.directory", repo, cwd=repo.parent, env=env)
    run = isopatch("--porcelain", "--base", "HEAD", "--", *_new_file_command(), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "1"


def test_an_unborn_head_names_the_options_that_start_from_uncommitted_work(
    env, tmp_path: Path
) -> None:
    """A repository without a commit yet: ``HEAD`` is no base, and the
    fatal line's hint names ``--include-uncommitted``, which starts from
    the work tree (and ``--staged``), and those work."""
    repo = tmp_path / "new"
    git("init", "-q", repo, cwd=tmp_path, env=env)
    (repo / "a.txt").write_text("a\n")
    before = repo_state(repo, env)
    run = isopatch("--", "sh", "-c", "echo b >> a.txt", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert run.err.splitlines()[0] == "fatal: unborn HEAD: 'HEAD' has no commits yet"
    hints = [line for line in run.err.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 1 and "--include-uncommitted" in hints[0], run.err
    assert repo_state(repo, env) == before
    done = isopatch("--include-uncommitted", "--", "sh", "-c", "echo b >> a.txt", cwd=repo, env=env)
    assert done.returncode == 0, done.err
    named = isopatch("--base", "main", "--", "true", cwd=repo, env=env)
    assert named.returncode == 128
    assert "--include-uncommitted" not in named.err, named.err
