"""``--apply`` says when it left edits out (issue 34): a run from ``HEAD``
never sees the user's uncommitted edits, so a formatter leaves them as
they were while the patch applies around them.  After the apply, whether
it applied or not, a ``hint:`` names the touched files that held such
edits and ``--include-uncommitted``; files the patch does not touch are
not named, and a run that starts from the work tree gets no such hint."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch

#: Ten lines black reformats at the top, far from the end.
SOURCE = "x=[1,2]\n" + "\n" * 8 + "y = 1\n"
#: The user's edit, uncommitted, past the end: outside the hunk's context.
EDITED = SOURCE + "z=[3,4]\n"
HINT = (
    "hint: the command started from HEAD, without your uncommitted edits to {}; "
    "--include-uncommitted starts from your work tree as it is"
)


def _hints(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("hint:")]


@pytest.mark.needs("black")
@pytest.mark.parametrize("mode", [(), ("--no-sandbox",)], ids=["sandboxed", "unconfined"])
def test_apply_names_the_edited_files_it_formatted_around(env, make_repo, mode) -> None:
    """The real formatter: the top is formatted, the user's new line is
    not (black never saw it), and the last line says so."""
    repo = make_repo({"d.py": SOURCE, "other.py": "a = 1\n", "clean.py": "b=2\n"})
    (repo / "d.py").write_text(EDITED)
    (repo / "other.py").write_text("a = 2\n")  # edited, not touched by the patch
    run = isopatch(*mode, "--apply", "--", "black", "-q", "d.py", "clean.py", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (repo / "d.py").read_text() == "x = [1, 2]\n\n\ny = 1\nz=[3,4]\n"
    assert (repo / "clean.py").read_text() == "b = 2\n"
    lines = run.err.splitlines()
    assert lines[-2].startswith("isopatch: 2 files changed, exit 0, applied to the work tree")
    assert lines[-1] == HINT.format("'d.py'"), run.err
    assert _hints(run.err) == [lines[-1]], run.err
    # -q: the hint only informs; the porcelain keeps it
    git("checkout", "--", "d.py", "clean.py", cwd=repo, env=env)
    (repo / "d.py").write_text(EDITED)
    quiet = isopatch(*mode, "-q", "--apply", "--", "black", "-q", "d.py", cwd=repo, env=env)
    assert quiet.returncode == 0 and quiet.err == "", quiet.err
    git("checkout", "--", "d.py", cwd=repo, env=env)
    (repo / "d.py").write_text(EDITED)
    record = isopatch(
        *mode, "--porcelain", "--apply", "--", "black", "-q", "d.py", cwd=repo, env=env
    )
    assert "hint " + HINT.format("'d.py'").removeprefix("hint: ") in record.out.splitlines()


def test_a_failed_apply_names_them_instead_of_guessing(env, make_repo) -> None:
    """An edit within a hunk's context fails the apply: the hint names the
    file, not "if your work tree already differed"."""
    repo = make_repo({"a": "one\ntwo\nthree\n", "b": "b\n"})
    (repo / "a").write_text("one\ntwo\nthree, mine\n")
    (repo / "new dir").mkdir()
    (repo / "new dir" / "mine").write_text("x\n")  # untracked: its folder is listed
    script = "sed -i s/two/TWO/ a && mkdir 'new dir' && echo new > 'new dir/made'"
    run = isopatch("--apply", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 128, run.err
    assert _hints(run.err)[-1] == HINT.format("'a', 'new dir/made'"), run.err
    assert "already differed" not in run.err


def test_no_hint_without_edits_to_the_touched_files_or_from_the_work_tree(env, make_repo) -> None:
    repo = make_repo({"a": "one\ntwo\n", "b": "b\n"})
    (repo / "b").write_text("b, mine\n")
    run = isopatch("--apply", "--", "sed", "-i", "s/two/TWO/", "a", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _hints(run.err) == [], run.err
    (repo / "a").write_text("one\ntwo\nthree\n")
    run = isopatch(
        "--include-uncommitted", "--apply", "--", "sed", "-i", "s/one/ONE/", "a", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert _hints(run.err) == [], run.err
    assert (repo / "a").read_text() == "ONE\ntwo\nthree\n"
    assert Path(repo / "b").read_text() == "b, mine\n"
