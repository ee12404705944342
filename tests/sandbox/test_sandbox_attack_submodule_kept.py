"""A hostile command in the sandbox plants a program in the git directory
of a submodule it was given (``--recurse-submodules``), which lives in the
worktree's private folder (``.git/worktrees/<id>/modules/<name>``, the
command's to write), then the worktree is kept (``--keep``, or an
extraction that fails keeps it) and handed to the user (design: procedure
step 7, "or keep it"; issue 19: "a kept sandboxed worktree has
``commondir``, ``gitdir`` and ``config.worktree`` checked and put right
before its path is given to the user").

The user's next ``git status`` or ``git commit`` in the kept submodule
must not run what the command planted (``core.fsmonitor``, a clean filter,
a hook), and git-isopatch's own extraction must not either.

Real bubblewrap, real git.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from repo_helpers import git, isopatch

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")

#: Plants a file system monitor, a clean filter and a pre-commit hook in
#: the submodule's git directory; each would write a marker into $MARKS.
PLANT = textwrap.dedent(
    """\
    M=$(git -C sub rev-parse --absolute-git-dir)
    printf '#!/bin/sh\\necho "$1" >> "%s/$(basename "$0")"\\n' "$MARKS" > "$M/planted"
    chmod +x "$M/planted"
    git config -f "$M/config" core.fsmonitor "$M/planted"
    git config -f "$M/config" filter.evil.clean "sh -c 'echo clean >> $MARKS/clean; cat'"
    git config -f "$M/config" filter.evil.smudge cat
    mkdir -p "$M/hooks" && cp "$M/planted" "$M/hooks/pre-commit"
    echo '* filter=evil' > sub/.gitattributes
    echo change >> sub/s
    """
)


def _superproject(make_repo, tmp_path: Path, env) -> Path:
    make_repo({"s": "s\n"}, name="sub-up")
    repo = make_repo({"t": "t\n"})
    git(*FILE_PROTOCOL, "submodule", "add", "-q", tmp_path / "sub-up", "sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "submodule", cwd=repo, env=env)
    return repo


def _kept_after(script: str, make_repo, tmp_path: Path, env):
    """``script`` run sandboxed with ``--recurse-submodules --keep``; the
    run and the folder ``$MARKS`` (outside: the command cannot write it)."""
    repo = _superproject(make_repo, tmp_path, env)
    marks = tmp_path / "marks"
    marks.mkdir()
    run = isopatch(
        "--porcelain", "--sandbox", "--recurse-submodules", "--keep", "--",
        "sh", "-c", script, cwd=repo, env={**env, "MARKS": str(marks)},
    )  # fmt: skip
    assert run.returncode == 0, run.err
    return run, marks


def _user_commits_in(submodule: Path, env) -> None:
    """What a user does in the kept submodule: look, stage, commit."""
    git("status", "--short", cwd=submodule, env=env)
    git("add", "-A", cwd=submodule, env=env)
    git("commit", "-q", "-m", "mine", cwd=submodule, env=env)


def test_what_the_command_plants_in_a_submodule_does_not_run_after_keep(
    env, make_repo, tmp_path: Path
) -> None:
    run, marks = _kept_after(PLANT, make_repo, tmp_path, env)
    assert sorted(p.name for p in marks.iterdir()) == []  # not by our extraction
    _user_commits_in(Path(run.fields()["worktree"]) / "sub", env)
    assert sorted(p.name for p in marks.iterdir()) == []


#: Plants a git directory of its own inside the worktree, with a file
#: system monitor, and points the submodule's ``.git`` file at it; then
#: turns the real git directory's hooks into a link to planted hooks.
REPOINT = textwrap.dedent(
    """\
    M=$(git -C sub rev-parse --absolute-git-dir)
    printf '#!/bin/sh\\necho "$1" >> "%s/$(basename "$0")"\\n' "$MARKS" > planted
    chmod +x planted
    cp -r "$M" evil.git
    git config -f evil.git/config core.fsmonitor "$PWD/planted"
    echo "gitdir: $PWD/evil.git" > sub/.git
    mkdir hooks-planted && cp planted hooks-planted/pre-commit
    mv "$M/hooks" "$M/hooks-old" && ln -s "$PWD/hooks-planted" "$M/hooks"
    echo change >> sub/s
    """
)


def test_a_repointed_submodule_git_file_and_linked_hooks_are_put_right(
    env, make_repo, tmp_path: Path
) -> None:
    """The submodule's ``.git`` file leading to a planted git directory, and
    its hooks folder replaced by a link to planted hooks, are put back
    when the worktree is kept, each named in a ``warning:``."""
    run, marks = _kept_after(REPOINT, make_repo, tmp_path, env)
    assert "sub/.git'; put back" in run.err, run.err
    assert "hooks'; put back" in run.err, run.err
    _user_commits_in(Path(run.fields()["worktree"]) / "sub", env)
    assert sorted(p.name for p in marks.iterdir()) == []
