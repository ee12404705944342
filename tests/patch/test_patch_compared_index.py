"""The index the extraction reads over a base tree (design: procedure step
6): while the run's index is still the copy of the base tree's, git reads
an index holding only what it needs to compare the paths the run's layer
holds, copied from the base tree's index with their stat data; the patch
is byte for byte the one the whole index gives.

Git's own trace (``GIT_TRACE2_EVENT``, written inside the sandbox to a
folder of ``--allow-write``) says how many entries each extraction git
read (``read/cache_nr``).  The hostile cases are what git reads of the
index beside the paths compared: a sparse checkout's ``.gitignore`` and
``.gitattributes`` (read from the index where the work tree lacks them), a
tracked folder that is a nested repository's, a gitlink on the way to a
new path, conflict stages; and a table of the base tree's index that no
longer matches it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from repo_helpers import base_trees, git, isopatch, write_tree

from git_isopatch.git.index_entries import parse_entries
from git_isopatch.git.partial_index import index_table, partial_index

#: Enough entries that a look at a few reads far fewer than the whole index.
FILES: dict[str, str] = {
    **{f"lib/m{n:02d}.c": f"int m{n};\n" for n in range(30)},
    "lib/deep/x.c": "int x;\n",
    "a.txt": "a\n",
    "README": "r\n",
}

#: An extraction's git processes (over a base tree, in the sandbox).
EXTRACTION = ("ls-files", "add", "diff")


def _reads(trace: Path) -> dict[str, list[int]]:
    """How many index entries each git command of ``trace`` read."""
    names: dict[str, str] = {}
    read: dict[str, list[int]] = {}
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "cmd_name":
            names[event["sid"]] = event["name"]
        elif event.get("event") == "data" and event.get("key") == "read/cache_nr":
            name = names.get(event["sid"], "?")
            read.setdefault(name, []).append(int(event["value"]))
    return read


def _run(repo: Path, env: dict[str, str], tmp_path: Path, script: str, *options: str):
    """The patch of ``script``, and the entries each git of the run read."""
    folder = tmp_path / "trace"
    folder.mkdir(exist_ok=True)
    trace = folder / "events"
    trace.unlink(missing_ok=True)
    sandboxed = "--no-sandbox" not in options
    allow = ("--allow-write", str(folder)) if sandboxed else ()
    run = isopatch(
        "--porcelain",
        *options,
        *allow,
        "--",
        "sh",
        "-c",
        script,
        cwd=repo,
        env={**env, "GIT_TRACE2_EVENT": str(trace)},
    )
    assert run.returncode == 0, run.err
    return Path(run.fields()["patch"]).read_bytes(), _reads(trace)


def _patches(repo: Path, env: dict[str, str], tmp_path: Path, script: str):
    """The patches over a base tree (made, then kept) and of a worktree of
    its own, the same; what the run over the kept base tree read."""
    cold, _ = _run(repo, env, tmp_path, script, "--sandbox")
    assert len(base_trees(repo, env)) == 1, "the run went over a base tree"
    warm, read = _run(repo, env, tmp_path, script, "--sandbox")
    own, _ = _run(repo, env, tmp_path, script, "--no-sandbox")
    assert cold == own, (cold, own)
    assert warm == own, (warm, own)
    return own, read


def _few(read: dict[str, list[int]], most: int) -> None:
    for name in EXTRACTION:
        assert all(count <= most for count in read.get(name, [])), read
    assert read.get("diff"), read


def test_the_extraction_reads_the_compared_entries_alone(env, make_repo, tmp_path) -> None:
    repo = make_repo(FILES)
    script = "echo more >> lib/m07.c && echo n > lib/new.c && rm a.txt"
    patch, read = _patches(repo, env, tmp_path, script)
    for holds in (b"+++ b/lib/m07.c", b"+++ b/lib/new.c", b"--- a/a.txt"):
        assert holds in patch, patch
    # lib/m07.c, a.txt and lib's first entry, then lib/new.c intent-to-add
    _few(read, 4)
    assert read["add"], read  # the new file went in as intent-to-add


def test_a_change_to_tracked_files_alone_takes_one_git(env, make_repo, tmp_path) -> None:
    """Every path the layer holds is an entry of the compared index (ours,
    made after the command) and none is a folder now: no file is new,
    git-isopatch lists those entries itself, and the diff is the
    extraction's one git."""
    repo = make_repo(FILES)
    script = "echo more >> lib/m07.c && rm a.txt && chmod +x README"
    patch, read = _patches(repo, env, tmp_path, script)
    for holds in (b"+++ b/lib/m07.c", b"--- a/a.txt", b"new mode 100755"):
        assert holds in patch, patch
    assert {name for name in read if name in EXTRACTION} == {"diff"}, read


