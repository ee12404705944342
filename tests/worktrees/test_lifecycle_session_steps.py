"""A sandboxed session's steps over its base tree give the patches an
unconfined session's give: each step's own patch and the whole change,
whatever state the earlier steps (and the user's staged work the session
started from) left in its index and its files."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from repo_helpers import git, isopatch, repo_state, write_tree
from session_helpers import session_manifest, step

CHANGE_SCRIPT = Path(__file__).resolve().parents[1] / "change_script.py"

CONFINEMENTS = ("--sandbox", "--no-sandbox")


def _session(repo: Path, env: dict, name: str, start: tuple, commands: list) -> list:
    """The steps of session ``name`` (the first with ``start``): each
    step's patch and the session's whole change after it, then its end."""
    patches = []
    for number, command in enumerate(commands):
        result = step(repo, env, name, *command, options=start if number == 0 else ())
        assert result["exit"] == 0, result
        whole = Path(result["session-patch"]).read_bytes()
        patches.append((Path(result["patch"]).read_bytes(), whole))
    assert isopatch("--session", name, "--end", cwd=repo, env=env).returncode == 0
    return patches


#: name -> (what the user stages over the gitlink ``sub``, the steps)
GITLINK_STEPS = {
    "staged bump put back by reset --hard": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        [("true",), ("git", "reset", "-q", "--hard", "HEAD")],
    ),
    "staged bump put back by checkout": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        [("true",), ("git", "checkout", "-q", "HEAD", "--", "sub")],
    ),
    "staged bump removed by rm --cached": (
        [("--cacheinfo", f"160000,{'2' * 40},sub")],
        [("true",), ("git", "rm", "-q", "--cached", "sub")],
    ),
    "a step's bump put back by the next": (
        [],
        [
            ("git", "update-index", "--cacheinfo", f"160000,{'3' * 40},sub"),
            ("git", "reset", "-q", "--hard", "HEAD"),
        ],
    ),
}


@pytest.mark.parametrize("case", GITLINK_STEPS)
def test_a_gitlink_a_later_step_puts_back_is_in_its_patch(env, make_repo, case) -> None:
    """An unpopulated submodule is its index entry alone: a later step
    that puts it back to the base tree's changes the session as the step
    found it, and its patch says so sandboxed as unconfined."""
    repo = make_repo({"README": "r\n"})
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "sub", cwd=repo, env=env)
    staged, commands = GITLINK_STEPS[case]
    for options in staged:
        git("update-index", *options, cwd=repo, env=env)
    start = ("--staged",) if staged else ()
    patches = {c: _session(repo, env, "s", (*start, c), commands) for c in CONFINEMENTS}
    assert b"sub" in patches["--no-sandbox"][-1][0]
    assert patches["--sandbox"] == patches["--no-sandbox"]


#: name -> (the path a step makes over the base's unpopulated gitlink
#: ``g``, what it writes there)
REMOVED_LATER = {
    "a new file": ("new", "two"),
    "a file in a gitlink's place": ("g", "two"),
    "a new .gitattributes": (".gitattributes", "*.txt text"),
}


@pytest.mark.parametrize("case", REMOVED_LATER)
def test_a_file_an_earlier_step_made_and_a_later_removes_is_in_its_patch(
    env, make_repo, case
) -> None:
    """A file a step makes where the base tree holds nothing (a new file;
    a file where an unpopulated submodule's entry stays in the index) and
    a later step removes leaves the layer without a trace of it (no lower
    layer holds it: no whiteout); the later step's patch deletes it all
    the same, sandboxed as unconfined, and a ``.gitattributes`` removed so
    has ``crlf.txt`` back with CRLF."""
    repo = make_repo({"a": "one\n", "crlf.txt": b"one\r\n"})
    git("update-index", "--add", "--cacheinfo", f"{GITLINKS[0]},g", cwd=repo, env=env)
    git("commit", "-q", "-m", "g", cwd=repo, env=env)
    path, data = REMOVED_LATER[case]
    clean = "sleep 1; git status -s > /dev/null; "
    commands = [
        ("sh", "-c", f"{clean}rm -rf {path}; echo '{data}' > {path}"),
        ("sh", "-c", f"{clean}rm {path}"),
    ]
    start = ("--include-uncommitted",)
    patches = {c: _session(repo, env, "s", (*start, c), commands) for c in CONFINEMENTS}
    assert patches["--sandbox"] == patches["--no-sandbox"]
    removal = patches["--no-sandbox"][1][0]
    assert f"--- a/{path}\n+++ /dev/null\n@@ -1 +0,0 @@\n-{data}\n".encode() in removal, removal
    crlf = b"+++ b/crlf.txt\n@@ -1 +1 @@\n-one\n+one\r\n"
    assert (crlf in removal) == (path == ".gitattributes"), removal


NAMES = ("a", "b", "c d")
#: Paths of few names: folders nest and have neighbours.
step_paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=2).map("/".join)
#: Few contents: a step often writes back what was there.
step_contents = st.sampled_from([b"one\n", b"two\n", b"", b"\0bin\n"])
GITLINKS = (f"160000,{'1' * 40}", f"160000,{'2' * 40}")


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def _git(*args: str) -> dict:
    return {"kind": "git", "args": list(args)}


def _change(path: str, to: str, data: bytes, flag: bool, kind: str) -> dict:
    """One change of ``kind`` to the files or the index at ``path``."""
    file_changes = {
        "write": {"kind": "write", "path": _b64(path), "data": _b64(data), "exec": flag},
        "remove": {"kind": "remove", "path": _b64(path)},
        "chmod": {"kind": "chmod", "path": _b64(path), "exec": flag},
        "symlink": {"kind": "symlink", "path": _b64(path), "target": _b64(to)},
        "rename": {"kind": "rename", "path": _b64(path), "to": _b64(to)},
        "commit": {"kind": "commit"},
    }
    index_changes = {
        "add": ("add", "-A", "--", path),
        "intent": ("add", "-N", "--", path),
        "unstage": ("rm", "-q", "-r", "--cached", "--", path),
        "reset": ("reset", "-q", "--", path),
        "reset-hard": ("reset", "-q", "--hard", "HEAD"),
        "checkout": ("checkout", "-q", "HEAD", "--", path),
        "gitlink": ("update-index", "--add", "--cacheinfo", f"{GITLINKS[flag]},{path}"),
        "commit-index": ("commit", "-q", "--allow-empty", "-m", "index"),
    }
    if kind in file_changes:
        return file_changes[kind]
    return _git(*index_changes[kind])


KINDS = (
    "write", "remove", "chmod", "symlink", "rename", "commit", "add", "intent", "unstage",
    "reset", "reset-hard", "checkout", "gitlink", "commit-index",
)  # fmt: skip

#: A step's paths, the base's gitlink ``g`` among them.
changed_paths = st.one_of(step_paths, st.just("g"))
changes = st.builds(
    _change, changed_paths, step_paths, step_contents, st.booleans(), st.sampled_from(KINDS)
)
#: What the user does between two steps: nothing, a commit (``HEAD``
#: moves), a sandboxed run at the new ``HEAD`` (which would move an idle
#: base tree there), ``prune --sessions`` (the sessions end).
BETWEEN = ("nothing", "commit", "run", "prune")
#: One base tree kept: a run at another commit moves an idle one there.
ONE_BASE_TREE = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "isopatch.baseTrees",
    "GIT_CONFIG_VALUE_0": "1",
}


def _script(root: Path, name: str, listed: list[dict]) -> tuple[str, ...]:
    spec = root / f"{name}.json"
    spec.write_text(json.dumps({"changes": listed}))
    return (sys.executable, str(CHANGE_SCRIPT), str(spec))


def _between(repo: Path, env: dict, root: Path, number: int, what: str) -> None:
    if what == "commit":
        (repo / f"later{number}").write_text(f"{number}\n")
        git("add", f"later{number}", cwd=repo, env=env)
        git("commit", "-q", "-m", f"later {number}", cwd=repo, env=env)
    elif what == "run":
        _between(repo, env, root, number, "commit")
        other = isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=env)
        assert other.returncode == 0, other.err
    elif what == "prune":
        pruned = isopatch("prune", "--sessions", cwd=repo, env=env)
        assert pruned.returncode == 0, pruned.err


def _step_result(repo: Path, env: dict, name: str, options: tuple, command: tuple) -> tuple:
    """A step's exit and error code, its patch and the session's."""
    done = isopatch("--session", name, "--json", *options, "--", *command, cwd=repo, env=env)
    result = json.loads(done.out)
    patches = [Path(result[key]).read_bytes() if key in result else None
               for key in ("patch", "session-patch")]  # fmt: skip
    return (done.returncode, result.get("error-code"), *patches)


@settings(
    max_examples=int(os.environ.get("HSESS_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=st.dictionaries(step_paths, step_contents, min_size=1, max_size=4).filter(
        lambda t: not any(p.split("/")[0] in t for p in t if "/" in p)
    ),
    gitlink=st.booleans(),
    user=st.lists(changes, max_size=3),
    start=st.sampled_from([(), ("--staged",), ("--include-uncommitted",)]),
    steps=st.lists(
        st.tuples(st.lists(changes, min_size=1, max_size=3), st.sampled_from(BETWEEN)),
        min_size=1,
        max_size=3,
    ),
)
@example(  # a file in the gitlink's place, removed by a later step
    tree={"a": b"one\n"},
    gitlink=True,
    user=[],
    start=("--include-uncommitted",),
    steps=[
        (
            [_change("g", "a", b"", False, "remove"), _change("g", "a", b"two\n", False, "write")],
            "nothing",
        ),
        ([_change("g", "a", b"", False, "remove")], "nothing"),
    ],
)
def test_generated_steps_give_a_sandboxed_session_the_unconfined_patches(
    env, tree, gitlink, user, start, steps
) -> None:
    """Over the user's staged and unstaged work (a gitlink, an
    intent-to-add entry among it), steps that change files and the index
    (type and mode changes, links, renames, whole folders removed,
    gitlinks, intent-to-add entries, commits, a change put back) with the
    user's ``HEAD`` moving between them, other runs and ``prune
    --sessions``: a sandboxed session's every step gives the unconfined
    session's exit, patch and whole change, its worktree ends the same,
    and the user's repository is as the user left it."""
    env = {**env, **ONE_BASE_TREE}
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as folder:
        root = Path(folder)
        repo = root / "repo"
        repo.mkdir()
        git("init", "-q", "-b", "main", cwd=repo, env=env)
        write_tree(repo, tree)
        git("add", "-A", cwd=repo, env=env)
        if gitlink:
            git("update-index", "--add", "--cacheinfo", f"{GITLINKS[0]},g", cwd=repo, env=env)
        git("commit", "-q", "-m", "base", cwd=repo, env=env)
        done = subprocess.run(_script(root, "user", user), cwd=repo, env=env)
        assert done.returncode == 0
        state = repo_state(repo, env)
        for number, (listed, between) in enumerate(steps):
            command = _script(root, f"step{number}", listed)
            options = start if number == 0 else ()
            sandboxed = _step_result(repo, env, "sb", ("--sandbox", *options), command)
            unconfined = _step_result(repo, env, "un", ("--no-sandbox", *options), command)
            assert sandboxed == unconfined, (number, listed)
            assert _without_worktrees(repo_state(repo, env)) == _without_worktrees(state)
            if number < len(steps) - 1:
                _between(repo, env, root, number, between)
                state = repo_state(repo, env)
        assert session_manifest(repo, env, "sb") == session_manifest(repo, env, "un")
        for name in ("sb", "un"):
            assert isopatch("--session", name, "--end", cwd=repo, env=env).returncode == 0


