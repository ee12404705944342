"""A command cannot change what the base's objects read as to git-isopatch's
own git, and so hide a change from the patch (design: The patch, "what
the command left is hostile input").

The extraction's ``git diff <base>`` reads the base's commit, trees and
blobs through the repository's object store and refs as the command left
them (its copy-on-write view under the sandbox, the repository itself
unconfined), and git never checks that an object hashes to its name.  A
command that edits ``README`` and makes git read the base's blob of it as
the edit (a replace ref, ``git replace <blob> <new>``; the loose object
rewritten in place; a pack of its own whose index names the base's blob
for the edit) or the base's tree as its own (a ``commit-graph`` it wrote)
left git nothing to show: the patch was empty while the worktree held the
edit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state
from sandbox_helpers import run_as_nobody

#: Edits ``README`` and replaces the base's blob of it with the new one.
REPLACE = """\
set -e
old=$(git rev-parse HEAD:README)
printf 'edited\\n' > README
git replace -f "$old" "$(git hash-object -w README)"
"""


#: Edits ``README`` and rewrites the base's loose object of it, in place,
#: to hold the edit.
REWRITE = """\
import os, subprocess, zlib
oid = subprocess.check_output(["git", "rev-parse", "HEAD:README"], text=True).strip()
store = subprocess.check_output(["git", "rev-parse", "--git-path", "objects"], text=True)
path = os.path.join(store.strip(), oid[:2], oid[2:])
with open(path + ".new", "wb") as handle:
    handle.write(zlib.compress(b"blob 7\\0edited\\n"))
os.replace(path + ".new", path)
with open("README", "wb") as handle:
    handle.write(b"edited\\n")
"""

#: Edits ``README`` and adds a pack holding the edit, whose index names it
#: by the base's blob of ``README`` (git reads packs before loose objects):
#: to the repository's store, or with an argument to a store of its own
#: of that name in the git directory, made an alternate of the repository's.
PACK = """\
import hashlib, os, struct, subprocess, sys, zlib
oid = subprocess.check_output(["git", "rev-parse", "HEAD:README"], text=True).strip()
store = subprocess.check_output(["git", "rev-parse", "--git-path", "objects"], text=True).strip()
if sys.argv[1:]:  # beside the repository's store, where our own git sees it
    with open(os.path.join(store, "info", "alternates"), "w") as handle:
        handle.write(f"../{sys.argv[1]}\\n")
    store = os.path.join(store, "..", sys.argv[1])
    os.makedirs(os.path.join(store, "pack"))
data = b"edited\\n"
entry = bytes([0x30 | len(data)]) + zlib.compress(data)
pack = b"PACK" + struct.pack(">II", 2, 1) + entry
pack += hashlib.sha1(pack).digest()
first = int(oid[:2], 16)
fanout = b"".join(struct.pack(">I", int(i >= first)) for i in range(256))
index = b"\\377tOc" + struct.pack(">I", 2) + fanout + bytes.fromhex(oid)
index += struct.pack(">II", zlib.crc32(entry), 12) + pack[-20:]
index += hashlib.sha1(index).digest()
name = os.path.join(store, "pack", "pack-" + pack[-20:].hex())
with open(name + ".pack", "wb") as handle:
    handle.write(pack)
with open(name + ".idx", "wb") as handle:
    handle.write(index)
with open("README", "wb") as handle:
    handle.write(data)
"""

#: Edits ``README``, commits it, and writes a ``commit-graph`` that gives
#: the base commit the tree of that commit.
GRAPH = """\
import os, subprocess
def git(*args):
    return subprocess.check_output(["git", *args], text=True).strip()
tree = bytes.fromhex(git("rev-parse", "HEAD^{tree}"))
with open("README", "wb") as handle:
    handle.write(b"edited\\n")
