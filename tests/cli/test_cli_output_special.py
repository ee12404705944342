"""``-o`` takes what a shell redirect takes (issue 34): ``/dev/null``, a
FIFO, a terminal.  The patch is copied into the very file found before the
command ran, through its folder opened then, as ``--stdout`` copies it to
stdout; the run leaves nothing behind, and a command that replaces the
target or its folder meanwhile makes the run fail (``bad-output``),
never leads the patch elsewhere."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from repo_helpers import isopatch

CHANGE = ("sh", "-c", "echo changed >> README")


def _reader(path: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as handle:
            got.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def _patch_bytes(repo: Path, env) -> bytes:
    run = isopatch("--no-sandbox", "--stdout", "-q", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return run.stdout


def test_dev_null(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("-o", "/dev/null", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.err.splitlines()[-1] == "isopatch: 1 file changed, exit 0", run.err
    assert run.stdout == b""
    assert list(Path(env["TMPDIR"]).iterdir()) == []  # nothing left behind
    assert Path("/dev/null").is_char_device()


def test_a_fifo_gets_the_patch(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    fifo = tmp_path / "patches"
    os.mkfifo(fifo)
    thread, got = _reader(fifo)
    run = isopatch("-q", "-o", fifo, "--", *CHANGE, cwd=repo, env=env)
    thread.join(30)
    assert run.returncode == 0, run.err
    assert got == [_patch_bytes(repo, env)]
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_a_terminal_gets_the_patch(env, make_repo) -> None:
    repo = make_repo()
    master, slave = os.openpty()
    try:
        run = isopatch("-q", "-o", os.ttyname(slave), "--", *CHANGE, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        shown = os.read(master, 65536)
    finally:
        os.close(master)
        os.close(slave)
    assert shown.replace(b"\r\n", b"\n") == _patch_bytes(repo, env)


def test_porcelain_names_the_kept_copy(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "-o", "/dev/null", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert Path(run.fields()["patch"]).read_bytes() == _patch_bytes(repo, env)


@pytest.mark.hostile
@pytest.mark.parametrize("swap", ["file", "link", "folder"])
def test_a_target_replaced_meanwhile_gets_nothing(env, make_repo, tmp_path: Path, swap) -> None:
    """An unconfined command replaces the FIFO with a file, or with a link
    to a file of the user's, or replaces its folder with a link: the patch
    is written nowhere, and the run says so."""
    repo = make_repo()
    folder = tmp_path / "out"
    folder.mkdir()
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "fifo").write_text("the user's\n")
    script = {
        "file": f"rm {fifo} && echo planted > {fifo}",
        "link": f"rm {fifo} && ln -s {mine / 'fifo'} {fifo}",
        "folder": f"mv {folder} {tmp_path / 'moved'} && ln -s {mine} {folder}",
    }[swap]
    run = isopatch(
        "--no-sandbox", "--porcelain", "-o", fifo, "--", "sh", "-c", f"{script}; echo x >> README",
        cwd=repo, env=env, timeout=60,
    )  # fmt: skip
    assert run.returncode == 128, run.err
    assert run.fields()["error-code"] == "bad-output", run.out
    assert "was replaced while the command ran" in run.fields()["error"], run.out
    assert (mine / "fifo").read_text() == "the user's\n"
    if swap == "file":
        assert fifo.read_text() == "planted\n"