def _without_worktrees(state: dict) -> dict:
    """The user's repository but its list of worktrees (a session's is
    registered)."""
    return {key: value for key, value in state.items() if key != "worktree list"}


@pytest.mark.parametrize("name", ["attributes", ".gitattributes"])
def test_files_an_attributes_change_converts_anew_stay_so_in_later_steps(
    env, make_repo, name
) -> None:
    """The step that writes ``*.txt text`` into a ``.gitattributes`` or
    the worktree's own attributes file (a relative ``core.attributesFile``,
    read from its top) has the untouched ``crlf.txt`` stored with LF: in
    its patch and in the session's state, so that a later step that
    changes something else leaves it be, and the one that empties the
    file has it back with CRLF; sandboxed as unconfined, the index's
    entries made clean (``git status`` a second later: git compares the
    times to the second where built without nanoseconds) before each
    change."""
    repo = make_repo({"crlf.txt": b"one\r\ntwo\r\n", name: b"", "a.txt": b"a\n"})
    if name == "attributes":
        git("config", "core.attributesFile", name, cwd=repo, env=env)
    clean = "sleep 1; git status -s > /dev/null; "
    commands = [
        ("sh", "-c", f"{clean}echo '*.txt text' > {name}"),
        ("sh", "-c", f"{clean}echo n > new.txt"),
        ("sh", "-c", f"{clean}: > {name}"),
    ]
    patches = {c: _session(repo, env, "s", (c,), commands) for c in CONFINEMENTS}
    assert patches["--sandbox"] == patches["--no-sandbox"]
    (first, after_first), (second, after_second), (third, whole) = patches["--no-sandbox"]
    lf = b"+++ b/crlf.txt\n@@ -1,2 +1,2 @@\n-one\r\n-two\r\n+one\n+two\n"
    assert lf in first and lf in after_first and lf in after_second, (first, after_first)
    assert b"crlf.txt" not in second and b"+++ b/new.txt" in second, second
    assert b"@@ -1,2 +1,2 @@\n-one\n-two\n+one\r\n+two\r\n" in third, third
    assert b"crlf.txt" not in whole and b"+++ b/new.txt" in whole, whole
