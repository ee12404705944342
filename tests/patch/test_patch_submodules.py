"""Submodules (issue 10, kind C).

Without ``--recurse-submodules`` the worktree's submodule folders are empty,
the patch holds submodules as gitlinks only, a dirty submodule is no change
(no ``Subproject commit ...-dirty`` line, no ``--exit-code`` 1), and a
warning names a submodule whose content changed.  With it, the submodules
the user has checked out are populated from the user's own repositories (no
network), and the changes inside them are in the patch as files under the
submodule's path, which ``git apply`` at the top of a checkout with its
submodules initialised reproduces.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, repo_state, tree_manifest, write_tree

from git_isopatch import capture

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")

#: Changes inside the submodule ``sub``: an edit, a new file, a binary
#: change, a deletion, a mode change; and one in the superproject.
EDIT = (
    "echo more >> sub/s && echo n > sub/new && printf 'b\\000\\001' > sub/bin && "
    "rm sub/gone && chmod +x sub/run && echo z >> top"
)


def _superproject(make_repo, tmp_path: Path, env) -> Path:
    """``repo`` with the submodule ``sub`` checked out (absorbed into
    ``.git/modules/sub``) and ``other`` declared but not initialised."""
    for name, files in {
        "sub-up": {"s": "s\n", "bin": b"\x00\x01\x02", "gone": "g\n", "run": "#!/bin/sh\n"},
        "other-up": {"o": "o\n"},
    }.items():
        make_repo(files, name=name)
    repo = make_repo({"top": "t\n"})
    for name in ("sub", "other"):
        url = tmp_path / f"{name}-up"
        git(*FILE_PROTOCOL, "submodule", "add", "-q", url, name, cwd=repo, env=env)
    git("commit", "-q", "-m", "submodules", cwd=repo, env=env)
    git("submodule", "deinit", "-q", "other", cwd=repo, env=env)
    assert (repo / ".git" / "modules" / "sub").is_dir()
    return repo


def _clean_checkout(repo: Path, dest: Path, env) -> Path:
    """A clone of ``repo`` with ``sub`` initialised: where a patch is applied."""
    git("clone", "-q", repo, dest, cwd=repo.parent, env=env)
    url = repo / ".git" / "modules" / "sub"
    git(*FILE_PROTOCOL, "-c", f"submodule.sub.url={url}", "submodule", "update", "--init", "-q",
        "sub", cwd=dest, env=env)  # fmt: skip
    return dest


def _states(repo: Path, env) -> tuple[dict, dict]:
    """The user's superproject and submodule, as git-isopatch must leave them."""
    return repo_state(repo, env), repo_state(repo / "sub", env)