git("commit", "-q", "-a", "-m", "edited")
forged = bytes.fromhex(git("rev-parse", "HEAD^{tree}"))
git("reset", "-q", "--soft", "HEAD^")
git("commit-graph", "write", "--reachable")
path = git("rev-parse", "--git-path", "objects/info/commit-graph")
with open(path, "rb") as handle:
    data = handle.read()
assert data.count(tree) == 1
os.chmod(path, 0o644)
with open(path, "wb") as handle:
    handle.write(data.replace(tree, forged))
"""


def _edit_in_the_patch(run, repo: Path, tmp_path: Path, env) -> None:
    """The run took the edit: its patch gives ``edited`` on a clean
    checkout of the base."""
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["files"] == "1", run.out
    clean = apply_to_clean_checkout(repo, "HEAD", Path(fields["patch"]), tmp_path / "clean", env)
    assert (clean / "README").read_bytes() == b"edited\n"


@pytest.mark.hostile
@pytest.mark.parametrize("confined", ["--sandbox", "--no-sandbox"])
def test_a_replace_ref_the_command_makes_hides_no_edit(
    env, make_repo, tmp_path: Path, confined: str
) -> None:
    repo = make_repo({"README": "hello\n"})
    script = tmp_path / "replace.sh"
    script.write_text(REPLACE)
    before = repo_state(repo, env)
    run = isopatch(confined, "--porcelain", "--", "sh", script, cwd=repo, env=env)
    _edit_in_the_patch(run, repo, tmp_path, env)
    assert "refs/replace/" in run.err  # named, as any ref the command changed
    if confined == "--sandbox":
        assert repo_state(repo, env) == before


@pytest.mark.hostile
def test_the_users_own_replace_refs_still_shape_the_patch(env, make_repo, tmp_path: Path) -> None:
    """A replace ref of the user's stays in force: the worktree is checked
    out through it, and the patch applies to a checkout that is too."""
    repo = make_repo({"README": "hello\n"})
    (repo / "README").write_text("replaced\n")
    new = git("hash-object", "-w", "README", cwd=repo, env=env).decode().strip()
    git("replace", git("rev-parse", "HEAD:README", cwd=repo, env=env).decode().strip(), new,
        cwd=repo, env=env)  # fmt: skip
    git("checkout", "-q", "--", "README", cwd=repo, env=env)
    script = tmp_path / "edit.sh"
    script.write_text("printf 'edited\\n' >> README\n")
    run = isopatch("--porcelain", "--", "sh", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"])
    assert b"\n replaced\n+edited\n" in patch.read_bytes()
    git("apply", "--check", patch, cwd=repo, env=env)


#: As uid 65534: a run of the command ``sys.argv[1:]`` in a repository
#: tracking ``README``, and what it left of ``README``: on a clean checkout
#: with its patch applied, or in the worktree it kept.
AS_NOBODY = """
def git(*args, cwd=repo):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout
with open(os.path.join(repo, "README"), "w") as handle:
    handle.write("hello\\n")
git("add", "README")
git("commit", "-q", "-m", "readme")
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--", *sys.argv[1:]],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines() if line)
top = fields.get("worktree")
if "patch" in fields:
    top = os.path.join(os.environ["HOME"], "clean")
    git("clone", "-q", "--shared", repo, top)
    if os.path.getsize(fields["patch"]):
        git("apply", "--binary", fields["patch"], cwd=top)
with open(os.path.join(top, "README")) as handle:
    readme = handle.read()
print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "readme": readme,
                  "error-code": fields.get("error-code")}))
