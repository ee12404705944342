"""What a command touched in its worktree is what its copy-on-write layer
holds (design: procedure step 6): read from the upper layer of a real
overlay (bubblewrap 0.11's ``--overlay``) after a command changed the
merged view, as hostile input: no link followed, no FIFO opened, the walk
bounded (:mod:`git_isopatch.sandbox.touched`)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from repo_helpers import write_tree

from git_isopatch.sandbox import touched
from git_isopatch.sandbox.bwrap import Bwrap, find_bwrap
from git_isopatch.sandbox.touched import touched_paths


def _bwrap() -> str:
    found = find_bwrap()
    assert isinstance(found, Bwrap), found
    return found.path


def _overlay_run(tmp_path: Path, lowers: list[Path], script: str) -> Path:
    """``sh -c script`` in an overlay of ``lowers`` (topmost last, as
    bubblewrap stacks them) mounted at ``tmp_path/merged``; its upper layer."""
    upper, work, merged = tmp_path / "upper", tmp_path / "work", tmp_path / "merged"
    for folder in (upper, work, merged):
        folder.mkdir()
    sources = [arg for lower in lowers for arg in ("--overlay-src", str(lower))]
    argv = [_bwrap(), "--unshare-all", "--die-with-parent", "--dev-bind", "/", "/", *sources]
    argv += ["--overlay", str(upper), str(work), str(merged), "--chdir", str(merged)]
    subprocess.run([*argv, "--", "sh", "-c", script], check=True)
    return upper


def _lower(tmp_path: Path) -> Path:
    base = tmp_path / "base"
    base.mkdir()
    write_tree(
        base,
        {
            "README": "hello\n",
            "keep.txt": "keep\n",
            "src/a.c": "a\n",
            "src/deep/b.c": "b\n",
            "docs/guide.md": "guide\n",
            "gone/x": "x\n",
        },
    )
    return base


def test_each_kind_of_change_is_named_and_nothing_else(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    upper = _overlay_run(
        tmp_path,
        [base],
        "echo more >> README; rm src/deep/b.c; chmod +x src/a.c; touch keep.txt;"
        "mkdir -p new/inner && echo n > new/inner/n; rm -rf docs && mkdir docs && echo d > docs/d;"
        "rm -rf gone; ln -s README link; mkfifo src/fifo",
    )
    assert touched_paths(str(upper), [str(base)]) == touched.Touched(
        (
            b"README",
            b"docs",  # removed and made again: opaque, named whole
            b"gone",  # a folder removed: one whiteout
            b"keep.txt",  # its times changed: copied up, git compares it
            b"link",
            b"new",  # a new folder: named whole, not entered
            b"src/a.c",
            b"src/deep/b.c",  # a whiteout
            b"src/fifo",
        ),
        True,
    )


def test_nothing_changed_names_nothing(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    upper = _overlay_run(tmp_path, [base], "cat README > /dev/null; ls -R > /dev/null")
    assert touched_paths(str(upper), [str(base)]) == touched.Touched((), True)


def test_a_folder_a_higher_lower_layer_holds_is_entered(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    start = tmp_path / "start"
    write_tree(start, {"added/one": "1\n"})
    upper = _overlay_run(tmp_path, [base, start], "echo 2 > added/two")
    assert touched_paths(str(upper), [str(start), str(base)]).paths == (b"added/two",)


def test_any_byte_in_a_name_is_kept(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    upper = _overlay_run(tmp_path, [base], "printf x > \"$(printf 'a\\nb\\377')\"; echo > 'src/ c'")
    assert touched_paths(str(upper), [str(base)]).paths == (b"a\nb\xff", b"src/ c")


@pytest.mark.hostile
def test_a_link_in_the_layer_is_named_never_followed(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    outside = tmp_path / "outside"
    write_tree(outside, {"secret/file": "s\n"})
    upper = _overlay_run(tmp_path, [base], f"rm -rf src && ln -s {outside} src")
    assert touched_paths(str(upper), [str(base)]).paths == (b"src",)


@pytest.mark.hostile
def test_a_fifo_in_the_layer_is_never_opened(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    upper = _overlay_run(tmp_path, [base], "rm -rf src/deep && mkfifo src/deep")
    started = time.monotonic()
    found = touched_paths(str(upper), [str(base)])
    assert time.monotonic() - started < 5
    assert found == touched.Touched((b"src/deep",), True)


@pytest.mark.hostile
def test_a_layer_past_the_bounds_is_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _lower(tmp_path)
    upper = _overlay_run(
        tmp_path, [base], "for i in 1 2 3 4 5 6; do echo $i > src/f$i; done; mkdir -p src/deep/x"
    )
    monkeypatch.setattr(touched, "MAX_ENTRIES", 4)
    assert not touched_paths(str(upper), [str(base)]).complete
    monkeypatch.setattr(touched, "MAX_ENTRIES", 1000)
    monkeypatch.setattr(touched, "MAX_DEPTH", 1)
    found = touched_paths(str(upper), [str(base)])
    assert not found.complete and found.paths == (b"src",)


@pytest.mark.hostile
def test_a_folder_past_the_bound_is_never_listed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory a walk takes follows the bound, not the folder: a
    command may leave millions of entries in one folder of its layer."""
    import tracemalloc

    upper = tmp_path / "upper"
    upper.mkdir()
    for n in range(4000):
        (upper / f"entry-{n:05}").touch()
    monkeypatch.setattr(touched, "MAX_ENTRIES", 10)
    tracemalloc.start()
    try:
        found = touched_paths(str(upper))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not found.complete and len(found.paths) == 10
    assert peak < 100_000, peak


@pytest.mark.hostile
def test_a_deep_layer_is_walked_without_recursion(tmp_path: Path) -> None:
    base = _lower(tmp_path)
    deep = "/".join(["d"] * 300)
    upper = _overlay_run(tmp_path, [base], f"mkdir -p src/{deep} && echo x > src/{deep}/f")
    found = touched_paths(str(upper), [str(base)])
    assert found == touched.Touched((b"src/d",), True)
    # merged folders all the way down: each level entered
    lower2 = tmp_path / "lower2"
    os.rename(tmp_path / "merged", tmp_path / "merged-old")
    for name in ("upper", "work"):
        os.rename(tmp_path / name, tmp_path / f"{name}-old")
    os.makedirs(lower2 / "src" / deep)
    upper2 = _overlay_run(tmp_path, [lower2], f"echo x > src/{deep}/f")
    assert touched_paths(str(upper2), [str(lower2)]).paths == (f"src/{deep}/f".encode(),)
