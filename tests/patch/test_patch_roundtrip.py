"""The central invariant (design: "The patch"): on generated trees and
changes, applying the captured patch to a clean checkout of the base
reproduces the tree the command left, byte for byte, and the user's
repository is bit-identical before and after; also with every diff setting
of the hostile profile in the global configuration, and from inside a
hook-like environment."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hostile import install_hostile_profile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_helpers import (
    apply_to_clean_checkout,
    git,
    isopatch,
    repo_state,
    write_tree,
)

#: What git exports to a pre-commit hook of ``git --git-dir=.git commit -a``
#: (relative GIT_DIR, GIT_INDEX_FILE at the user's index lock), and to a
#: ``!`` alias (GIT_PREFIX).
HOOK_ENVIRONMENT = {
    "GIT_DIR": ".git",
    "GIT_INDEX_FILE": ".git/index",
    "GIT_PREFIX": "",
    "GIT_EDITOR": ":",
    "GIT_REFLOG_ACTION": "commit",
}


CHANGE_SCRIPT = Path(__file__).resolve().parents[1] / "change_script.py"


NAME_ALPHABET = "abcXYZ019 -_.\t\"\\'é日\n"


names = st.text(NAME_ALPHABET, min_size=1, max_size=6).filter(
    lambda n: n not in (".", "..") and not n.startswith(".git") and n != "ignored"
)


paths = st.lists(names, min_size=1, max_size=3).map("/".join)


contents = st.one_of(
    st.just(b""),
    st.binary(max_size=48),
    st.lists(st.sampled_from([b"alpha", b"beta", b"", b"\tgamma  ", b"\xff\xfe"]), max_size=6).map(
        lambda lines: b"\n".join(lines) + b"\n"
    ),
    st.lists(st.sampled_from([b"line", b"other"]), min_size=1, max_size=4).map(b"\n".join),
    st.binary(min_size=1, max_size=16).map(lambda b: b"\0" + b * 4),
)


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data if isinstance(data, bytes) else os.fsencode(data)).decode()


def _no_prefix_clash(tree: dict[str, bytes]) -> bool:
    names_ = set(tree)
    return not any(
        "/".join(name.split("/")[:i]) in names_
        for name in names_
        for i in range(1, name.count("/") + 1)
    )


base_trees = st.dictionaries(paths, contents, min_size=1, max_size=5).filter(_no_prefix_clash)


@st.composite
def change_lists(
    draw: st.DrawFn, tree: dict[str, bytes], new_paths: st.SearchStrategy[str] = paths
) -> list[dict]:
    existing = sorted(tree)
    any_path = st.one_of(st.sampled_from(existing), new_paths) if existing else new_paths
    change = st.one_of(
        st.builds(
            lambda p, d, x: {"kind": "write", "path": _b64(p), "data": _b64(d), "exec": x},
            any_path,
            contents,
            st.booleans(),
        ),
        st.builds(lambda p: {"kind": "delete", "path": _b64(p)}, any_path),
        st.builds(
            lambda p, x: {"kind": "chmod", "path": _b64(p), "exec": x}, any_path, st.booleans()
        ),
        st.builds(
            lambda p, t: {"kind": "symlink", "path": _b64(p), "target": _b64(t)},
            any_path,
            new_paths,
        ),
        st.builds(
            lambda p, t: {"kind": "rename", "path": _b64(p), "to": _b64(t)}, any_path, new_paths
        ),
        st.just({"kind": "commit"}),
        st.just({"kind": "ignored"}),
    )
    return draw(st.lists(change, min_size=1, max_size=6))


def _load_manifest(path: Path) -> dict[bytes, tuple]:
    manifest = {}
    for key, value in json.loads(path.read_text()):
        if value[0] == "link":
            manifest[base64.b64decode(key)] = ("link", base64.b64decode(value[1]))
        else:
            manifest[base64.b64decode(key)] = tuple(value)
    return manifest


def _examples(count: int) -> settings:
    """Hypothesis's settings for ``count`` examples of a test that runs
    git-isopatch: no deadline, function-scoped fixtures allowed."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def _committed(root: Path, env: dict[str, str], tree: dict[str, bytes]) -> Path:
    """``root/repo``, a repository of one commit on ``main`` holding
    ``tree`` and a ``.gitignore`` of ``ignored/``."""
    repo = root / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo, env=env)
    write_tree(repo, {".gitignore": "ignored/\n", **tree})
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "base", cwd=repo, env=env)
    return repo


