"""A base tree made before the table of its index was kept (design:
procedure step 6, the extraction reads the compared entries alone) gets
its table from the first run over it, once, however many runs start
together at it; until then, and for a run that finds another writing it,
git reads the whole index.

A base tree of an earlier version is the base tree of a run with its
table taken away: its look (the baseline) is the same.  Git's own trace
(``GIT_TRACE2_EVENT``, written inside the sandbox to a folder of
``--allow-write``) says how many entries each extraction git read; the
kernel's ``inotify`` says how often the table was written (each write
renames a new file over the name)."""

from __future__ import annotations

import ctypes
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, base_trees, git, isopatch, write_tree

from git_isopatch.git.index_entries import parse_entries
from git_isopatch.git.partial_index import TABLE_HEADER, index_table

#: Enough entries that a look at a few reads far fewer than the whole index.
FILES: dict[str, str] = {
    **{f"lib/m{n:02d}.c": f"int m{n};\n" for n in range(30)},
    "a.txt": "a\n",
}
TABLE = "isopatch-index-table"
SCRIPT = "echo more >> lib/m07.c"
#: Runs started together at one base tree.
TOGETHER = 8
IN_MOVED_TO = 0x80


def _old_base_tree(repo: Path, env: dict[str, str]) -> Path:
    """The private folder of the base tree of HEAD, made as an earlier
    version left it: no table beside its index."""
    run = isopatch("-q", "--sandbox", "--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    (tree,) = base_trees(repo, env)
    admin = Path(git("rev-parse", "--git-dir", cwd=Path(tree), env=env).decode().strip())
    (admin / TABLE).unlink()
    return admin


def _table_of_index(admin: Path) -> bytes:
    """The table the base tree's index has (what a look keeps)."""
    return reference_table((admin / "index").read_bytes())


def reference_table(data: bytes) -> bytes:
    """The table of the index ``data`` as :func:`parse_entries` finds its
    entries: the checksum, the size and number of entries, each start."""
    starts: list[int] = []
    assert parse_entries(data, 20, starts) is not None
    numbers = b"".join(start.to_bytes(4, "big") for start in starts)
    size = len(data).to_bytes(8, "big") + len(starts).to_bytes(4, "big")
    return TABLE_HEADER + data[-20:] + size + numbers


def _diff_reads(trace: Path) -> list[int]:
    """How many index entries each ``git diff`` of ``trace`` read."""
    names: dict[str, str] = {}
    read: list[int] = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "cmd_name":
            names[event["sid"]] = event["name"]
        elif event.get("event") == "data" and event.get("key") == "read/cache_nr":
            if names.get(event["sid"]) == "diff":
                read.append(int(event["value"]))
    return read


def _traced_run(repo: Path, env: dict[str, str], tmp_path: Path):
    """A sandboxed run of :data:`SCRIPT`, and the entries its ``git diff`` read."""
    folder = tmp_path / "trace"
    folder.mkdir(exist_ok=True)
    trace = folder / "events"
    trace.unlink(missing_ok=True)
    run = isopatch(
        "--porcelain",
        "--sandbox",
        "--allow-write",
        str(folder),
        "--",
        "sh",
        "-c",
        SCRIPT,
        cwd=repo,
        env={**env, "GIT_TRACE2_EVENT": str(trace)},
    )
    assert run.returncode == 0, run.err
    return run, _diff_reads(trace)


def test_the_first_run_over_an_old_base_tree_keeps_its_table(env, make_repo, tmp_path) -> None:
    """The run writes the table before its extraction, and its extraction
    already reads the compared entries alone; the patch is the one of a
    worktree of its own."""
    repo = make_repo(FILES)
    admin = _old_base_tree(repo, env)
    run, reads = _traced_run(repo, env, tmp_path)
    assert (admin / TABLE).read_bytes() == _table_of_index(admin)
    assert reads and max(reads) < len(FILES), reads
    own = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", SCRIPT, cwd=repo, env=env)
    assert own.returncode == 0, own.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert patch == Path(own.fields()["patch"]).read_bytes()
    assert b"+++ b/lib/m07.c" in patch


def _watch(folder: Path) -> tuple[int, ctypes.CDLL]:
    """An ``inotify`` descriptor told of each file renamed into ``folder``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    assert libc.inotify_add_watch(fd, os.fsencode(folder), IN_MOVED_TO) >= 0
    return fd, libc


def _renamed_in(fd: int) -> list[bytes]:
    """The names renamed into the watched folder since it was watched."""
    names: list[bytes] = []
    try:
        data = os.read(fd, 1 << 16)
    except BlockingIOError:
        return names
    at = 0
    while at < len(data):
        _, mask, _, length = struct.unpack_from("iIII", data, at)
        name = data[at + 16 : at + 16 + length].rstrip(b"\0")
        if mask & IN_MOVED_TO:
            names.append(name)
        at += 16 + length
    return names


@pytest.mark.hostile
def test_runs_started_together_write_the_table_once(env, make_repo, tmp_path) -> None:
    """Eight runs start together at an old base tree: the table is written
    once (one run takes the lock beside it; the others read the whole
    index meanwhile, or find it written), it is the index's, and every
    patch is the same."""
    repo = make_repo(FILES)
    write_tree(repo, {"b.txt": "b\n"})  # nothing of the user's is in a patch
    admin = _old_base_tree(repo, env)
    fd, _ = _watch(admin)
    try:
        patches = [tmp_path / f"run-{n}.patch" for n in range(TOGETHER)]
        runs = [
            subprocess.Popen(
                [str(ISOPATCH), "-q", "-o", str(p), "--sandbox", "--", "sh", "-c", SCRIPT],
                cwd=repo,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for p in patches
        ]
        for process in runs:
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, (out, err)
        written = _renamed_in(fd)
    finally:
        os.close(fd)
    assert written.count(TABLE.encode()) == 1, written
    assert (admin / TABLE).read_bytes() == _table_of_index(admin)
    assert not [p for p in os.listdir(admin) if p.endswith(".isopatch-tmp")]
    first = patches[0].read_bytes()
    assert b"+++ b/lib/m07.c" in first and b"b.txt" not in first
    assert all(p.read_bytes() == first for p in patches)


@pytest.mark.hostile
def test_a_run_finding_the_table_being_written_leaves_it(env, make_repo, tmp_path) -> None:
    """Another holds the lock beside the table (it writes it): a run
    neither waits nor writes it, and its git reads the whole index; once
    the lock is let go, the next run writes it."""
    import fcntl

    repo = make_repo(FILES)
    admin = _old_base_tree(repo, env)
    fd = os.open(admin / f"{TABLE}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _, reads = _traced_run(repo, env, tmp_path)
        assert not (admin / TABLE).exists()
        assert reads and max(reads) >= len(FILES), reads
    finally:
        os.close(fd)
    run = isopatch("-q", "--sandbox", "--", "sh", "-c", SCRIPT, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (admin / TABLE).read_bytes() == _table_of_index(admin)


def test_an_index_that_has_no_table_is_looked_at_once(env, make_repo, tmp_path) -> None:
    """A version 4 index (``index.version=4``, as ``feature.manyFiles``
    sets, in a base tree made before its index was always of version 2)
    stores each path as the difference from the one before: it has no
    table.  The first run over the old base tree says so beside it, and
    the runs after it do not parse the whole index again."""
    repo = make_repo(FILES)
    admin = _old_base_tree(repo, env)
    (tree,) = base_trees(repo, env)
    git("update-index", "--index-version", "4", cwd=Path(tree), env=env)
    assert (admin / "index").read_bytes()[4:8] == (4).to_bytes(4, "big")
    for writes in (1, 0):
        fd, _ = _watch(admin)
        try:
            run, reads = _traced_run(repo, env, tmp_path)
            written = _renamed_in(fd)
        finally:
            os.close(fd)
        assert reads and max(reads) >= len(FILES), reads
        assert (admin / TABLE).is_file()
        assert written.count(TABLE.encode()) == writes, written
    own = isopatch("--porcelain", "--no-sandbox", "--", "sh", "-c", SCRIPT, cwd=repo, env=env)
    assert Path(run.fields()["patch"]).read_bytes() == Path(own.fields()["patch"]).read_bytes()


def test_the_walk_of_an_index_finds_what_its_parse_finds(env, make_repo) -> None:
    """The table and the gitlinks of one walk over the entries, against
    the whole parse: a gitlink, an intent-to-add entry (extended flags: a
    version 3 index), a path of 4095 bytes and more (its length is past the
    flags' mask), conflict stages; a version 4 index is left to the parse,
    a sparse one has no table."""
    repo = make_repo(FILES)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    blob = git("rev-parse", "HEAD:a.txt", cwd=repo, env=env).decode().strip()
    long = "/".join(["d" * 200] * 21) + "/f"
    info = f"160000 {head} 0\tsub\n100644 {blob} 0\t{long}\n"
    info += "".join(f"100644 {blob} {stage}\tlib/m03.c\n" for stage in (1, 2, 3))
    git("update-index", "--index-info", cwd=repo, env=env, input=info.encode())
    write_tree(repo, {"new.c": "n\n"})
    git("add", "-N", "new.c", cwd=repo, env=env)
    data = (repo / ".git" / "index").read_bytes()
    assert data[4:8] == (3).to_bytes(4, "big")
    assert index_table(data, 20) == (reference_table(data), [b"sub"])
    git("update-index", "--index-version", "2", cwd=repo, env=env)
    git("update-index", "--force-remove", "new.c", cwd=repo, env=env)
    data = (repo / ".git" / "index").read_bytes()
    assert data[4:8] == (2).to_bytes(4, "big")
    assert index_table(data, 20) == (reference_table(data), [b"sub"])
    git("update-index", "--index-version", "4", cwd=repo, env=env)
    assert index_table((repo / ".git" / "index").read_bytes(), 20) is None
    sparse = bytearray(data)
    at = reference_table(data)
    first = int.from_bytes(at[len(TABLE_HEADER) + 32 : len(TABLE_HEADER) + 36], "big")
    sparse[first + 24 : first + 28] = (0o040000).to_bytes(4, "big")
    assert index_table(bytes(sparse), 20) == (None, [b"sub"])