def test_recurse_submodules_populates_and_captures_inside_them(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    before = _states(repo, env)
    run = isopatch(
        "--recurse-submodules", "--porcelain", "--keep", "--",
        "sh", "-c", f"cat sub/s > seen && test -z \"$(ls -A other)\" && {EDIT}",
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert run.err == ""
    fields = run.fields()
    assert fields["files"] == "7"
    patch = Path(fields["patch"]).read_bytes()
    assert b"Subproject commit" not in patch
    assert b"diff --git a/sub/s b/sub/s" in patch
    worktree = Path(fields["worktree"])
    applied = _clean_checkout(repo, tmp_path / "clean", env)
    git("apply", fields["patch"], cwd=applied, env=env)
    for folder in ("", "sub"):
        expected = tree_manifest(worktree / folder, exclude=(".git", "sub", "other"))
        assert tree_manifest(applied / folder, exclude=(".git", "sub", "other")) == expected
    assert (applied / "seen").read_text() == "s\n"
    assert os.access(applied / "sub" / "run", os.X_OK)
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert not (repo / ".git" / "worktrees").exists()
    assert _states(repo, env) == before


def test_a_commit_inside_a_submodule_is_captured_as_its_content(env, make_repo, tmp_path) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    before = _states(repo, env)
    run = isopatch(
        "--recurse-submodules", "--porcelain", "--",
        "sh", "-c", "cd sub && echo c >> s && git commit -q -am inside",
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"Subproject commit" not in patch
    assert b"+++ b/sub/s" in patch and b"+c" in patch
    assert _states(repo, env) == before


def test_the_configuration_turns_it_on_and_the_flag_off(env, make_repo, tmp_path) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    script = "echo c >> sub/s"
    on = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env,
                  git_options=("-c", "isopatch.recurseSubmodules=true"))  # fmt: skip
    assert on.returncode == 0, on.err
    assert on.fields()["files"] == "1"
    off = isopatch(
        "--no-recurse-submodules", "--porcelain", "--", "sh", "-c", script,
        cwd=repo, env=env, git_options=("-c", "isopatch.recurseSubmodules=yes"),
    )  # fmt: skip
    assert off.returncode == 0, off.err
    assert off.fields()["files"] == "0"


def test_the_python_api_takes_it(env, make_repo, tmp_path) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    result = capture(["sh", "-c", "echo c >> sub/s"], repo_path=str(repo), recurse_submodules=True)
    assert result.files == 1
    assert b"+++ b/sub/s" in Path(result.patch_path).read_bytes()


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("mkdir -p sub && echo n > sub/new", id="fills-the-empty-folder"),
        pytest.param(
            "git -c protocol.file.allow=always submodule update -q sub && echo m >> sub/s",
            id="checks-it-out-itself",
        ),
    ],
)
def test_without_the_flag_a_dirty_submodule_is_no_change_and_is_named(
    env, make_repo, tmp_path, script
) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    before = _states(repo, env)
    run = isopatch("--exit-code", "--stdout", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert b"Subproject commit" not in run.stdout
    assert run.stdout == b""
    assert run.err.splitlines()[0] == (
        "warning: submodule 'sub' has changes that are not in the patch "
        "(--recurse-submodules captures them)"
    )
    assert "other" not in run.err
    assert _states(repo, env) == before


def test_without_the_flag_a_new_submodule_commit_stays_a_gitlink(env, make_repo, tmp_path) -> None:
    """Checking out another commit in a submodule is a gitlink change, which
    ``git apply`` takes (it only checks the folder) and ``--index`` records."""
    repo = _superproject(make_repo, tmp_path, env)
    up = tmp_path / "sub-up"
    write_tree(up, {"s": "newer\n"})
    git("commit", "-q", "-am", "newer", cwd=up, env=env)
    script = "git -c protocol.file.allow=always submodule update -q --remote sub"
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    newer = git("rev-parse", "HEAD", cwd=up, env=env).decode().strip()
    assert f"+Subproject commit {newer}\n".encode() in patch
    assert b"-dirty" not in patch


def test_a_commit_the_users_submodule_lacks_is_fatal(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    up = tmp_path / "sub-up"
    git("commit", "-q", "--allow-empty", "-m", "later", cwd=up, env=env)
    later = git("rev-parse", "HEAD", cwd=up, env=env).decode().strip()
    git("update-index", "--cacheinfo", f"160000,{later},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "bump", cwd=repo, env=env)
    up.rename(tmp_path / "upstream-gone")  # and no network either
    before = repo_state(repo, env)
    run = isopatch("--recurse-submodules", "--porcelain", "--", "true", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert run.err.startswith("fatal: could not populate the submodules from your own: ")
    assert "Traceback" not in run.err
    assert run.fields()["error-code"] == "submodule-failed"
    assert repo_state(repo, env) == before
    assert not (repo / ".git" / "worktrees").exists()


def test_a_pooled_worktree_is_populated_again(env, make_repo, tmp_path) -> None:
    """With ``isopatch.pool`` a returned worktree is reused: each run sees
    the submodule at its recorded commit, and captures only its own change;
    a run without the flag then sees an empty submodule folder."""
    repo = _superproject(make_repo, tmp_path, env)
    pool = ("-c", "isopatch.pool=1")
    script = 'test "$(cat sub/s)" = s && echo more >> sub/s && echo n > sub/new'
    for _ in range(2):
        run = isopatch("--recurse-submodules", "--porcelain", "--", "sh", "-c", script,
                       cwd=repo, env=env, git_options=pool)  # fmt: skip
        assert run.returncode == 0, run.err
        assert run.fields()["files"] == "2"
    plain = isopatch("--porcelain", "--", "sh", "-c", 'test -z "$(ls -A sub)"',
                     cwd=repo, env=env, git_options=pool)  # fmt: skip
    assert plain.returncode == 0, plain.err
    assert plain.fields()["files"] == "0"


def test_the_summary_lists_the_files_inside_submodules(env, make_repo, tmp_path) -> None:
    repo = _superproject(make_repo, tmp_path, env)
    run = isopatch("--recurse-submodules", "--", "sh", "-c", "echo c >> sub/s && echo z >> top",
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 0, run.err
    names = [line.split("|")[0].strip() for line in run.err.splitlines() if "|" in line]
    assert sorted(names) == ["sub/s", "top"]
