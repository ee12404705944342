"""When bubblewrap cannot set up the sandbox, the failure carries its own
words (issue 19: a set-up failure that says only "could not set up" cannot
be diagnosed): ``sandbox-unavailable`` with bwrap's ``bwrap:`` line, read
from the command's captured stderr (a file open for writing only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from git_isopatch.errors import IsopatchError
from git_isopatch.sandbox import namespaces
from git_isopatch.sandbox.command import run_command
from git_isopatch.sandbox.seccomp import seccomp_filter


def test_a_set_up_failure_names_what_bubblewrap_said(tmp_path: Path) -> None:
    bwrap = namespaces.find_bwrap()
    assert not isinstance(bwrap, str), bwrap
    work = tmp_path / "work"
    work.mkdir()
    policy = namespaces.NamespacePolicy(writable=(str(work), str(tmp_path / "gone")))
    box = namespaces.Namespaces(bwrap, policy, str(tmp_path / "layers"), seccomp_filter())
    box.prepare()
    env = dict(os.environ)
    with (
        open(tmp_path / "stderr", "wb") as stderr,
        box.wrap(["true"], cwd=str(work), env=env) as wrapped,
        pytest.raises(IsopatchError) as raised,
    ):
        run_command(["true"], cwd=str(work), env=env, stderr=stderr, sandbox=wrapped)
    assert raised.value.code == "sandbox-unavailable"
    assert "bubblewrap could not set up the sandbox for 'true': " in raised.value.message
    assert f"{tmp_path}/gone" in raised.value.message
