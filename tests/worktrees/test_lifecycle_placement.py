"""Where the worktree lives (design: "Placement"): beside the checkout, so
that the folders above it are the checkout's own and a formatter finds the
configuration it finds in place; never in ``$TMPDIR``, where anyone may
plant a configuration file.  Where the place beside the checkout cannot be
written, ``$TMPDIR`` with a warning; a read-only ``$TMPDIR`` is one
``fatal:`` line.  Concurrent runs get distinct places and each its own
changes.

Without the lock around ``git worktree add`` (``worktree_admin_lock``),
git 2.39 itself races: one ``add`` reads the half-made registration of
another and dies ("failed to read .../worktrees/<id>/commondir").  That
shows in about one run in eight of ``test_eight_runs_at_once``."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import admin_dirs, read_only_bind
from repo_helpers import ISOPATCH, git, isopatch, registered_worktrees, repo_state, tmpfs

from git_isopatch.worktrees.placement import made_by_isopatch, place_worktree

#: The runs' own worktrees alone: no base tree kept (tests of their own).
pytestmark = pytest.mark.usefixtures("no_base_trees")

RUNS = 8


#: Each command waits at a barrier until all eight commands have started:
#: if git-isopatch ran the commands one after another, the first would wait
#: for ever (it gives up after about two minutes, exit 99).  Then it writes
#: its own file and commits it in its worktree.
COMMAND = """set -e
: > "$BARRIER/$RUN"
n=0
while [ "$(ls "$BARRIER" | wc -l)" -lt {runs} ]; do
    n=$((n + 1)); [ "$n" -lt 2400 ] || exit 99; sleep 0.05
