"""The design's exit-status table (design: Exit status) is one function,
:func:`git_isopatch.outcome.exit_status`: one test per row, on results as
the procedure makes them.  The rows end to end, through the installed
executable and what each leaves behind, are ``test_cli_exit_status.py``."""

from __future__ import annotations

import signal

import pytest
from repo_helpers import isopatch

from git_isopatch.git.types import CommitId
from git_isopatch.outcome import FATAL_STATUS, USAGE_STATUS, exit_status, plan
from git_isopatch.result import CaptureResult, OutputMode

BASE = CommitId("0" * 40)
PLAIN = OutputMode()
EXIT_CODE = OutputMode(exit_code=True)


def result(**fields: object) -> CaptureResult:
    """A captured result: exit 0, a patch of one path; ``fields`` override."""
    values: dict[str, object] = {
        "base": BASE,
        "exit_code": 0,
        "patch_path": "/tmp/git-isopatch-x/patch",
        "files": 1,
        "stdout": None,
        "stderr": None,
        "worktree_path": None,
        "tmpdir": "/tmp/git-isopatch-x",
    }
    values.update(fields)
    return CaptureResult(**values)  # type: ignore[arg-type]


def test_the_commands_own_code_when_the_patch_was_captured() -> None:
    assert exit_status(result(exit_code=0), PLAIN) == 0
    assert exit_status(result(exit_code=3), PLAIN) == 3
    assert exit_status(result(exit_code=3, files=0), PLAIN) == 3


@pytest.mark.parametrize(
    ("exit_code", "files", "expected"),
    [(0, 1, 1), (0, 0, 0), (3, 1, 3), (3, 0, 3)],
    ids=["changed", "unchanged", "failed-changed", "failed-unchanged"],
)
def test_exit_code_gives_1_for_a_patch_that_is_not_empty_when_the_command_succeeded(
    exit_code: int, files: int, expected: int
) -> None:
    assert exit_status(result(exit_code=exit_code, files=files), EXIT_CODE) == expected


def test_a_timeout_gives_124_with_the_patch_still_captured() -> None:
    timed_out = result(exit_code=124, timed_out=True, timeout=0.5)
    assert exit_status(timed_out, PLAIN) == 124
    assert exit_status(timed_out, EXIT_CODE) == 124  # not 1: the command did not succeed


@pytest.mark.parametrize("code", [126, 127])
def test_a_command_that_could_not_run_gives_126_or_127(code: int) -> None:
    failed = result(exit_code=code, files=0, command_error="cannot run 'x'")
    assert exit_status(failed, PLAIN) == code
    assert exit_status(failed, EXIT_CODE) == code


def test_a_signal_gives_128_plus_n_even_when_extraction_failed_after_it() -> None:
    n = signal.SIGTERM
    assert exit_status(result(exit_code=128 + n, signal=n), PLAIN) == 128 + n
    broken = result(
        exit_code=128 + n,
        signal=n,
        patch_path=None,
        files=None,
        worktree_path="/w",
        error="could not extract",
        error_code="extract-failed",
    )
    assert exit_status(broken, PLAIN) == 128 + n


def test_a_fatal_error_before_anything_existed_gives_128() -> None:
    assert exit_status(None, PLAIN) == FATAL_STATUS == 128
    assert exit_status(None, EXIT_CODE) == 128


def test_extraction_that_failed_gives_128_and_keeps_the_worktree() -> None:
    broken = result(
        patch_path=None,
        files=None,
        worktree_path="/w",
        error="could not extract",
        error_code="extract-failed",
    )
    assert exit_status(broken, PLAIN) == 128
    assert exit_status(broken, EXIT_CODE) == 128
    shown = plan(broken, PLAIN, cwd="/")
    assert shown.closing[-1] == "hint: the worktree is kept for inspection at '/w'"
    assert not shown.discard


def test_apply_that_could_not_apply_gives_128_and_keeps_the_patch() -> None:
    refused = result(applied=False, error="patch does not apply", error_code="apply-failed")
    assert exit_status(refused, PLAIN) == 128
    assert exit_status(refused, EXIT_CODE) == 128
    shown = plan(refused, PLAIN, cwd="/")
    assert "the patch is kept at '/tmp/git-isopatch-x/patch'" in shown.closing[1]
    assert not shown.discard and shown.patch_to_stdout is None


def test_a_usage_error_gives_129(env, make_repo) -> None:
    """The parser's row: no result and no output mode exist yet."""
    run = isopatch("--porcelain", "--json", "--", "true", cwd=make_repo(), env=env)
    assert run.returncode == USAGE_STATUS == 129


def test_the_exit_status_depends_on_nothing_but_the_table_s_columns() -> None:
    """Fields the table does not name (output paths, hints, the diffstat,
    shared writes) leave the status alone."""
    plain = result(exit_code=5)
    busy = plain._replace(
        stdout="/o",
        stderr="/e",
        hints=("a hint",),
        diffstat=b" x | 1 +\n",
        checkout_changes=("f",),
        worktree_path="/kept",
    )
    for mode in (PLAIN, OutputMode(porcelain=True, quiet=True), OutputMode(json=True)):
        assert exit_status(busy, mode) == exit_status(plain, mode) == 5


@pytest.mark.parametrize(
    ("mode", "applied", "discard"),
    [
        (OutputMode(), None, False),  # the summary names the patch
        (OutputMode(quiet=True), None, True),  # nobody is told where it is
        (OutputMode(stdout=True), None, True),  # it went to stdout
        (OutputMode(), True, True),  # it is in the work tree now
        (OutputMode(porcelain=True, quiet=True), True, False),  # the record names it
        (OutputMode(json=True, quiet=True), None, False),
    ],
)
def test_the_private_folder_goes_only_when_nobody_is_told_of_it(
    mode: OutputMode, applied: bool | None, discard: bool
) -> None:
    assert plan(result(applied=applied), mode, cwd="/").discard is discard
