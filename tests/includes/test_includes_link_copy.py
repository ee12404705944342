"""Files git does not track, brought into the worktree (design: procedure
step 4): ``--link``, ``--copy``, ``isopatch.link``/``isopatch.copy`` and
``.worktreeinclude``; paths and links that lead outside the repository are
refused or replaced before anything is made, and linked or copied paths
never reach the patch."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from repo_helpers import (
    apply_to_clean_checkout,
    base_trees,
    git,
    isopatch,
    registered_worktrees,
    repo_state,
    write_tree,
)


# -- a copy never leads outside the worktree --------------------------------
def _config_with_links(repo: Path, tmp_path: Path) -> None:
    """Ignored ``config/`` with an absolute link into the user's checkout,
    a relative one that climbs out of the repository, and one inside."""
    (repo / "mine.txt").write_text("the user's own\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    config = repo / "config"
    config.mkdir()
    (config / "a.txt").write_text("a\n")
    os.symlink(repo / "mine.txt", config / "absolute")
    os.symlink("../../outside.txt", config / "climbs")
    os.symlink("a.txt", config / "inner")


#: A command that needs its dependency: it runs a script from node_modules.
TOOL = "#!/bin/sh\nprintf 'formatted by tool\\n' > src/app.txt\n"


def _node_repo(make_repo, gitignore: str = "node_modules/\n") -> Path:
    repo = make_repo({".gitignore": gitignore, "src/app.txt": "unformatted\n"})
    write_tree(repo, {"node_modules/tool/run": TOOL, "node_modules/tool/data": "x\n"})
    os.chmod(repo / "node_modules/tool/run", 0o755)
    return repo


def _patch(run) -> bytes:
    assert run.returncode == 0, run.err
    return Path(run.fields()["patch"]).read_bytes()


def _worktree_folders(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["TMPDIR"]).glob("git-isopatch-*"))


def _bad_input_repo(make_repo, tmp_path: Path, env: dict[str, str]) -> Path:
    repo = make_repo({".gitignore": "ignored/\nescape\nold/\n", "src/a.txt": "a\n", "old": "o\n"})
    git("rm", "-q", "old", cwd=repo, env=env)
    git("commit", "-q", "-m", "'old' goes, and becomes an ignored folder", cwd=repo, env=env)
    outside = tmp_path / "outside"
    write_tree(outside, {"secret": "s\n"})
    write_tree(
        repo,
        {
            "ignored/file": "f\n",
            "escape": f"symlink:{outside}",
            "ignored/up": f"symlink:{outside}",
            "ignored/gitdir": "symlink:../.git",
            "old/x": "x\n",
        },
    )
    return repo


def test_copy_replaces_links_that_lead_outside_with_what_they_point_to(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "config/\nmine.txt\n"})
    _config_with_links(repo, tmp_path)
    script = (
        "cat config/absolute config/climbs; readlink config/inner; "
        "test ! -L config/absolute && test ! -L config/climbs && "
        "echo changed > config/absolute && echo changed > config/climbs"
    )
    run = isopatch("--porcelain", "--copy", "config", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text() == "the user's own\noutside\na.txt\n"
    assert (repo / "mine.txt").read_text() == "the user's own\n"
    assert (tmp_path / "outside.txt").read_text() == "outside\n"
    assert os.readlink(repo / "config" / "absolute") == str(repo / "mine.txt")


def test_copy_of_a_folder_link_leading_outside_copies_the_folder(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "deps/\n"})
    shared = tmp_path / "shared"
    (shared / "pkg").mkdir(parents=True)
    (shared / "pkg" / "mod.txt").write_text("shared\n")
    (repo / "deps").mkdir()
    os.symlink(shared, repo / "deps" / "shared")
    run = isopatch(
        "--copy",
        "deps",
        "--",
        "sh",
        "-c",
        "echo changed > deps/shared/pkg/mod.txt",
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.err
    assert (shared / "pkg" / "mod.txt").read_text() == "shared\n"


def test_copy_with_a_dangling_link_leading_outside_is_refused(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "config/\n"})
    (repo / "config").mkdir()
    os.symlink(tmp_path / "nowhere", repo / "config" / "gone")
    before = repo_state(repo, env)
    run = isopatch("--json", "--copy", "config", "--", "touch", "x", cwd=repo, env=env)
    assert run.returncode == 128
    assert json.loads(run.out)["error-code"] == "bad-include-path"
    assert run.err == (
        "fatal: --copy 'config': the symbolic link 'config/gone' leads outside the "
        "worktree and points nowhere\n"
    )
    assert repo_state(repo, env) == before
    assert registered_worktrees(repo, env) == []


def test_worktreeinclude_entry_that_cannot_be_copied_is_skipped_with_a_warning(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "config/\n.env\n", ".worktreeinclude": "config/\n.env\n"})
    (repo / "config").mkdir()
    os.symlink(tmp_path / "nowhere", repo / "config" / "gone")
    (repo / ".env").write_text("KEY=1\n")
    run = isopatch(
        "--porcelain", "--", "sh", "-c", "test ! -e config && cat .env", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert run.err == (
        "warning: .worktreeinclude 'config': the symbolic link 'config/gone' leads outside "
        "the worktree and points nowhere; skipped\n"
    )
    assert Path(run.fields()["stdout"]).read_text() == "KEY=1\n"


def test_without_link_the_dependency_is_missing(env, make_repo, no_leftovers) -> None:
    repo = _node_repo(make_repo)
    run = isopatch("--porcelain", "--", "node_modules/tool/run", cwd=repo, env=env)
    assert run.fields()["exit"] == "127"


def test_link_brings_in_the_dependency_and_leaves_it_out_of_the_patch(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    repo = _node_repo(make_repo)
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        "--link",
        "node_modules",
        "--",
        "sh",
        "-c",
        "test -L node_modules && node_modules/tool/run",
        cwd=repo,
        env=env,
    )
    patch = _patch(run)
    assert repo_state(repo, env) == before
    assert b"node_modules" not in patch
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "c", env
    )
    assert (checkout / "src/app.txt").read_text() == "formatted by tool\n"


@pytest.mark.parametrize(
    "gitignore", ["node_modules/\n", "", "!node_modules\n"], ids=["dir-pattern", "none", "negated"]
)
def test_linked_path_stays_out_of_the_patch_whatever_gitignore_says(
    env, make_repo, gitignore
) -> None:
    """A ``node_modules/`` pattern does not match a symbolic link, and a
    command may even ``git add`` it: it is still not in the patch."""
    repo = _node_repo(make_repo, gitignore)
    if not gitignore.startswith("node_modules/"):
        (repo / ".gitignore").write_text("")
    for command in (["true"], ["git", "add", "-A"]):
        run = isopatch("--porcelain", "--link", "node_modules", "--", *command, cwd=repo, env=env)
        assert b"node_modules" not in _patch(run), command


@pytest.mark.parametrize("gitignore", ["node_modules\n.env\n", "/node_modules\nconf/\n.env\n"])
def test_ignored_linked_and_copied_paths_beside_new_files(env, make_repo, tmp_path, gitignore):
    """Paths brought in that ``.gitignore`` matches (npm's usual
    ``node_modules``, a ``.env``), while the command makes new files and a
    new folder: the new ones are in the patch, the brought-in ones are not,
    and git's refusal of an ignored path never stops the run."""
    repo = _node_repo(make_repo, gitignore)
    write_tree(repo, {".env": "SECRET=1\n", "conf/local": "x\n"})
    run = isopatch(
        "--porcelain", "--link", "node_modules", "--copy", ".env", "--copy", "conf",
        "--", "sh", "-c", "echo n > new && mkdir -p fresh/deep && echo f > fresh/deep/f",
        cwd=repo, env=env,
    )  # fmt: skip
    patch = _patch(run)
    assert run.fields()["files"] == "2", run.err
    assert b"+++ b/new" in patch and b"+++ b/fresh/deep/f" in patch
    for brought in (b"node_modules", b".env", b"conf/"):
        assert brought not in patch
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "c", env
    )
    assert (checkout / "fresh/deep/f").read_text() == "f\n"