def _check_roundtrip(
    root: Path,
    env: dict[str, str],
    tree: dict[str, bytes],
    changes: list[dict],
    extra_args: tuple[str, ...] = (),
    isopatch_env: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> None:
    repo = _committed(root, env, tree)
    # the user has work in progress: staged, unstaged and untracked, and a stash
    (repo / ".gitignore").write_text("ignored/\n# staged edit\n")
    git("add", ".gitignore", cwd=repo, env=env)
    (repo / "untracked file").write_bytes(b"mine\n")
    base = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()

    spec = root / "spec.json"
    spec.write_text(json.dumps({"changes": changes}))
    manifest_file = root / "manifest.json"
    manifest_file.touch()
    if "--no-sandbox" not in options:  # the manifest is written outside the worktree
        options = (*options, "--allow-write", str(manifest_file))
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        *options,
        "--",
        sys.executable,
        CHANGE_SCRIPT,
        spec,
        manifest_file,
        *extra_args,
        cwd=repo,
        env=isopatch_env or env,
    )
    after = repo_state(repo, env)
    assert run.returncode == 0, run.err + (
        Path(run.fields().get("stderr", "/dev/null")).read_text() if run.out else ""
    )
    assert before == after
    fields = run.fields()
    assert fields["base"] == base
    patch = Path(fields["patch"])
    assert b"ignored/" not in patch.read_bytes()
    checkout = apply_to_clean_checkout(repo, base, patch, root / "checkout", env)
    from repo_helpers import tree_manifest

    assert tree_manifest(checkout, exclude=(".git", "ignored")) == _load_manifest(manifest_file)
    # one path record per path in the patch (a type change is two diff --git entries, one path)
    paths = [line for line in run.out.splitlines() if line.startswith("path ")]
    assert int(fields["files"]) == len(paths)
    assert len(paths) <= patch.read_bytes().count(b"diff --git ")
    assert not list(Path(fields["patch"]).parent.glob("*/.git")), "worktree left behind"


@pytest.mark.hostile
@pytest.mark.parametrize("profile", ["hostile global configuration", "hook environment"])
@_examples(10)
@given(data=st.data(), tree=base_trees)
def test_patch_reproduces_the_worktree_in_hostile_environments(
    env: dict[str, str], data: st.DataObject, tree: dict[str, bytes], profile: str
) -> None:
    changes = data.draw(change_lists(tree))
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as root:
        if profile == "hook environment":
            run_env = {**env, **HOOK_ENVIRONMENT}
            check_env = env
        else:
            global_config = Path(env["HOME"]) / ".gitconfig"
            global_config.unlink(missing_ok=True)
            run_env = install_hostile_profile(env, Path(root) / "scripts")
            check_env = env
        _check_roundtrip(Path(root), check_env, tree, changes, isopatch_env=run_env)


@_examples(30)
@given(data=st.data(), tree=base_trees)
def test_patch_reproduces_the_worktree_and_repository_is_untouched(
    env: dict[str, str], data: st.DataObject, tree: dict[str, bytes]
) -> None:
    changes = data.draw(change_lists(tree))
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as root:
        # unconfined; the default sandbox: test_round_trip_under_the_sandbox
        _check_roundtrip(Path(root), env, tree, changes, options=("--no-sandbox",))


@_examples(6)
@given(data=st.data(), tree=base_trees)
def test_round_trip_under_the_sandbox(
    env: dict[str, str], data: st.DataObject, tree: dict[str, bytes]
) -> None:
    """The same property with ``--sandbox``: the changes, commits made
    inside the worktree included, come back whole."""
    changes = data.draw(change_lists(tree))
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as root:
        _check_roundtrip(Path(root), env, tree, changes, options=("--sandbox",))


