"""The worktree's private folder (``$GIT_COMMON_DIR/worktrees/<id>``) is
the command's to write, even under ``--sandbox``: git keeps the worktree's
``HEAD`` and index there.  What the command plants there must not reach
outside through what git-isopatch does afterwards: its own git calls, its
writes of the record and the lock, ``prune``.  Each case is an attack that
worked before its fix (found by trying to break out).

Real kernel, real git; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from lifecycle_helpers import _prune_after_a_link_named
from repo_helpers import git, isopatch, registered_worktrees, repo_state

#: git-isopatch's own ``git ls-files`` after the command (the look for
#: changed submodules) used the private folder's ``commondir``, which the
#: command pointed at a repository whose configuration makes a lazy fetch
#: run a program of its choice (``remote.<name>.uploadpack``).
LAZY_FETCH = textwrap.dedent(
    """\
    A=$(git rev-parse --git-dir); S=$TMPDIR/s; F=$TMPDIR/f
    git init -q "$S" && mkdir "$S/d" && echo x > "$S/d/x"
    git -C "$S" add -A && git -C "$S" commit -qm s
    git -C "$S" sparse-checkout set --cone --sparse-index 2>/dev/null
    git init -q --bare "$F"
    printf '[core]\\n\\trepositoryformatversion=1\\n' >> "$F/config"
    printf '[extensions]\\n\\tpartialclone=origin\\n[remote "origin"]\\n' >> "$F/config"
    printf '\\turl=%s\\n\\tpromisor=true\\n\\tuploadpack=touch %s;\\n' "$S" "$MARKER" >> "$F/config"
    cp "$S/.git/index" "$A/index"; echo "$F" > "$A/commondir"
    printf '[submodule "x"]\\n\\tpath = x\\n' > .gitmodules
    """
)


def test_a_commondir_the_command_rewrote_is_put_back_before_git_runs(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo({"a": "a\n"})
    marker = tmp_path / "escaped-through-ls-files"
    run = isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c", LAZY_FETCH,
        cwd=repo, env={**env, "MARKER": str(marker)},
    )  # fmt: skip
    assert not marker.exists()
    assert "warning: the command rewrote '" in run.err and "/commondir'; put back" in run.err
    assert registered_worktrees(repo, env) == []


def test_a_commondir_leading_nowhere_leaves_the_repository_working(env, make_repo) -> None:
    """A ``commondir`` that leads nowhere broke ``git worktree list``,
    ``gc`` and every later run in the user's repository."""
    repo = make_repo({"a": "a\n"})
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c",
        'echo /nonexistent/x > "$(git rev-parse --git-dir)/commondir"; echo b >> a',
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "1"
    assert repo_state(repo, env) == before
    assert isopatch("-q", "--", "true", cwd=repo, env=env).returncode == 0


