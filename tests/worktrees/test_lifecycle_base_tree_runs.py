"""Sandboxed runs over base trees (design: procedure steps 3 and 7): each
run's worktree is a copy-on-write layer over the base tree of its commit,
placed where a worktree of its own would be, its writes discarded with the
run; the base tree is shared, kept, and never written by a command."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from lifecycle_helpers import _listed
from repo_helpers import BIN_DIR, git, isopatch
from sandbox_helpers import run_as_nobody


def _base_trees(repo: Path) -> list[Path]:
    return sorted(p for p in (repo / ".git" / "isopatch").glob("git-isopatch-*/*"))


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(os.fsencode(path.relative_to(folder)))
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes() + oct(path.stat().st_mode).encode())
    return digest.hexdigest()


def test_a_run_leaves_its_base_tree_and_the_next_one_goes_over_it(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n"})
    first = isopatch("--porcelain", "--", "sh", "-c", "echo x >> README", cwd=repo, env=env)
    assert first.returncode == 0, first.err
    (base,) = _base_trees(repo)
    before = _digest(base)
    second = isopatch("--porcelain", "--", "sh", "-c", "rm src/a.c", cwd=repo, env=env)
    assert second.returncode == 0, second.err
    assert _base_trees(repo) == [base] and _digest(base) == before
    assert b"deleted file mode" in Path(second.fields()["patch"]).read_bytes()
    # the worktree was placed beside the checkout and is gone with the run
    assert not [p for p in repo.parent.iterdir() if ".isopatch-" in p.name]


def test_git_inside_sees_a_clean_worktree_of_its_own(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n"})
    script = "git status --porcelain; git rev-parse --show-toplevel; echo y > new; git add new"
    for _ in range(2):  # over the base tree it makes, then over the kept one
        run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        out = Path(run.fields()["stdout"]).read_text().splitlines()
        assert len(out) == 1 and out[0].endswith("/repo") and ".isopatch-" in out[0]
        assert b"+++ b/new" in Path(run.fields()["patch"]).read_bytes()


@pytest.mark.hostile
def test_a_command_cannot_write_its_base_tree(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n"})
    isopatch("-q", "--", "true", cwd=repo, env=env)
    (base,) = _base_trees(repo)
    before = _digest(base)
    script = f"echo evil > '{base}/README'; rm -f '{base}/README'; echo evil > README"
    run = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _digest(base) == before
    later = isopatch("--porcelain", "--", "cat", "README", cwd=repo, env=env)
    assert Path(later.fields()["stdout"]).read_text() == "hello\n"


@pytest.mark.hostile
def test_a_command_that_empties_its_worktree_empties_only_its_own(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n", "src/deep/b.c": "b\n"})
    run = isopatch("--porcelain", "--", "sh", "-c", "rm -rf ./* && mkdir src", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.fields()["files"] == "3"
    (base,) = _base_trees(repo)
    assert (base / "src" / "deep" / "b.c").read_text() == "b\n"


def test_parallel_runs_share_one_base_tree_and_see_only_their_own_changes(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n"})
    isopatch("-q", "--", "true", cwd=repo, env=env)
    runs = [
        subprocess.Popen(
            [
                BIN_DIR / "git-isopatch",
                "--porcelain",
                "--",
                "sh",
                "-c",
                f"echo {n} > mine; sleep 1; ls",
            ],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for n, run in enumerate(runs):
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
        assert Path(fields["stdout"]).read_text().split() == ["README", "mine"]
        assert f"+{n}\n".encode() in Path(fields["patch"]).read_bytes()
    assert len(_base_trees(repo)) == 1


def test_a_kept_worktree_is_a_real_folder_of_its_own(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n", "gone.txt": "x\n"})
    script = "echo more >> README; rm gone.txt; mkdir -p new && echo n > new/n; ln -s README ln"
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    kept = Path(run.fields()["worktree"])
    assert (kept / "README").read_text() == "hello\nmore\n"
    assert not (kept / "gone.txt").exists() and (kept / "new" / "n").read_text() == "n\n"
    assert os.readlink(kept / "ln") == "README"
    assert (kept / "src" / "a.c").read_text() == "a\n"
    status = git("status", "--porcelain", cwd=kept, env=env).decode().splitlines()
    # its index git-isopatch's own again, as it made it: the new files untracked
    assert sorted(status) == [" D gone.txt", " M README", "?? ln", "?? new/"]
    (kept / "src" / "a.c").write_text("edited in the kept worktree\n")
    (base,) = _base_trees(repo)
    assert (base / "src" / "a.c").read_text() == "a\n"
    git("worktree", "remove", "--force", kept, cwd=repo, env=env)


@pytest.mark.parametrize("script", ["true", "chmod 750 ."])
def test_a_worktrees_top_folder_has_the_mode_of_an_unconfined_one(env, make_repo, script) -> None:
    """The top folder the command sees, and the kept worktree's, have the
    mode ``git worktree add`` gives (or the one the command set), sandboxed
    or not; a mode of the top folder is never in the patch."""
    repo = make_repo({"README": "hello\n"})
    git("worktree", "add", "-q", "--detach", repo.parent / "added", cwd=repo, env=env)
    added = oct(stat.S_IMODE((repo.parent / "added").stat().st_mode))
    seen = {}
    for sandbox in ("--sandbox", "--no-sandbox"):
        args = ("--porcelain", "--keep", sandbox, "--", "sh", "-c", f"{script}; stat -c %a .")
        run = isopatch(*args, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        fields = run.fields()
        kept = Path(fields["worktree"])
        inside = Path(fields["stdout"]).read_text().strip()
        seen[sandbox] = (inside, oct(stat.S_IMODE(kept.stat().st_mode)), fields["files"])
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)
    mode = added if script == "true" else "0o750"
    assert seen == dict.fromkeys(("--sandbox", "--no-sandbox"), (mode[2:], mode, "0")), seen


@pytest.mark.hostile
def test_a_kept_worktree_copies_a_link_the_command_made_never_what_it_leads_to(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo({"README": "hello\n"})
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("do not copy\n")
    script = f"ln -s '{secret}' outside; mkfifo pipe"
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    kept = Path(run.fields()["worktree"])
    assert os.readlink(kept / "outside") == str(secret)
    assert stat.S_ISFIFO(os.lstat(kept / "pipe").st_mode)  # as in a worktree of its own
    assert sorted(os.listdir(secret)) == ["key"]
    git("worktree", "remove", "--force", kept, cwd=repo, env=env)


#: Folders a build makes read-only (``chmod a-w``): one the base tree holds,
#: with a new file in it, and a new one.
READ_ONLY = "echo n > src/new.c && chmod 555 src && mkdir made && echo m > made/m && chmod 555 made"

#: As uid 65534: a kept run of :data:`READ_ONLY`; what the kept worktree holds.
KEPT_AS_NOBODY = """
os.makedirs(os.path.join(repo, "src"))
with open(os.path.join(repo, "src", "a.c"), "w") as handle:
    handle.write("a\\n")
subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
subprocess.run(["git", "-C", repo, "commit", "-qm", "src"], check=True)
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--keep",
     "--", "sh", "-c", sys.argv[1]],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines() if line)
kept = fields.get("worktree", "")
seen = {"code": done.returncode, "err": done.stderr.decode(), "files": {}, "modes": {}}
for folder in ("src", "made"):
    path = os.path.join(kept, folder)
    if os.path.isdir(path):
        seen["files"][folder] = sorted(os.listdir(path))
        seen["modes"][folder] = oct(os.stat(path).st_mode & 0o777)
        os.chmod(path, 0o755)  # for the clean-up
print(json.dumps(seen))
"""


def _kept_read_only(seen: dict) -> None:
    assert seen["code"] == 0, seen["err"]
    assert "could not keep" not in seen["err"], seen["err"]
    assert seen["files"] == {"src": ["a.c", "new.c"], "made": ["m"]}, seen
    assert seen["modes"] == {"src": "0o555", "made": "0o555"}, seen


@pytest.mark.hostile
def test_a_kept_worktree_holds_the_folders_the_command_made_read_only(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n"})
    run = isopatch("--porcelain", "--keep", "--", "sh", "-c", READ_ONLY, cwd=repo, env=env)
    kept = Path(run.fields()["worktree"])
    seen = {"code": run.returncode, "err": run.err, "files": {}, "modes": {}}
    for folder in ("src", "made"):
        seen["files"][folder] = sorted(os.listdir(kept / folder))
        seen["modes"][folder] = oct((kept / folder).stat().st_mode & 0o777)
    _kept_read_only(seen)
    git("worktree", "remove", "--force", kept, cwd=repo, env=env)


@pytest.mark.hostile
def test_a_kept_worktree_holds_read_only_folders_as_an_unprivileged_user(env) -> None:
    """Without root's rights, a folder without write permission takes no
    new entry and cannot be moved to another folder: the kept worktree
    must still be the tree the command left, modes and all."""
    with run_as_nobody(env, KEPT_AS_NOBODY, READ_ONLY) as seen:
        _kept_read_only(seen)


#: Scribbles on the run's own index in place (the same file, not git's
#: rename over it), then leaves a change.
SCRIBBLE = (
    'index=$(git rev-parse --git-path index); printf garbage 1<> "$index"; '
    ': > "$index"; echo more >> README'
)


@pytest.mark.hostile
@pytest.mark.parametrize("keep", [False, True])
def test_a_command_writing_its_index_in_place_leaves_the_base_trees_as_it_was(
    env, make_repo, keep: bool
) -> None:
    """The run's index starts as a copy of the base tree's, and the base
    tree's own index stands for the index as made (put back when the
    worktree is kept): neither is the command's to write, nor removed
    with the run."""
    repo = make_repo({"README": "hello\n", "src/a.c": "a\n"})
    isopatch("-q", "--", "true", cwd=repo, env=env)
    (base,) = _base_trees(repo)
    index = Path(git("rev-parse", "--git-path", "index", cwd=base, env=env).decode().strip())
    index = index if index.is_absolute() else base / index
    before = index.read_bytes()
    options = ("--keep",) if keep else ()
    run = isopatch("--porcelain", *options, "--", "sh", "-c", SCRIBBLE, cwd=repo, env=env)
    assert index.read_bytes() == before, run.err
    if keep:
        kept = Path(run.fields()["worktree"])
        status = git("status", "--porcelain", cwd=kept, env=env).decode().splitlines()
        assert status == [" M README"], status  # its index the base tree's again
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)
    later = isopatch("--porcelain", "--", "git", "status", "--porcelain", cwd=repo, env=env)
    assert later.returncode == 0, later.err
    assert Path(later.fields()["stdout"]).read_text() == ""
    assert _base_trees(repo) == [base] and index.read_bytes() == before


def test_a_run_ends_over_its_base_tree_while_another_holds_the_worktree_lock(
    env, make_repo, tmp_path: Path
) -> None:
    """A run over a base tree removes its own worktree without the
    worktree lock: runs started together do not wait for each other's
    deletions, and one holding the lock for long does not keep this one's
    worktree (or a lock-timeout warning) behind."""
    repo = make_repo({"README": "hello\n"})
    isopatch("-q", "--", "true", cwd=repo, env=env)
    marks = tmp_path / "marks"
    marks.mkdir()
    script = (
        f"echo x >> README; : > '{marks}/started'; while [ ! -e '{marks}/go' ]; do sleep 0.05; done"
    )
    run = subprocess.Popen(
        [BIN_DIR / "git-isopatch", "--porcelain", "--allow-write", marks, "--", "sh", "-c", script],
        cwd=repo,
        env={**env, "ISOPATCH_LOCK_TIMEOUT": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lock = repo / ".git" / "isopatch.lock"
    holder = None
    try:
        deadline = time.monotonic() + 60
        while not (marks / "started").exists() and run.poll() is None:
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        holder = subprocess.Popen(["flock", lock, "sleep", "600"], start_new_session=True)
        while subprocess.run(["flock", "-n", lock, "true"], check=False).returncode == 0:
            time.sleep(0.05)
        (marks / "go").touch()
        out, err = run.communicate(timeout=120)
    finally:
        if holder is not None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
    assert run.returncode == 0, err
    assert b"warning" not in err and b"lock" not in err, err
    assert (
        b"+x"
        in Path(
            dict(line.split(b" ", 1) for line in out.splitlines())[b"patch"].decode()
        ).read_bytes()
    )
    assert not [p for p in repo.parent.iterdir() if ".isopatch-" in p.name]
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    assert listed.count("worktree ") == 2, listed  # the checkout and the base tree


def test_include_uncommitted_goes_over_the_base_tree_of_head(env, make_repo) -> None:
    repo = make_repo({"README": "hello\n", "old.txt": "old\n", "dir/only.txt": "x\n"})
    isopatch("-q", "--", "true", cwd=repo, env=env)
    (base,) = _base_trees(repo)
    (repo / "README").write_text("edited, not committed\n")
    (repo / "old.txt").unlink()
    (repo / "dir" / "only.txt").unlink()
    (repo / "untracked.txt").write_text("new\n")
    script = "ls -A; cat README; echo changed >> untracked.txt"
    run = isopatch(
        "--porcelain", "--include-uncommitted", "--", "sh", "-c", script, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    seen = Path(run.fields()["stdout"]).read_text().split("\n")
    assert seen[:4] == [".git", "README", "untracked.txt", "edited, not committed"]
    patch = Path(run.fields()["patch"]).read_bytes()
    assert run.fields()["files"] == "1" and b"+changed" in patch
    assert _base_trees(repo) == [base]


def test_an_idle_base_tree_unused_for_two_weeks_expires_with_the_result_folders(
    env, make_repo
) -> None:
    repo = make_repo({"README": "hello\n"})
    isopatch("-q", "--", "true", cwd=repo, env=env)
    (base,) = _base_trees(repo)
    (record,) = (repo / ".git" / "worktrees").glob("*/isopatch-base.json")
    weeks = time.time() - 15 * 24 * 3600
    record.write_text(json.dumps({**json.loads(record.read_text()), "used": weeks}))
    isopatch("-q", "--no-sandbox", "--", "true", cwd=repo, env=env)
    assert base.is_dir(), "expired before its day: the daily expiry ran with the first run"
    os.utime(repo / ".git" / "isopatch.lock", (weeks, weeks))
    isopatch("-q", "--no-sandbox", "--", "true", cwd=repo, env=env)
    assert not base.exists() and _base_trees(repo) == []


@pytest.mark.hostile
@pytest.mark.parametrize("first", ["sparse", "full"])
def test_worktrees_of_one_repository_with_other_sparse_patterns_get_their_own_base_tree(
    env, make_repo, tmp_path: Path, first: str
) -> None:
    """``git worktree add`` copies the sparse-checkout patterns and the
    ``config.worktree`` of the worktree it runs from: a base tree made for
    a sparse checkout is sparse.  A run from another worktree of the same
    repository (a linked worktree of the user's, not sparse) sees its own
    checkout's files, as a worktree of its own gives them, never the other's."""
    repo = make_repo({"a/x": "1\n", "b/y": "2\n", "t": "top\n"})
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", "--detach", linked, cwd=repo, env=env)
    git("sparse-checkout", "set", "a", cwd=repo, env=env)
    order = [(repo, "a t"), (linked, "a b t")]
    for top, seen in order if first == "sparse" else order[::-1]:
        run = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", "ls", cwd=top, env=env)
        assert run.returncode == 0, run.err
        assert Path(run.fields()["stdout"]).read_text().split() == seen.split(), top
    change = isopatch("--porcelain", "--", "sh", "-c", "echo w > b/y", cwd=linked, env=env)
    assert change.returncode == 0, change.err
    assert change.fields()["files"] == "1"


@pytest.mark.hostile
def test_a_layer_of_deep_folders_moves_across_file_systems(tmp_path) -> None:
    """``$TMPDIR`` on a tmpfs, the checkout on another file system (a
    common set-up): a kept worktree's layer cannot be renamed into it and
    is copied (:func:`git_isopatch.worktrees.materialise._move`), folder by
    folder; 1,200 nested folders a command made, their modes, links and
    FIFOs, are no reason for a RecursionError (a traceback, the result lost)."""
    from repo_helpers import tmpfs

    from git_isopatch.worktrees.deletion import delete_tree
    from git_isopatch.worktrees.materialise import _move

    with tmpfs(tmp_path / "tmpfs", "16m") as layer:
        (layer / "top").mkdir()
        fd = os.open(layer / "top", os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(1200):  # os.makedirs recurses too
            os.mkdir("d", dir_fd=fd)
            fd, parent = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(parent)
        with os.fdopen(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as out:
            out.write("x\n")
        os.symlink("f", "ln", dir_fd=fd)
        os.mkfifo("fifo", dir_fd=fd)
        os.close(fd)
        (layer / "top" / "d").chmod(0o555)
        folder = os.open(layer, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _move(folder, "top", str(tmp_path / "kept"))
            _assert_deep(tmp_path / "kept")
        finally:
            os.close(folder)
            delete_tree(str(tmp_path / "kept"))  # pytest's own clean-up recurses


def _assert_deep(kept: Path) -> None:
    deepest = os.path.join(*["d"] * 1200)
    fd = os.open(kept, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inner = os.open(deepest, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        try:
            assert sorted(os.listdir(inner)) == ["f", "fifo", "ln"]
            assert os.readlink("ln", dir_fd=inner) == "f"
            assert stat.S_ISFIFO(os.stat("fifo", dir_fd=inner, follow_symlinks=False).st_mode)
        finally:
            os.close(inner)
    finally:
        os.close(fd)
    assert stat.S_IMODE((kept / "d").stat().st_mode) == 0o555


def test_a_kept_worktree_with_tmpdir_on_another_file_system(env, make_repo, tmp_path) -> None:
    """``$TMPDIR`` a tmpfs (the default of several distributions), the
    checkout on another file system: the kept worktree holds what the
    command left, not only its ``.git`` (copy_file_range refuses two file
    systems of different types)."""
    from repo_helpers import tmpfs

    repo = make_repo({"README": "hello\n", "src/a.c": "a\n"})
    with tmpfs(tmp_path / "tmpfs", "64m") as tmp:
        env["TMPDIR"] = str(tmp)
        script = "echo more >> README; mkdir -p new/deep && echo n > new/deep/n"
        run = isopatch("--porcelain", "--keep", "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        assert "warning" not in run.err, run.err
        kept = Path(run.fields()["worktree"])
        assert (kept / "README").read_text() == "hello\nmore\n"
        assert (kept / "new" / "deep" / "n").read_text() == "n\n"
        assert (kept / "src" / "a.c").read_text() == "a\n"
        status = git("status", "--porcelain", cwd=kept, env=env).decode().splitlines()
        assert sorted(status) == [" M README", "?? new/"]
        git("worktree", "remove", "--force", kept, cwd=repo, env=env)


def _records(repo: Path) -> dict[str, dict]:
    """Each base tree's record (its commit, whether it is ready), by folder."""
    found = {}
    for tree in _base_trees(repo):
        admin_dir = Path((tree / ".git").read_text().split(": ", 1)[1].strip())
        found[str(tree)] = json.loads((admin_dir / "isopatch-base.json").read_text())
    return found


def test_a_base_tree_whose_checkout_was_killed_goes_first_and_is_never_used(
    env, make_repo, tmp_path: Path
) -> None:
    """Two sessions stand on base trees at A and B; a run at C must make a
    third, and is killed (SIGKILL, with its git) while it checks it out.
    That tree is not ready, and newer than the others: when the sessions
    end and at most two are kept, it is the one that goes, never a good
    one; a later run at C makes it afresh."""
    marks = tmp_path / "marks"
    marks.mkdir()
    repo = make_repo({"README": "a\n", ".gitattributes": "slow.txt filter=slow\n"})
    smudge = (
        f"sh -c 'if [ -e {marks}/slow ]; then echo $$ > {marks}/filter; : > {marks}/checkout;"
        " sleep 600; fi; cat'"
    )
    git("config", "filter.slow.smudge", smudge, cwd=repo, env=env)
    commits = {"A": git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()}
    for name, content in (("B", "b\n"), ("C", "c\n")):
        (repo / ("README" if name == "B" else "slow.txt")).write_text(content)
        git("add", "-A", cwd=repo, env=env)
        git("commit", "-q", "-m", name, cwd=repo, env=env)
        commits[name] = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    for session in ("A", "B"):
        done = isopatch(
            "--session", session, "--base", commits[session], "--", "true", cwd=repo, env=env
        )
        assert done.returncode == 0, done.err
    (marks / "slow").touch()
    killed = subprocess.Popen(
        [BIN_DIR / "git-isopatch", "-q", "--base", commits["C"], "--", "true"],
        cwd=repo, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (marks / "checkout").exists():
            assert killed.poll() is None and time.monotonic() < deadline, "no checkout at C"
            time.sleep(0.05)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
        if (marks / "filter").exists():  # the checkout's git and its filter: a group of their own
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(int((marks / "filter").read_text())), signal.SIGKILL)
    (marks / "slow").unlink()
    records = _records(repo)
    assert sorted((r["commit"], r["ready"]) for r in records.values()) == sorted(
        [(commits["A"], True), (commits["B"], True), (commits["C"], False)]
    ), records
    for session in ("A", "B"):
        ended = isopatch("--session", session, "--end", cwd=repo, env=env)
        assert ended.returncode == 0, ended.err
    records = _records(repo)
    assert sorted(r["commit"] for r in records.values()) == sorted([commits["A"], commits["B"]])
    assert all(r["ready"] for r in records.values()), records
    again = isopatch(
        "--porcelain", "--base", commits["C"], "--", "cat", "slow.txt", cwd=repo, env=env
    )
    assert again.returncode == 0, again.err
    assert Path(again.fields()["stdout"]).read_text() == "c\n"


def test_list_porcelain_gives_a_base_trees_creation_and_its_age_since_last_use(
    env, make_repo
) -> None:
    """A base tree's ``created`` is when it was made (its record's), not
    when a run last used it; the human list's age is since that last use."""
    repo = make_repo()
    for _ in range(2):
        done = isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=env)
        assert done.returncode == 0, done.err
        time.sleep(1.2)
    (entry,) = [e for e in _listed(repo, env) if e["state"] == "base"]
    (record,) = (repo / ".git" / "worktrees").glob("*/isopatch-base.json")
    made = json.loads(record.read_text())
    assert made["used"] - made["created"] > 1, made
    assert entry["created"] == str(int(made["created"])), (entry, made)
    (line,) = [ln for ln in isopatch("list", cwd=repo, env=env).out.splitlines() if " base " in ln]
    age = int(re.search(r"(\d+) seconds? ago", line).group(1))
    assert age < time.time() - made["created"] - 0.5, (line, made)