def _patches(
    root: Path, env: dict[str, str], tree: dict[str, bytes], changes: list[dict]
) -> list[bytes]:
    """The patches of the same change: sandboxed over a base tree it makes,
    sandboxed again over the kept one, and unconfined in a worktree of its
    own (every path compared)."""
    repo = _committed(root, env, tree)
    spec = root / "spec.json"
    spec.write_text(json.dumps({"changes": changes}))
    patches = []
    for number, options in enumerate([("--sandbox",), ("--sandbox",), ("--no-sandbox",)]):
        manifest = root / f"manifest-{number}.json"
        manifest.touch()
        allow = ("--allow-write", str(manifest)) if "--sandbox" in options else ()
        run = isopatch(
            "--porcelain",
            *options,
            *allow,
            "--",
            sys.executable,
            CHANGE_SCRIPT,
            spec,
            manifest,
            cwd=repo,
            env=env,
        )
        assert run.returncode == 0, run.err
        patches.append(Path(run.fields()["patch"]).read_bytes())
    return patches


@_examples(12)
@given(data=st.data(), tree=base_trees)
def test_the_patch_over_a_base_tree_is_the_patch_of_a_worktree_of_its_own(
    env: dict[str, str], data: st.DataObject, tree: dict[str, bytes]
) -> None:
    """Over a base tree only the paths the command's layer holds are
    compared: the patch is the same, byte for byte, as the one that
    compares every path in a worktree of its own, cold or warm."""
    changes = data.draw(change_lists(tree))
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as root:
        cold, warm, unconfined = _patches(Path(root), env, tree, changes)
        assert cold == unconfined
        assert warm == unconfined


@pytest.mark.parametrize(
    "options",
    [(), ("--no-sandbox",), ("--sandbox",)],
    ids=["plain", "unconfined", "sandbox"],
)
def test_every_kind_of_change_round_trips(
    env: dict[str, str], tmp_path: Path, options: tuple[str, ...]
) -> None:
    """A fixed example with each change the issue lists, so that a failure
    of one kind does not depend on hypothesis finding it."""
    tree = {
        "modified.txt": b"one\ntwo\n",
        "deleted.txt": b"gone\n",
        "binary.bin": bytes(range(256)),
        "exec.sh": b"#!/bin/sh\n",
        "link": "symlink:modified.txt",
        "to-symlink": b"a file\n",
        "renamed-from.txt": b"some content that is long enough to be found as a rename\n" * 4,
        "empty": b"",
        "dir/nested.txt": b"nested\n",
    }
    changes = [
        {"kind": "write", "path": _b64("modified.txt"), "data": _b64(b"one\n2\n"), "exec": False},
        {"kind": "delete", "path": _b64("deleted.txt")},
        {"kind": "write", "path": _b64("binary.bin"), "data": _b64(b"\0\xff" * 300), "exec": False},
        {"kind": "chmod", "path": _b64("exec.sh"), "exec": True},
        {"kind": "symlink", "path": _b64("to-symlink"), "target": _b64("dir/nested.txt")},
        {"kind": "delete", "path": _b64("link")},
        {"kind": "write", "path": _b64("link"), "data": _b64(b"now a file\n"), "exec": False},
        {"kind": "rename", "path": _b64("renamed-from.txt"), "to": _b64("new/dir/renamed.txt")},
        {"kind": "write", "path": _b64("empty"), "data": _b64(b"not empty\n"), "exec": False},
        {"kind": "write", "path": _b64("new empty"), "data": _b64(b""), "exec": False},
        {"kind": "commit"},
        {"kind": "write", "path": _b64("-leading dash"), "data": _b64(b"x\n"), "exec": False},
        {
            "kind": "write",
            "path": _b64('q"uo\\te\tand\nnewline'),
            "data": _b64(b"y\n"),
            "exec": False,
        },
        {"kind": "write", "path": _b64("non-ascii é日.txt"), "data": _b64(b"\xff\n"), "exec": True},
        {"kind": "ignored"},
    ]
    tree_bytes = {k: v for k, v in tree.items()}
    _check_roundtrip(tmp_path, env, tree_bytes, changes, options=options)


def test_large_binary_change_round_trips(env: dict[str, str], tmp_path: Path) -> None:
    """A 20 MB binary change (issue 2)."""
    blob = os.urandom(20 * 1024 * 1024)
    changes = [{"kind": "write", "path": _b64("big.bin"), "data": _b64(blob), "exec": False}]
    _check_roundtrip(tmp_path, env, {"small": b"x\n"}, changes)