def test_a_path_linked_into_a_new_folder_stays_out_of_the_patch(env, make_repo) -> None:
    """``--link`` into a folder the base does not have: git-isopatch makes
    the folder, the command adds files beside the link; the folder is not
    given to git add whole (it would take the link)."""
    repo = _node_repo(make_repo, "")
    run = isopatch(
        "--porcelain", "--link", "web/node_modules", "--",
        "sh", "-c", "echo page > web/index.html",
        cwd=repo, env=env,
    )  # fmt: skip
    assert "does not exist" in run.err  # the source web/node_modules is missing
    write_tree(repo, {"web/node_modules/dep": "d\n"})
    run = isopatch(
        "--porcelain", "--link", "web/node_modules", "--",
        "sh", "-c", "echo page > web/index.html",
        cwd=repo, env=env,
    )  # fmt: skip
    patch = _patch(run)
    assert b"+++ b/web/index.html" in patch and b"node_modules" not in patch


def test_writes_through_a_link_reach_the_original_only_unconfined(env, make_repo) -> None:
    """A link is the original to an unconfined command; in the sandbox its
    writes are discarded, as every write outside the worktree: ``-h`` says
    so, as the manual does."""
    repo = _node_repo(make_repo)
    for confinement, reached in (("--sandbox", False), ("--no-sandbox", True)):
        write = ["sh", "-c", f"echo cached > node_modules/cache{confinement}"]
        run = isopatch(confinement, "--link", "node_modules", "--", *write, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        assert (repo / f"node_modules/cache{confinement}").exists() == reached
    usage = isopatch("-h", cwd=repo, env=env).out
    (line,) = [line for line in usage.splitlines() if line.startswith("    --link ")]
    assert "writes through it reach the original only unconfined" in line, line


def test_copy_is_independent_of_the_original(env, make_repo, tmp_path, no_leftovers) -> None:
    repo = make_repo({".gitignore": ".env\nconf.d/\n", "out.txt": "\n"})
    write_tree(
        repo,
        {
            ".env": "TOKEN=1\n",
            "conf.d/a.conf": "a\n",
            "conf.d/deep/b.conf": "b\n",
            "conf.d/l": "symlink:a.conf",
        },
    )
    before = repo_state(repo, env)
    script = (
        "cat .env conf.d/a.conf conf.d/deep/b.conf > out.txt; readlink conf.d/l >> out.txt; "
        "test ! -L .env && test ! -L conf.d && echo TOKEN=2 > .env && rm conf.d/a.conf"
    )
    run = isopatch(
        "--porcelain",
        "--copy",
        ".env",
        "--copy",
        "conf.d",
        "--",
        "sh",
        "-c",
        script,
        cwd=repo,
        env=env,
    )
    patch = _patch(run)
    assert repo_state(repo, env) == before
    assert b".env" not in patch and b"conf.d" not in patch
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "c", env
    )
    assert (checkout / "out.txt").read_text() == "TOKEN=1\na\nb\na.conf\n"