def test_kept_worktree_whose_commondir_leads_nowhere_is_pruned(env, make_repo) -> None:
    """A process the command left behind can rewrite ``commondir`` after
    the run; ``prune`` puts it back and removes the worktree."""
    repo = make_repo({"a": "a\n"})
    run = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    [admin] = [a for a in (repo / ".git" / "worktrees").iterdir() if (a / "isopatch.json").exists()]
    (admin / "commondir").write_text("/nonexistent/x\n")
    pruned = isopatch("prune", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert not Path(run.fields()["worktree"]).exists()
    assert not (repo / ".git" / "worktrees").exists()
    assert git("worktree", "list", cwd=repo, env=env).count(b"\n") == 1


#: Links planted where git-isopatch writes its record and the lock reason
#: (names it used for its temporary files, and the files themselves); the
#: broken index makes the extraction fail, so the worktree is kept and
#: the record rewritten.
PLANTED_LINKS = textwrap.dedent(
    """\
    A=$(git rev-parse --git-dir)
    for name in isopatch.json isopatch.json.tmp locked locked.isopatch-tmp; do
        rm -f "$A/$name"; ln -s "$VICTIM" "$A/$name"
    done
    echo junk > "$A/index"
    """
)


def test_links_planted_in_the_private_folder_are_replaced_not_written_through(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo({"a": "a\n"})
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    run = isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c", PLANTED_LINKS,
        cwd=repo, env={**env, "VICTIM": str(victim)},
    )  # fmt: skip
    assert run.returncode == 128, run.err  # the extraction failed on the broken index
    assert victim.read_text() == "precious\n"
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert "state kept" in listed.out, listed.err
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert victim.read_text() == "precious\n"


def test_prune_never_lets_git_repair_write_through_a_planted_git_link(
    env, make_repo, tmp_path: Path
) -> None:
    """``git worktree repair`` rewrites a worktree's ``.git`` that does not
    lead back, through a symbolic link; a kept worktree's command made its
    ``.git`` one."""
    repo = make_repo({"a": "a\n"})
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    kept = isopatch(
        "--porcelain", "--sandbox", "--keep", "--", "sh", "-c",
        f"rm .git && ln -s '{victim}' .git",
        cwd=repo, env=env,
    )  # fmt: skip
    assert kept.returncode == 0, kept.err
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    assert victim.read_text() == "precious\n"
    assert not Path(kept.fields()["worktree"]).exists()


def test_prune_never_deletes_through_a_link_named_like_our_folder(
    env, make_repo, tmp_path: Path
) -> None:
    """A link inside the worktree named like git-isopatch's folder, a
    ``gitdir`` and a record naming a worktree behind it: ``prune`` must not
    delete the folder the link leads to."""
    victim = _prune_after_a_link_named(
        ".git-isopatch-abcdefgh",
        make_repo,
        env,
        tmp_path,
        extra='mkdir "$A/isopatch.json.tmp"; echo junk > "$A/index"\n',
    )
    assert (victim / "f").read_text() == "data\n"


def test_prune_never_writes_into_a_registration_a_planted_git_names(
    env, make_repo, tmp_path: Path
) -> None:
    """A kept worktree's command made its ``.git`` name another
    repository's worktree registration; ``git worktree repair`` (which
    prune ran when the removal failed) followed it and rewrote that
    registration's ``gitdir``, and git then pruned the other worktree."""
    other = make_repo({"o": "o\n"}, name="other")
    git("worktree", "add", "-q", tmp_path / "ow", cwd=other, env=env)
    registration = other / ".git" / "worktrees" / "ow" / "gitdir"
    before = registration.read_bytes()
    repo = make_repo({"a": "a\n"})
    kept = isopatch(
        "--porcelain", "--sandbox", "--keep", "--", "sh", "-c",
        f"rm .git && echo 'gitdir: {registration.parent}' > .git",
        cwd=repo, env=env,
    )  # fmt: skip
    assert kept.returncode == 0, kept.err
    isopatch("prune", cwd=repo, env=env)
    assert registration.read_bytes() == before
    assert not Path(kept.fields()["worktree"]).exists()


def test_prune_never_makes_a_folder_a_worktree(env, make_repo, tmp_path: Path) -> None:
    """A process left behind rewrites ``gitdir`` after the run to name a
    folder of the user's; git's repair of every worktree wrote a ``.git``
    there, making it a worktree of the repository."""
    victim = tmp_path / "home-like"
    victim.mkdir()
    repo = make_repo({"a": "a\n"})
    first = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env)
    assert first.returncode == 0, first.err
    [admin] = [a for a in (repo / ".git" / "worktrees").iterdir() if (a / "isopatch.json").exists()]
    (admin / "gitdir").write_text(f"{victim / '.git'}\n")  # as a process left behind would
    broken = isopatch(
        "--porcelain", "--keep", "--", "sh", "-c", "rm .git && mkdir .git", cwd=repo, env=env
    )
    assert "worktree" in broken.fields(), broken.err
    isopatch("prune", cwd=repo, env=env)
    assert not (victim / ".git").exists()
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert f"worktree {victim}\nHEAD" in listed and "prunable" in listed  # git sees no worktree