@pytest.mark.parametrize("subdir", ["sub", "sub/deeper"])
def test_command_runs_in_the_mirrored_subdirectory(
    env: dict[str, str], make_repo, subdir: str
) -> None:
    repo = make_repo({"sub/deeper/file": "x\n"})
    run = isopatch("--porcelain", "--", "sh", "-c", "pwd > here.txt", cwd=repo / subdir, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert f"b/{subdir}/here.txt".encode() in patch
    assert f"/{subdir}\n".encode() in patch


#: Paths of few names: folders nest and have neighbours, as the layer's
#: whiteouts need (a removal two folders deep beside a kept folder).
nested_paths = st.lists(st.sampled_from(["a", "b", "c d"]), min_size=1, max_size=3).map("/".join)

nested_trees = st.dictionaries(nested_paths, contents, min_size=2, max_size=5).filter(
    _no_prefix_clash
)


@st.composite
def user_change_lists(draw: st.DrawFn, tree: dict[str, bytes]) -> list[dict]:
    """Work in progress on ``tree``: the command's changes, or a folder
    (or any path) removed whole."""
    folders = sorted({p.rsplit("/", 1)[0] for p in tree if "/" in p})
    removed = st.sampled_from(folders or sorted(tree)).map(
        lambda p: {"kind": "remove", "path": _b64(p)}
    )
    changes = draw(change_lists(tree, nested_paths))
    plain = [c for c in changes if c["kind"] not in ("commit", "ignored")]
    return [*plain, *draw(st.lists(removed, max_size=2))]


def _run_change_script(repo: Path, env: dict[str, str], changes: list[dict]) -> None:
    spec, manifest = repo.parent / "user-spec.json", repo.parent / "user-manifest.json"
    spec.write_text(json.dumps({"changes": changes}))
    done = subprocess.run([sys.executable, CHANGE_SCRIPT, spec, manifest], cwd=repo, env=env)
    assert done.returncode == 0


@_examples(10)
@given(
    data=st.data(),
    tree=nested_trees,
    start=st.sampled_from(["--staged", "--include-uncommitted"]),
)
def test_a_snapshot_over_the_base_tree_of_head_is_a_worktree_of_its_own(
    env: dict[str, str], data: st.DataObject, tree: dict[str, bytes], start: str
) -> None:
    """With ``--staged`` and ``--include-uncommitted`` a sandboxed run goes
    over the base tree of ``HEAD``, the user's staged and unstaged changes
    put in its layer: the command leaves the same tree and the same patch
    as in a worktree of the snapshot of its own, and that patch applied to
    a clean checkout of the snapshot reproduces the tree."""
    staged, unstaged = data.draw(user_change_lists(tree)), data.draw(user_change_lists(tree))
    changes = data.draw(change_lists(tree, nested_paths))
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as folder:
        root = Path(folder)
        repo = _committed(root, env, tree)
        _run_change_script(repo, env, staged)
        git("add", "-A", cwd=repo, env=env)
        _run_change_script(repo, env, unstaged)
        spec = root / "spec.json"
        spec.write_text(json.dumps({"changes": changes}))
        left = {}
        for options in [("--sandbox",), ("--no-sandbox",)]:
            manifest = root / f"manifest{options[0]}.json"
            manifest.touch()
            allow = ("--allow-write", str(manifest)) if "--sandbox" in options else ()
            command = ("--", sys.executable, CHANGE_SCRIPT, spec, manifest)
            run = isopatch(start, "--porcelain", *options, *allow, *command, cwd=repo, env=env)
            assert run.returncode == 0, run.err
            patch = Path(run.fields()["patch"])
            checkout = apply_to_clean_checkout(
                repo, run.fields()["base"], patch, root / options[0], env
            )
            from repo_helpers import tree_manifest

            assert tree_manifest(checkout, exclude=(".git", "ignored")) == _load_manifest(manifest)
            left[options] = (patch.read_bytes(), manifest.read_bytes())
        assert left[("--sandbox",)] == left[("--no-sandbox",)]
