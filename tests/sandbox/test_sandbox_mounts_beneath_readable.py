"""A mount beneath a temporary folder hides none of its other subfolders
(design: "What it does"; issue 19, "Copy-on-write outside the worktree").

A temporary folder with a mount beneath it is made private for the command
(:mod:`git_isopatch.sandbox.layers`); a project, a virtual environment or
a tool under it (``/tmp/ci/.venv/bin/python``, a clone under ``/tmp``) must
still be there to run, copy-on-write, whatever mount another program put
elsewhere under the same folder.  Found in CI: with a clone under ``/tmp``,
another test's tmpfs under ``/tmp`` made the venv's python vanish from the
sandbox ("execvp ... No such file or directory").
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from repo_helpers import isopatch
from test_sandbox_mounts_beneath import tmpfs

from git_isopatch.sandbox import layers

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")


def test_the_subfolders_of_a_private_temporary_folder_stay_readable(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    for folder in ("m/inner", "tools", "src"):
        (tmp / folder).mkdir(parents=True)
    (tmp / "file").write_text("x\n")
    mounts = ["/", str(tmp / "m" / "inner")]
    plan = layers.plan_layers([str(tmp), str(tmp / "src")], [str(tmp)], mounts)
    assert plan == (
        layers.Layer(str(tmp), layers.PRIVATE),
        layers.Layer(str(tmp / "m"), layers.PRIVATE),
        layers.Layer(str(tmp / "src")),
        layers.Layer(str(tmp / "tools")),
    )


def test_the_files_of_a_private_temporary_folder_are_there_copy_on_write(make_repo, env) -> None:
    """``git isopatch -- python /tmp/fix.py`` beside another program's
    mount: the temporary folder's own files, and those of its subfolders
    on the way down to the mount, are read, rewritten and removed in the
    command's view only, each write named; a unix socket there is not."""
    repo = make_repo({"a.txt": "a\n"})
    tmp = Path(env["TMPDIR"])
    (tmp / "input").write_text("input\n")
    (tmp / "deep" / "er").mkdir(parents=True)
    (tmp / "deep" / "note").write_text("note\n")
    script = (
        f"cat {tmp}/input {tmp}/deep/note > a.txt; echo new > {tmp}/input; "
        f"rm {tmp}/deep/note; test -e {tmp}/sock || echo no-socket >> a.txt"
    )
    with socket.socket(socket.AF_UNIX) as listening, tmpfs(tmp / "deep" / "er" / "mounted"):
        listening.bind(str(tmp / "sock"))
        run = isopatch("--sandbox", "--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.out.splitlines()
    assert f"outside-write {tmp}/input" in fields, run.out
    assert f"outside-write {tmp}/deep/note" in fields, run.out
    assert (tmp / "input").read_text() == "input\n"
    assert (tmp / "deep" / "note").read_text() == "note\n"
    patch = Path(run.fields()["patch"]).read_text()
    assert "+input\n+note\n+no-socket\n" in patch, patch


def test_a_tool_under_the_temporary_folder_runs_beside_a_mount(make_repo, env) -> None:
    repo = make_repo({"a.txt": "a\n"})
    tmp = Path(env["TMPDIR"])
    tool = tmp / "tools" / "fix"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\necho fixed > a.txt\necho scratch > "$(dirname "$0")/left"\n')
    tool.chmod(0o755)
    with tmpfs(tmp / "mounted"):
        run = isopatch("--sandbox", "--porcelain", "--", str(tool), cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert "files 1" in run.out.splitlines(), run.out
    assert f"outside-write {tool.parent}/left" in run.out.splitlines(), run.out
    assert not (tool.parent / "left").exists()


def test_the_folders_of_path_stay_readable_in_a_crowded_temporary_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    for n in range(layers.MAX_SPLIT + 6):
        (tmp / f"a{n:03}").mkdir(parents=True)
    (tmp / "zz" / "bin").mkdir(parents=True)
    (tmp / "m").mkdir()
    mounts = ["/", str(tmp / "m")]
    plan = layers.plan_layers([str(tmp)], [str(tmp)], mounts, [str(tmp / "zz" / "bin"), "bin"])
    assert plan[0] == layers.Layer(str(tmp), layers.PRIVATE)
    assert plan[1] == layers.Layer(str(tmp / "zz")), plan[:3]
    assert len(plan) == 1 + layers.MAX_SPLIT


def test_a_tool_on_path_runs_from_a_crowded_temporary_folder(make_repo, env) -> None:
    """Found in CI: the clone's venv in ``/tmp/tmp.XXXX`` came after 64
    result folders of other runs (``/tmp/git-isopatch-*``) and vanished."""
    repo = make_repo({"a.txt": "a\n"})
    tmp = Path(env["TMPDIR"])
    for n in range(layers.MAX_SPLIT + 1):
        (tmp / f"a{n:03}").mkdir()
    tool = tmp / "zz-tools" / "fix-it"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho fixed > a.txt\n")
    tool.chmod(0o755)
    with_tools = {**env, "PATH": f"{tool.parent}{os.pathsep}{env['PATH']}"}
    with tmpfs(tmp / "mounted"):
        run = isopatch("--sandbox", "--porcelain", "--", "fix-it", cwd=repo, env=with_tools)
    assert run.returncode == 0, run.err
    assert "files 1" in run.out.splitlines(), run.out