@pytest.mark.hostile
def test_an_index_the_command_rewrote_is_read_whole(env, make_repo, tmp_path) -> None:
    """The command's ``git add -f`` of an ignored file rewrote the run's
    index: its entries are the command's, not the base tree's (where the
    file would be ignored), and git reads them all."""
    repo = make_repo({**FILES, ".gitignore": "*.log\n"})
    patch, read = _patches(repo, env, tmp_path, "echo l > y.log && git add -f y.log")
    assert b"+++ b/y.log" in patch, patch
    assert max(read["diff"]) >= len(FILES), read


@pytest.mark.hostile
def test_a_sparse_checkouts_ignore_and_attributes_come_from_the_index(
    env, make_repo, tmp_path
) -> None:
    """The sparse checkout leaves out ``.gitignore`` and ``lib/.gitattributes``:
    git reads both from the index, so ``x.log`` stays ignored and the CRLF
    written to ``lib/m07.c`` is converted, as with the whole index."""
    files = {**FILES, ".gitignore": "*.log\n", "lib/.gitattributes": "*.c text eol=crlf\n"}
    files["lib/.editorconfig"] = "root = true\n"  # lib's first entry, before .gitattributes
    repo = make_repo(files)
    git("config", "core.sparseCheckout", "true", cwd=repo, env=env)
    sparse = "/*\n!/.gitignore\n!/lib/.gitattributes\n"
    (repo / ".git" / "info" / "sparse-checkout").write_text(sparse)
    git("read-tree", "-mu", "HEAD", cwd=repo, env=env)
    assert not (repo / ".gitignore").exists()
    assert not (repo / "lib" / ".gitattributes").exists()
    script = "echo l > x.log && echo n > n.txt && printf 'int y;\\r\\n' > lib/m07.c"
    patch, read = _patches(repo, env, tmp_path, script)
    assert b"x.log" not in patch, patch
    assert b"+int y;\n" in patch, patch
    _few(read, 6)


@pytest.mark.hostile
def test_a_tracked_folder_made_a_repository(env, make_repo, tmp_path) -> None:
    """The command makes the tracked folder ``lib`` a repository of its own
    and writes a file deep in it: ``lib`` is compared whole, git finds it
    tracked before it asks whether it is a repository, and shows the file."""
    repo = make_repo(FILES)
    script = "git init -q lib && echo y > lib/deep/y.c"
    patch, _ = _patches(repo, env, tmp_path, script)
    assert b"+++ b/lib/deep/y.c" in patch, patch
    assert b"Subproject" not in patch, patch


def _table(folder: Path, index: Path) -> Path:
    walked = index_table(index.read_bytes(), 20)
    assert walked is not None and walked[0] is not None
    (folder / "table").write_bytes(walked[0])
    return folder / "table"


def _looks(repo: Path, env: dict[str, str], index: Path, paths: list[bytes]) -> list[bytes]:
    """What the extraction's git says of ``paths`` with ``index``: the
    listing of tracked and new files, what ``add -N`` says of the new
    ones, the entries then, and the diff."""
    env = {**env, "GIT_INDEX_FILE": str(index)}
    specs = [":(top,literal)" + os.fsdecode(path) for path in paths]
    listing = ["ls-files", "-z", "-v", "-c", "-o", "--exclude-standard", "--", *specs]
    said = [git(*listing, cwd=repo, env=env)]
    new = [b":(top,literal)" + p[2:] for p in said[0].split(b"\0") if p.startswith(b"? ")]
    if new:
        added = subprocess.run(
            ["git", "add", "-N", "--", *new], cwd=repo, env=env, capture_output=True
        )
        said += [added.stdout, added.stderr, bytes([added.returncode])]
    said.append(git("ls-files", "-s", "--", *specs, cwd=repo, env=env))
    return [*said, git("diff", "--binary", "HEAD", "--", *specs, cwd=repo, env=env)]