def test_a_folder_of_the_base_tree_renames_as_in_a_worktree_of_its_own(make_repo, env) -> None:
    """The manual's "Base trees": overlayfs in a user namespace renames no
    folder a lower layer holds (``EXDEV``), so the sandbox renames it for
    the command (:mod:`git_isopatch.sandbox.renames`): ``git mv`` of one
    gives the patch it gives unconfined, ``mv`` too, and a folder the
    command made renames as ever."""
    repo = make_repo({"d/x": "x\n", "README": "r\n"})
    moved = isopatch("--sandbox", "--stdout", "--", "git", "mv", "d", "e", cwd=repo, env=env)
    assert moved.returncode == 0, moved.err
    plain = isopatch("--no-sandbox", "--stdout", "--", "git", "mv", "d", "e", cwd=repo, env=env)
    assert plain.returncode == 0, plain.err
    assert moved.stdout == plain.stdout and b"rename to e/x" in moved.stdout, moved.stdout
    script = "mv d e && mkdir f && mv f g && echo y > g/y"
    copied = isopatch("--sandbox", "--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert copied.returncode == 0, copied.err
    paths = sorted(line for line in copied.out.splitlines() if line.startswith("path "))
    assert paths == ["path A g/y", "path R100 e/x\td/x"]


def test_at_zero_a_run_never_goes_over_a_base_tree_an_earlier_run_left(env, make_repo) -> None:
    """``isopatch.baseTrees=0`` (fully ephemeral runs): a base tree kept
    while the setting was higher is not used, and goes, as git drops its
    untracked cache when ``core.untrackedCache`` is turned off."""
    repo = make_repo({"README": "hello\n"})
    assert isopatch("-q", "--", "true", cwd=repo, env=env).returncode == 0
    (base,) = _base_trees(repo)
    (base / "planted").write_text("left by an unconfined command\n")
    zero = ("-c", "isopatch.baseTrees=0")
    run = isopatch("--", "test", "!", "-e", "planted", cwd=repo, env=env, git_options=zero)
    assert run.returncode == 0, "the run stood on the base tree an earlier run left"
    assert _base_trees(repo) == [] and not base.parent.exists()