done
echo "run $RUN" > "out-$RUN.txt"
git add "out-$RUN.txt" && git commit -qm "run $RUN"
""".format(runs=RUNS)


UNFORMATTED = "x = [1111111111, 2222222222, 3333333333]\n"


NARROW = "line-length = 20\n"


def _where_it_ran(run) -> Path:
    """The folder the command (``pwd``, with ``--porcelain``) ran in."""
    assert run.returncode == 0, run.err
    return Path(Path(run.fields()["stdout"]).read_text().strip())


@contextlib.contextmanager
def _read_only_around(folder: Path, keep_writable: Path) -> Iterator[None]:
    """Make ``folder`` a read-only bind mount, ``keep_writable`` inside it a
    writable one (we run as root: permissions alone do not stop a write)."""
    steps = [
        ["mount", "--bind", folder, folder],
        ["mount", "--bind", keep_writable, keep_writable],
        ["mount", "-o", "remount,bind,ro", folder],
    ]
    done = []
    try:
        for step in steps:
            result = subprocess.run(step, capture_output=True, text=True)
            if result.returncode != 0:
                pytest.skip(f"cannot make a read-only bind mount (needs root): {result.stderr}")
            if step[1] == "--bind":
                done.append(step[3])
        yield
    finally:
        for mountpoint in reversed(done):
            subprocess.run(["umount", "-l", mountpoint], check=False)


@pytest.mark.hostile
def test_eight_runs_at_once(env, make_repo, tmp_path: Path, no_leftovers) -> None:
    repo = make_repo()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    before = repo_state(repo, env)
    runs = [
        subprocess.Popen(
            # in the default sandbox: the barrier, outside, is really writable
            [ISOPATCH, "--porcelain", "--allow-write", barrier, "--", "sh", "-c", COMMAND],
            cwd=repo,
            env={**env, "BARRIER": str(barrier), "RUN": str(n)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(RUNS)
    ]
    results = [(run.communicate(timeout=600), run.returncode) for run in runs]
    failed = {n: (status, err.decode()) for n, ((_, err), status) in enumerate(results) if status}
    assert failed == {}
    for n, ((out, _), _) in enumerate(results):
        fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
        patch = Path(fields["patch"]).read_bytes()
        assert patch.count(b"diff --git ") == 1, patch
        assert f"+++ b/out-{n}.txt\n@@ -0,0 +1 @@\n+run {n}\n".encode() in patch
    assert sorted(p.name for p in barrier.iterdir()) == [str(n) for n in range(RUNS)]
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


@pytest.mark.hostile
@pytest.mark.parametrize("how", ["tmpfs -o ro", "read-only bind mount"])
def test_read_only_tmpdir(env, make_repo, tmp_path: Path, how: str) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    folder = tmp_path / "readonly"
    folder.mkdir()
    mount = tmpfs(folder, "64k", "ro") if how.startswith("tmpfs") else read_only_bind(folder)
    with mount:
        run = isopatch("--json", "--", "true", cwd=repo, env={**env, "TMPDIR": str(folder)})
        assert list(folder.iterdir()) == []
    assert run.returncode == 128
    assert run.err == (
        f"fatal: could not create a temporary folder in '{folder}': Read-only file system\n"
    )
    assert json.loads(run.stdout)["error-code"] == "read-only"
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []


def test_configuration_above_the_checkout_applies_as_in_place(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    (tmp_path / "projects").mkdir()  # not above $TMPDIR, which is in tmp_path
    repo = make_repo({"x.py": UNFORMATTED}, name="projects/repo")
    (tmp_path / "projects" / "ruff.toml").write_text(NARROW)
    in_place = tmp_path / "projects" / "in-place"
    git("clone", "-q", repo, in_place, cwd=tmp_path, env=env)
    subprocess.run(["ruff", "format", "-q", "."], cwd=in_place, env=env, check=True)
    assert (in_place / "x.py").read_text() != UNFORMATTED, "the configuration is read in place"

    run = isopatch("--porcelain", "--", "ruff", "format", "-q", ".", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    git("apply", run.fields()["patch"], cwd=repo, env=env)
    assert (repo / "x.py").read_text() == (in_place / "x.py").read_text()


def test_configuration_in_tmpdir_does_not_apply(env, make_repo, no_leftovers) -> None:
    formatted = "x = [1, 2]\n"
    repo = make_repo({"x.py": formatted})
    (Path(env["TMPDIR"]) / "ruff.toml").write_text('indent-width = 2\nquote-style = "single"\n')
    (Path(env["TMPDIR"]) / "pyproject.toml").write_text("[tool.ruff]\nline-length = 5\n")
    run = isopatch("--porcelain", "--", "ruff", "format", "-q", ".", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "0"
    assert Path(run.fields()["patch"]).read_bytes() == b""


def test_the_worktree_is_a_folder_beside_the_checkout(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo()
    (repo / "sub").mkdir()
    ran = _where_it_ran(isopatch("--porcelain", "--", "pwd", cwd=repo / "sub", env=env))
    assert ran.name == "sub"
    assert ran.parent.name == "repo", "the worktree has the name of the checkout"
    assert ran.parent.parent.parent == tmp_path
    assert ran.parent.parent.name.startswith("repo.isopatch-")
    assert not ran.parent.parent.exists(), "the folder made for it goes with it"
    patch = Path(isopatch("--porcelain", "--", "true", cwd=repo, env=env).fields()["patch"])
    assert patch.parent.parent == Path(env["TMPDIR"]), "the patch stays in the private folder"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_runs_one_after_another_run_in_one_place(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """Tools that key their caches by a file's path (black) find them on
    the next run: a run's worktree is where the last one's was, unless
    that folder is taken (a kept worktree, a run under way): then another."""
    repo = make_repo()
    first, second = (
        _where_it_ran(isopatch("--porcelain", "--", "pwd", cwd=repo, env=env)) for _ in "12"
    )
    assert first == second
    kept = isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env).fields()["worktree"]
    assert Path(kept) == first
    third = _where_it_ran(isopatch("--porcelain", "--", "pwd", cwd=repo, env=env))
    assert third != first and third.parent.parent == tmp_path
    assert isopatch("prune", cwd=repo, env=env).returncode == 0


def test_kept_worktrees_beside_the_checkout_are_listed_and_pruned(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    kept = Path(
        isopatch("--porcelain", "--keep", "--", "true", cwd=repo, env=env).fields()["worktree"]
    )
    assert kept.parent.parent == tmp_path
    listed = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert f"worktree {kept}\nstate kept\n" in listed.out
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.out == f"Removing {kept}: kept\n", pruned.err
    assert not kept.parent.exists()
    assert not list(tmp_path.glob("repo.isopatch-*"))


def test_configured_tmpdir_holds_the_worktree_without_a_warning(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo()
    fast = tmp_path / "fast"
    fast.mkdir()
    git("config", "isopatch.tmpdir", fast, cwd=repo, env=env)
    run = isopatch("--porcelain", "--", "pwd", cwd=repo, env=env)
    ran = _where_it_ran(run)
    assert ran.parent.parent == fast and ran.parent.name.startswith("git-isopatch-")
    assert "warning" not in run.err
    assert Path(run.fields()["patch"]).parent.parent == fast


def test_read_only_parent_falls_back_to_tmpdir_with_a_warning(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    (tmp_path / "ro").mkdir()
    repo = make_repo(name="ro/repo")
    with _read_only_around(tmp_path / "ro", repo):
        with pytest.raises(OSError):
            (tmp_path / "ro" / "probe").mkdir()
        run = isopatch("--porcelain", "--", "sh", "-c", "pwd; echo new > new", cwd=repo, env=env)
        ran = _where_it_ran(run)
        assert ran.parent.parent == Path(env["TMPDIR"])
        assert run.err.startswith(
            f"warning: cannot place the worktree beside '{repo}' ('{tmp_path / 'ro'}': "
            "Read-only file system); using '"
        ), run.err
        assert b"+++ b/new" in Path(run.fields()["patch"]).read_bytes()
        assert not ran.parent.exists()


def test_linked_worktree_of_a_bare_repository(env, tmp_path: Path, make_repo, no_leftovers) -> None:
    source = make_repo()
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", source, bare, cwd=tmp_path, env=env)
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", linked, "main", cwd=bare, env=env)
    run = isopatch("--porcelain", "--", "sh", "-c", "pwd; echo x >> README", cwd=linked, env=env)
    ran = _where_it_ran(run)
    assert ran.parent.parent == tmp_path and ran.name == "linked"
    assert ran.parent.name.startswith("linked.isopatch-")
    assert b"+++ b/README" in Path(run.fields()["patch"]).read_bytes()
    assert len(registered_worktrees(bare, env)) == 1  # linked: no run's worktree left


def test_checkout_at_the_root_falls_back_with_a_warning(tmp_path: Path) -> None:
    warnings: list[str] = []
    place = place_worktree("/", fallback_root=str(tmp_path), warn=warnings.append)
    assert Path(place.container).parent == tmp_path
    assert place.worktree == f"{place.container}/worktree" and not place.beside_checkout
    assert warnings == [
        f"cannot place the worktree beside '/' (it is the root folder); using "
        f"'{place.container}', where configuration files above the checkout do not apply"
    ]


def test_concurrent_places_are_distinct(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    places = {
        place_worktree(str(top), fallback_root="/nonexistent", warn=print).container
        for _ in range(20)
    }
    assert len(places) == 20


@pytest.mark.parametrize(
    ("path", "container", "ours"),
    [
        ("/src/.git-isopatch-ab_12cde/repo", "/src/.git-isopatch-ab_12cde", True),
        ("/tmp/git-isopatch-ab_12cde/repo", "/tmp/git-isopatch-ab_12cde", True),
        ("/tmp/git-isopatch-ab_12cde/repo", None, True),
        ("/src/feature", "/src", False),  # a forged record naming the user's folder
        ("/src/feature", None, False),
        ("/tmp/git-isopatch-ab_12cde/repo", "/tmp/git-isopatch-zz", False),
        ("/tmp/git-isopatch-ab_12cde/x/repo", "/tmp/git-isopatch-ab_12cde", False),
        ("/home/u/git-isopatch-notes/repo", "/home/u/git-isopatch-notes", False),
    ],
)
def test_made_by_isopatch(path: str, container: str | None, ours: bool) -> None:
    assert made_by_isopatch(path, container) is ours
