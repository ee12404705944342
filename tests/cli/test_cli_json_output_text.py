"""``--json`` carries the command's output inline (design: Porcelain v1,
``stdout-text``/``stderr-text``): an agent reads a linter's message in the
result without opening a file.  A bounded tail, from a line's start; the
files still hold the whole; the porcelain names only the files."""

from __future__ import annotations

import json
from pathlib import Path

from repo_helpers import isopatch

from git_isopatch.worktrees.results import OUTPUT_TAIL


def test_the_json_result_holds_what_the_command_printed(env, make_repo) -> None:
    repo = make_repo()
    script = "echo 'app.py:1: unused import'; printf 'caf\\351 error\\n' >&2; exit 3"
    run = isopatch("--json", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 3, run.err
    got = json.loads(run.out)
    assert got["stdout-text"] == "app.py:1: unused import\n"
    assert got["stderr-text"] == "caf\ufffd error\n"  # not UTF-8: replaced
    assert Path(got["stdout"]).read_bytes() == b"app.py:1: unused import\n"
    porcelain = isopatch("--porcelain", "--", "sh", "-c", script, cwd=repo, env=env)
    assert "stdout-text" not in porcelain.out and "stderr-text" not in porcelain.out
    assert porcelain.fields()["stdout"]


def test_a_long_output_is_its_tail_from_a_line_start(env, make_repo) -> None:
    repo = make_repo()
    script = 'i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done'
    run = isopatch("--json", "--", "sh", "-c", script, cwd=repo, env=env)
    got = json.loads(run.out)
    whole = Path(got["stdout"]).read_text()
    text = got["stdout-text"]
    assert len(whole) > OUTPUT_TAIL >= len(text.encode()) > OUTPUT_TAIL - 4096
    assert whole.endswith(text) and text.startswith("line ")
    assert text.endswith("line 19999\n")
    assert got["stderr-text"] == ""


def test_without_captured_output_there_is_no_text(env, make_repo) -> None:
    """``--stdout`` and a plain run pass the output through: nothing inline."""
    from git_isopatch.render import porcelain, result_fields
    from git_isopatch.result import CaptureResult

    result = CaptureResult("0" * 40, 0, None, None, None, None, None, "/tmp")  # type: ignore[arg-type]
    fields = result_fields(result)
    assert "stdout-text" not in fields
    with_text = result_fields(
        CaptureResult("0" * 40, 0, None, None, "/o", "/e", None, "/tmp", stdout_text="x\n")  # type: ignore[arg-type]
    )
    assert with_text["stdout-text"] == "x\n"
    assert b"stdout-text" not in porcelain(with_text, nul=False)