def test_worktreeinclude_copies_the_ignored_files_it_names(env, make_repo, tmp_path) -> None:
    repo = make_repo(
        {
            ".gitignore": ".env\n*.local\nbuild/\n",
            ".worktreeinclude": ".env\nconfig/\nnotes.txt\nsrc/\n",
            "config/app.yml": "tracked\n",
            "src/main.txt": "tracked\n",
            "seen": "\n",
        }
    )
    write_tree(
        repo,
        {
            ".env": "E\n",
            "config/dev.local": "L\n",
            "config/untracked.yml": "not ignored\n",
            "notes.txt": "not ignored\n",
            "build/out": "ignored, not named\n",
        },
    )
    names = ".env config/dev.local config/untracked.yml notes.txt build/out"
    script = f"for f in {names}; do test -e $f && echo $f; done > seen; true"
    for options, seen in (((), ".env\nconfig/dev.local\n"), (("--no-copy",), "")):
        run = isopatch("--porcelain", *options, "--", "sh", "-c", script, cwd=repo, env=env)
        assert _patch(run).count(b"diff --git ") == 1, "only 'seen' changed"
        checkout = apply_to_clean_checkout(
            repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / str(options), env
        )
        assert (checkout / "seen").read_text() == seen


def test_configured_links_and_copies(env, make_repo, tmp_path) -> None:
    repo = _node_repo(make_repo)
    (repo / ".gitignore").write_text("node_modules/\n.env\n")
    (repo / ".env").write_text("E\n")
    git("config", "--add", "isopatch.link", "node_modules", cwd=repo, env=env)
    script = "node_modules/tool/run && test -L node_modules && test -f .env && test ! -L .env"
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env, via_git=True)
    assert run.fields()["exit"] == "1", "no .env yet"
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        script,
        cwd=repo,
        env=env,
        git_options=("-c", "isopatch.copy=.env"),
    )
    assert run.fields()["exit"] == "0", run.err
    assert b"node_modules" not in _patch(run) and b".env" not in _patch(run)
    run = isopatch("--porcelain", "--no-link", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.fields()["exit"] == "127"
    # an empty value clears the values before it, as for push.pushOption
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        "test -L node_modules",
        cwd=repo,
        env=env,
        git_options=("-c", "isopatch.link="),
    )
    assert run.fields()["exit"] == "1"
    run = isopatch(
        "--porcelain",
        "--",
        "sh",
        "-c",
        "test -L node_modules",
        cwd=repo,
        env=env,
        git_options=("-c", "isopatch.link=", "-c", "isopatch.link=node_modules"),
    )
    assert run.fields()["exit"] == "0"