"""


@pytest.mark.hostile
def test_a_replace_ref_hides_no_edit_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, "sh", "-c", REPLACE) as seen:
        assert seen["code"] == 0, seen["err"]
        assert seen["readme"] == "edited\n", seen


@pytest.mark.hostile
def test_a_forged_base_object_is_never_read_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, "python3", "-c", REWRITE) as seen:
        assert seen["code"] == 128, seen["err"]
        assert seen["error-code"] == "unsafe-git-dir", seen
        assert seen["readme"] == "edited\n", seen


@pytest.mark.hostile
@pytest.mark.parametrize(
    "script, args",
    [(REWRITE, ()), (PACK, ()), (PACK, ("forged",))],
    ids=["loose", "pack", "alternate"],
)
def test_a_base_object_the_command_forges_is_never_read(
    env, make_repo, tmp_path: Path, script: str, args: tuple[str, ...]
) -> None:
    """The run fails, naming what the command wrote, its worktree kept:
    the edit is not lost, and no patch without it is taken."""
    repo = make_repo({"README": "hello\n"})
    (tmp_path / "forge.py").write_text(script)
    run = isopatch("--sandbox", "--porcelain", "--", "python3", tmp_path / "forge.py", *args,
                   cwd=repo, env=env)  # fmt: skip
    git("fsck", "--no-dangling", cwd=repo, env=env)  # the repository's own is intact
    assert run.returncode == 128, run.err
    fields = run.fields()
    assert fields["error-code"] == "unsafe-git-dir", run.out
    assert "patch" not in fields
    assert f"'{repo}/.git/objects/" in run.err
    assert (Path(fields["worktree"]) / "README").read_bytes() == b"edited\n"


@pytest.mark.hostile
def test_a_commit_graph_the_command_forges_is_never_read(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo({"README": "hello\n"})
    (tmp_path / "forge.py").write_text(GRAPH)
    run = isopatch("--sandbox", "--porcelain", "--", "python3", tmp_path / "forge.py", cwd=repo,
                   env=env)  # fmt: skip
    _edit_in_the_patch(run, repo, tmp_path, env)


@pytest.mark.hostile
def test_objects_the_commands_git_writes_and_packs_are_read(env, make_repo, tmp_path: Path) -> None:
    """``git add`` of content the repository's pack holds (the pack
    freshened: copied up whole), a commit, ``git repack -d`` (a new pack,
    the loose objects removed): nothing is refused."""
    repo = make_repo({"README": "hello\n"})
    git("gc", "-q", cwd=repo, env=env)
    script = tmp_path / "commit.sh"
    script.write_text(
        "set -e\n"
        "cp README same && git add same\n"
        "echo new > new && git add new && git commit -q -m new\n"
        "git repack -d -q\n"
        "printf 'edited\\n' > README\n"
    )
    run = isopatch("--sandbox", "--porcelain", "--", "sh", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["files"] == "3", run.out
    clean = apply_to_clean_checkout(repo, "HEAD", Path(fields["patch"]), tmp_path / "clean", env)
    assert (clean / "README").read_bytes() == b"edited\n"
    assert (clean / "new").read_bytes() == b"new\n"
    assert (clean / "same").read_bytes() == b"hello\n"


#: Edits ``README`` and adds to the session's object store (the
#: alternate the command is told of) a pack whose index names the base's
#: blob of ``README`` for the edit.
SESSION_STORE = PACK.replace(
    'store = subprocess.check_output(["git", "rev-parse", "--git-path", "objects"], text=True)'
    ".strip()",
    'store = os.environ["GIT_ALTERNATE_OBJECT_DIRECTORIES"].strip(\'"\')',
)


@pytest.mark.hostile
def test_a_session_store_the_step_forges_is_never_read(env, make_repo, tmp_path: Path) -> None:
    """The session's store lies in the worktree's private folder, which the
    command writes for real: a pack it added there made the session's
    whole patch read the base's blob as the edit (empty)."""
    assert SESSION_STORE != PACK
    repo = make_repo({"README": "hello\n"})
    first = isopatch("--sandbox", "--session", "s", "--", "true", cwd=repo, env=env)
    assert first.returncode == 0, first.err
    (tmp_path / "forge.py").write_text(SESSION_STORE)
    run = isopatch("--sandbox", "--porcelain", "--session", "s", "--", "python3",
                   tmp_path / "forge.py", cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 128, run.err
    fields = run.fields()
    assert fields["error-code"] == "unsafe-git-dir", run.out
    assert "session-patch" not in fields