def _same_as_whole(repo: Path, env: dict[str, str], tmp_path: Path, paths: list[bytes]) -> None:
    whole = tmp_path / "whole"
    shutil.copyfile(repo / ".git" / "index", whole)
    table = _table(tmp_path, whole)
    data = partial_index(str(whole), str(table), paths, 20)
    assert data is not None
    part = tmp_path / "part"
    part.write_bytes(data)
    assert len(parse_entries(data, 20) or []) < len(parse_entries(whole.read_bytes(), 20) or [])
    wanted = _looks(repo, env, whole, paths)
    assert _looks(repo, env, part, paths) == wanted, wanted
    git("fsck", "--no-dangling", "--cache", cwd=repo, env={**env, "GIT_INDEX_FILE": str(part)})


@pytest.mark.hostile
def test_a_folder_tracked_beside_a_nested_repository(env, make_repo, tmp_path) -> None:
    """``lib`` is tracked and holds a ``.git``: git asks the index whether
    ``lib`` is tracked (its first entry) before it takes it for a nested
    repository, and then lists ``lib/new.c`` as new."""
    repo = make_repo(FILES)
    git("init", "-q", "lib", cwd=repo, env=env)
    write_tree(repo, {"lib/new.c": "n\n"})
    _same_as_whole(repo, env, tmp_path, [b"lib/new.c"])


@pytest.mark.hostile
def test_a_gitlink_on_the_way_to_a_new_path(env, make_repo, tmp_path) -> None:
    """A new file below the gitlink ``sub``: ``git add`` refuses a path in
    a submodule, which it finds by the gitlink's entry."""
    repo = make_repo(FILES)
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    git("update-index", "--add", "--cacheinfo", f"160000,{head},sub", cwd=repo, env=env)
    write_tree(repo, {"sub/new.c": "n\n"})
    _same_as_whole(repo, env, tmp_path, [b"sub/new.c"])


@pytest.mark.hostile
def test_conflict_stages(env, make_repo, tmp_path) -> None:
    """Every stage of a path in conflict is its entry."""
    repo = make_repo(FILES)
    blob = git("rev-parse", "HEAD:a.txt", cwd=repo, env=env).decode().strip()
    info = f"0 {'0' * 40}\tlib/m03.c\n"
    info += "".join(f"100644 {blob} {stage}\tlib/m03.c\n" for stage in (1, 2, 3))
    git("update-index", "--index-info", cwd=repo, env=env, input=info.encode())
    _same_as_whole(repo, env, tmp_path, [b"lib/m03.c", b"a.txt"])


@pytest.mark.hostile
def test_a_table_the_base_trees_index_no_longer_matches(env, make_repo, tmp_path) -> None:
    """The base tree moved to a commit that changes a file (an index of the
    same size, its entries where they were), and its old table is put back:
    the table is not the index's, so git reads the run's own index, whole."""
    repo = make_repo(FILES)
    _run(repo, env, tmp_path, "true", "--sandbox")
    (tree,) = base_trees(repo, env)
    admin = Path(git("rev-parse", "--git-dir", cwd=Path(tree), env=env).decode().strip())
    old = (admin / "isopatch-index-table").read_bytes()
    write_tree(repo, {"README": "R\n"})
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "more", cwd=repo, env=env)
    _run(repo, env, tmp_path, "true", "--sandbox")  # the base tree moves
    assert base_trees(repo, env) == [tree]
    (admin / "isopatch-index-table").write_bytes(old)
    script = "echo more >> lib/m07.c && echo n > lib/new.c"
    patch, read = _run(repo, env, tmp_path, script, "--sandbox")
    own, _ = _run(repo, env, tmp_path, script, "--no-sandbox")
    assert patch == own, (patch, own)
    assert max(read["diff"]) >= len(FILES), read