def test_paths_are_taken_from_the_current_folder(env, make_repo, tmp_path) -> None:
    repo = make_repo({".gitignore": "node_modules/\n", "web/app.txt": "x\n"})
    write_tree(repo, {"node_modules/root": "r\n", "web/node_modules/web": "w\n"})
    script = "cat node_modules/web ../node_modules/root > app.txt"
    run = isopatch(
        "--porcelain",
        "--link",
        "node_modules",
        "--copy",
        "../node_modules",
        "--",
        "sh",
        "-c",
        script,
        cwd=repo / "web",
        env=env,
    )
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "c", env
    )
    assert (checkout / "web/app.txt").read_text() == "w\nr\n"


def test_missing_source_is_a_warning(env, make_repo, no_leftovers) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "--link", "node_modules", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "warning: --link 'node_modules' does not exist; not linked\n" in run.err


def test_a_path_inside_a_linked_one_is_not_copied_on_its_own(env, make_repo) -> None:
    repo = _node_repo(make_repo)
    run = isopatch(
        "--porcelain",
        "--link",
        "node_modules",
        "--copy",
        "node_modules/tool",
        "--",
        "sh",
        "-c",
        "test -L node_modules",
        cwd=repo,
        env=env,
    )
    assert run.fields()["exit"] == "0", run.err
    assert (
        "warning: --copy 'node_modules/tool' is inside linked 'node_modules'; "
        "not copied on its own\n" in run.err
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--link", "/etc"], "fatal: --link '/etc' is outside the repository (an absolute path)"),
        (["--copy", "../outside"], "fatal: --copy '../outside' is outside the repository"),
        (["--link", "ignored/../../outside"], "is outside the repository"),
        (["--link", "escape"], "fatal: --link 'escape' resolves to '"),
        (["--copy", "ignored/up/secret"], "outside the repository"),
        (["--link", ".git"], "fatal: --link '.git' is inside a git directory"),
        (["--copy", "ignored/gitdir"], "inside the git directory"),
        (["--link", "."], "fatal: --link '.' is the whole work tree"),
        (["--link", "src"], "fatal: --link 'src' is tracked in the base commit"),
        (["--copy", "src/a.txt"], "fatal: --copy 'src/a.txt' is tracked in the base commit"),
        (
            ["--base", "HEAD~1", "--copy", "old/x"],
            "fatal: --copy 'old/x' is tracked in the base commit ('old' is)",
        ),
        (
            ["--link", "ignored", "--copy", "ignored"],
            "fatal: --copy 'ignored' is both linked and copied",
        ),
        (["-c", "isopatch.link=/etc"], "fatal: isopatch.link '/etc' is outside the repository"),
        (
            ["-c", "isopatch.maxWorktrees=many"],
            "fatal: bad config value for 'isopatch.maxWorktrees'\n"
            "hint: 'many' is not a number of worktrees (0 for no limit)\n",
        ),
    ],
)
def test_bad_paths_are_refused_before_anything_is_made(
    env, make_repo, tmp_path, args, message, no_leftovers
) -> None:
    repo = _bad_input_repo(make_repo, tmp_path, env)
    before = repo_state(repo, env)
    if args[0] == "-c":
        run = isopatch("--", "touch", "made", cwd=repo, env=env, git_options=tuple(args))
    else:
        run = isopatch(*args, "--", "touch", "made", cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert message in run.err
    assert run.err.startswith("fatal: ") and "Traceback" not in run.err
    assert repo_state(repo, env) == before
    assert _worktree_folders(env) == []


def test_worktreeinclude_symlink_out_of_the_repository_is_skipped_with_a_warning(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    """``.worktreeinclude`` is tracked, so it may come from someone else's
    clone: an entry that cannot be used never stops the run."""
    repo = make_repo({".gitignore": ".env\n", ".worktreeinclude": ".env\n"})
    write_tree(tmp_path, {"home-secret": "s\n"})
    os.symlink(tmp_path / "home-secret", repo / ".env")
    run = isopatch("--porcelain", "--", "sh", "-c", "test ! -e .env", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err.startswith("warning: .worktreeinclude '.env' resolves to '")
    assert run.err.endswith("', outside the repository; skipped\n")


def test_copy_that_runs_out_of_space_is_fatal_and_leaves_nothing(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    repo = make_repo({".gitignore": "big\n"})
    (repo / "big").write_bytes(os.urandom(3 << 20))
    small = tmp_path / "small-tmp"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small], check=True)
    try:
        run = isopatch(  # isopatch.tmpdir: the worktree goes there too
            "--copy",
            "big",
            "--",
            "true",
            cwd=repo,
            env=env,
            git_options=("-c", f"isopatch.tmpdir={small}"),
        )
        assert run.returncode == 128, run.err
        assert run.err.startswith("fatal: could not copy '")
        assert "No space left on device" in run.err
        assert "Traceback" not in run.err
        assert registered_worktrees(repo, env) == []
        # the base tree (isopatch.tmpdir holds it too) stays, for the next runs
        assert [str(p) for p in small.glob("git-isopatch-*/*")] == base_trees(repo, env)
    finally:
        subprocess.run(["umount", small], check=True)


def test_linked_names_are_literal_not_patterns(env, make_repo, tmp_path) -> None:
    """``--link 'dep*'`` leaves out exactly ``dep*``: a tracked ``depot.txt``
    that the command changes is still in the patch."""
    repo = make_repo({".gitignore": "dep[*]\n", "depot.txt": "old\n"})
    write_tree(repo, {"dep*/file": "f\n"})
    run = isopatch(
        "--porcelain",
        "--link",
        "dep*",
        "--",
        "sh",
        "-c",
        "cat 'dep*/file' > depot.txt && git add -A",
        cwd=repo,
        env=env,
    )
    patch = _patch(run)
    assert patch.count(b"diff --git ") == 1
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "c", env
    )
    assert (checkout / "depot.txt").read_text() == "f\n"
