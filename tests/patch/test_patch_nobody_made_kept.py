"""The look before the command, kept with a pooled worktree (issue 23):
where attributes apply, a claimed worktree's look has git read every file
a conversion may change; its answer (the paths a checkout alone changes)
is kept with the worktree, and the next claim has git read only the files
whose index entries changed, as long as the attributes and the
configuration are the same.  The patch stays what a new worktree gives:
after the attributes change, after the base changes, after a command
rewrote the kept answer.

Every repository here stores ``f.txt`` with CRLF under ``*.txt text``
("modified" right after checkout), and every command rewrites
``.gitattributes``, which has git read every file after it: ``f.txt``
lands in the patch unless the look before the command found it.  The
first run's command waits a second, so that the index put back in the
pool is newer than ``f.txt``'s entry: the claims after it trust that entry
and prove the worktree fresh (a racy one would be read, seen modified, and
the worktree not claimed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from repo_helpers import git, isopatch, write_outside_attributes

from git_isopatch.git.index_entries import index_entries
from git_isopatch.git.types import GitDirPath

POOL = ("-c", "isopatch.pool=1")

CRLF_STORED = {"f.txt": b"a\r\nb\r\n", "g.txt": b"g\n", "b.bat": b"b\r\n", "keep": b"k\n"}

#: The command: where it runs, then a change of ``.gitattributes``.
SCRIPT = "pwd; echo '*.md text' >> .gitattributes"

#: The warning of a path left out because the checkout alone changed it.
LEFT_OUT = "warning: '{}' differs from the base right after checkout"


def _repo(make_repo, env) -> Path:
    repo = make_repo(CRLF_STORED)
    # no filter.fix is configured: b.bat is not converted, until one is
    (repo / ".gitattributes").write_text("*.txt text\nb.bat filter=fix\n")
    git("add", ".gitattributes", cwd=repo, env=env)
    git("commit", "-q", "-m", "attributes", cwd=repo, env=env)
    return repo


def _run(repo: Path, env: dict[str, str], tmp_path: Path, script: str = SCRIPT):
    """One pooled, unconfined run of ``sh -c script``: the run, where the
    command ran, and the pathspecs of each reading look (a ``git diff
    --name-only`` on attribute pathspecs) it made."""
    trace = tmp_path / "trace.json"
    trace.unlink(missing_ok=True)
    run = isopatch(
        "--porcelain", "--no-sandbox", "--", "sh", "-c", script,
        cwd=repo, env={**env, "GIT_TRACE2_EVENT": str(trace)}, git_options=POOL,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    looks = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        argv = event.get("argv", [])
        if event.get("event") == "start" and "--name-only" in argv:
            specs = argv[argv.index("--") + 1 :]
            if any("attr:" in spec for spec in specs):
                looks.append([spec for spec in specs if "attr:" not in spec])
    where = Path(run.fields()["stdout"]).read_text().split()[0]
    return run, where, looks


def _patch(run) -> bytes:
    return Path(run.fields()["patch"]).read_bytes()


def _warm(repo: Path, env: dict[str, str], tmp_path: Path):
    """A cold run that leaves its worktree in the pool, then a warm one
    that keeps the answer; the warm run's result."""
    _run(repo, env, tmp_path, f"sleep 1.1; {SCRIPT}")
    run, where, looks = _run(repo, env, tmp_path)
    assert looks == [[":(top)"]], "the first claim reads every file a conversion may change"
    return run, where


def test_the_fidelity_case_holds_warm_on_the_second_and_third_run(env, make_repo, tmp_path) -> None:
    repo = _repo(make_repo, env)
    cold, _, _ = _run(repo, env, tmp_path, f"sleep 1.1; {SCRIPT}")
    runs = [_run(repo, env, tmp_path) for _ in range(3)]
    assert runs[0][2] == [[":(top)"]], "the first claim reads every converted file"
    # the command changed .gitattributes alone: the next claims read it alone
    assert runs[1][2] == runs[2][2] == [[":(top,literal).gitattributes"]]
    assert runs[0][1] == runs[1][1] == runs[2][1], "each run claimed the same worktree"
    for run in (cold, *(run for run, _, _ in runs)):
        assert _patch(run) == _patch(cold), run.err
        assert LEFT_OUT.format("f.txt") in run.err
    assert b"a/f.txt" not in _patch(cold) and b"b/.gitattributes" in _patch(cold)


def test_a_command_that_changed_nothing_leaves_nothing_to_read(env, make_repo, tmp_path) -> None:
    repo = _repo(make_repo, env)
    _warm(repo, env, tmp_path)
    _run(repo, env, tmp_path, "pwd")  # reads .gitattributes, which the last command changed
    run, _, looks = _run(repo, env, tmp_path, "pwd")
    assert looks == [], "no entry changed: the kept answer stands for every path"
    assert LEFT_OUT.format("f.txt") in run.err


@pytest.mark.parametrize("where", ["info", "xdg", "configured", "filter"])
def test_the_answer_is_not_taken_after_the_attributes_change(
    env, make_repo, tmp_path, where
) -> None:
    """``b.bat`` (CRLF stored) is converted once ``*.bat text`` applies
    from outside the tree, or once the filter its tracked attributes name
    is configured: the kept answer did not name it; the claim reads every
    file again and ``b.bat`` stays out of the patch."""
    repo = _repo(make_repo, env)
    _, claimed = _warm(repo, env, tmp_path)
    rules = "*.bat text\n"
    if where == "filter":
        git("config", "filter.fix.clean", "tr -d '\\r'", cwd=repo, env=env)
    else:
        write_outside_attributes(repo, env, where, rules, tmp_path)
    run, now, looks = _run(repo, env, tmp_path)
    assert now == claimed, "the run claimed the worktree that kept an answer"
    assert looks == [[":(top)"]], "every file read again"
    assert b"a/b.bat" not in _patch(run), run.err
    assert LEFT_OUT.format("b.bat") in run.err and LEFT_OUT.format("f.txt") in run.err


def test_the_answer_stands_only_for_the_entries_of_the_same_base(env, make_repo, tmp_path) -> None:
    """At another commit ``f.txt`` is stored with LF: its entry changed,
    the claim reads that file again (and the ``.gitattributes`` the last
    command changed), and ``f.txt`` is no longer named; ``h.txt``, new and
    stored with LF too, is read as well."""
    repo = _repo(make_repo, env)
    _, claimed = _warm(repo, env, tmp_path)
    (repo / "f.txt").write_bytes(b"a\nb\n")
    (repo / "h.txt").write_bytes(b"h\n")
    git("add", "f.txt", "h.txt", cwd=repo, env=env)
    git("commit", "-q", "-m", "normalised", cwd=repo, env=env)
    run, now, looks = _run(repo, env, tmp_path)
    assert now == claimed
    assert looks == [[f":(top,literal){name}" for name in (".gitattributes", "f.txt", "h.txt")]]
    assert "f.txt" not in run.err and b"a/f.txt" not in _patch(run), run.err


#: Rewrites the kept answer of the worktree the command runs in so that it
#: names no path (the count set to 0, the paths dropped, the keys and the
#: digests kept):
#: trusted, it would let ``f.txt`` into the next patch.
FORGE = f"""{sys.executable} -c '
import subprocess
admin = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True,
                       text=True, check=True).stdout.strip()
path = admin + "/isopatch-conversions"
header, whole, key, count, rest = open(path, "rb").read().split(b"\\n", 4)
for _ in range(int(count)):
    rest = rest[rest.index(b"\\0") + 1 :]
open(path, "wb").write(b"\\n".join([header, whole, key, b"0", rest]))
'"""


@pytest.mark.parametrize("how", ["forged", "removed", "a link"])
def test_a_command_cannot_leave_an_answer_for_the_next_claim(env, make_repo, tmp_path, how) -> None:
    repo = _repo(make_repo, env)
    _warm(repo, env, tmp_path)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    tamper = {
        "forged": FORGE,
        "removed": 'rm "$(git rev-parse --absolute-git-dir)/isopatch-conversions"',
        "a link": f'ln -sf {target} "$(git rev-parse --absolute-git-dir)/isopatch-conversions"',
    }[how]
    _run(repo, env, tmp_path, f"{tamper}; {SCRIPT}")
    assert target.read_bytes() == b"", "the answer is never written through a link"
    run, _, looks = _run(repo, env, tmp_path)
    assert looks == [[":(top,literal).gitattributes"]], "the answer of the run before stands"
    assert b"a/f.txt" not in _patch(run), run.err
    assert LEFT_OUT.format("f.txt") in run.err


@pytest.mark.parametrize(
    ("version", "object_format"), [("2", "sha1"), ("3", "sha1"), ("4", "sha1"), ("4", "sha256")]
)
def test_the_index_entries_are_read_as_git_lists_them(
    env, tmp_path, version, object_format
) -> None:
    """In process, every version of the index (4: each path shares the
    start of the one before it; 3: an entry flagged skip-worktree is
    longer) and both object formats: git's paths in git's order, each
    with its stat data."""
    repo = tmp_path / "repo"
    git("init", "-q", f"--object-format={object_format}", str(repo), cwd=tmp_path, env=env)
    names = ["a/b/one", "a/b/two", "a/c", "a/ca", "b", "sp ace", "/".join(["x" * 200] * 3)]
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    git("add", ".", cwd=repo, env=env)
    git("update-index", "--skip-worktree", "a/c", cwd=repo, env=env)
    git("update-index", "--index-version", version, cwd=repo, env=env)
    size = 32 if object_format == "sha256" else 20
    entries = index_entries(GitDirPath(str(repo / ".git")), size)
    assert entries is not None
    listed = git("ls-files", "-z", cwd=repo, env=env).split(b"\0")[:-1]
    assert [path for path, _ in entries] == listed
    sizes = {path: int.from_bytes(meta[36:40], "big") for path, meta in entries}
    assert sizes == {name.encode(): len(name) for name in names}
