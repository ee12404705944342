"""What a sandboxed command leaves in its copy-on-write layers is hostile
input to git-isopatch, which reads it after the command (design: "What the
command left is hostile input: read without following links, without
blocking, with limits"):

- the repository's ``config`` made a FIFO in the command's view: nothing
  blocks for ever on it, and SIGTERM is not needed to end the run;
- ``refs/heads`` made a FIFO: no long wait on it either;
- ``config`` made a symbolic link to ``/dev/zero``: nothing reads it
  without bound (under a memory limit the run ends with no traceback);
- a folder 1,500 levels deep written to ``$HOME``: no ``RecursionError``,
  the run reports its patch and the write, and the layers are removed
  (nothing of them stays in ``$TMPDIR``); as an unprivileged user, a
  folder the command made unreadable in its layer (mode 000) too;
- a forwarded signal (SIGTERM) ends git-isopatch's own wait on a git that
  a FIFO the command left in its worktree blocks (``.gitignore``);
- a sparse file of 256 MiB named by its hash in the Git LFS store, in a
  repository that has none: it cost the command nothing, and no pointer of
  the patch names it, so git-isopatch never copies it into the real store.

Each run ends with no traceback and the user's repository unchanged.
Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, repo_state
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: A generous bound for a run that must not wait on what the command left
#: (it waited for ever, or 120 s, before).
BOUND_SECONDS = 60

#: The repository's git directory in the command's view, as ``$C``.
COMMON = "C=$(git rev-parse --path-format=absolute --git-common-dir) && "

CONFIG_FIFO = COMMON + 'echo change >> README && rm "$C/config" && mkfifo "$C/config"'
REFS_FIFO = COMMON + 'echo change >> README && rm -rf "$C/refs/heads" && mkfifo "$C/refs/heads"'
CONFIG_ZERO = COMMON + 'echo change >> README && rm "$C/config" && ln -s /dev/zero "$C/config"'
#: 1,500 nested folders in $HOME (a path too long for one call), and a change.
DEEP = (
    'echo change >> README && cd "$HOME" && '
    "python3 -c \"import os\nfor _ in range(1500): os.mkdir('d'); os.chdir('d')\""
)
#: A folder of $HOME that the command makes unreadable in its layer.
LOCKED = (
    'echo change >> README && mkdir -p "$HOME/locked/in" && : > "$HOME/locked/in/f" '
    '&& chmod 000 "$HOME/locked"'
)

CASES = {"config-fifo": CONFIG_FIFO, "refs-fifo": REFS_FIFO, "config-zero": CONFIG_ZERO}


def _run(repo: Path, env, script: str, *, limit: str | None = None):
    """git-isopatch on ``script``, ended after :data:`BOUND_SECONDS` if it
    has not ended by then: (exit status or ``None``, porcelain, stderr,
    seconds)."""
    argv = [str(ISOPATCH), "--porcelain", "--sandbox", "--", "sh", "-c", script]
    if limit is not None:
        argv = ["prlimit", f"--as={limit}", "--", *argv]
    started = time.monotonic()
    process = subprocess.Popen(
        argv, cwd=repo, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=BOUND_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        return None, out.decode(), err.decode(), time.monotonic() - started
    return process.returncode, out.decode(), err.decode(), time.monotonic() - started


def _records(out: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def _refused(code, out: str, err: str, name: str) -> None:
    """The run ended, its git refused to look at a git directory holding
    what the command planted there, naming it."""
    assert code is not None, f"the run did not end in {BOUND_SECONDS} s"
    assert "Traceback" not in err and "MemoryError" not in err, err
    records = _records(out)
    assert code == 128, (code, out, err)
    assert records.get("error-code") == "unsafe-git-dir", out
    assert name in records["error"], out


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_the_command_planted_in_its_git_directory_is_not_waited_on(
    env, make_repo, case: str
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    limit = "1073741824" if case == "config-zero" else None
    code, out, err, _ = _run(repo, env, CASES[case], limit=limit)
    _refused(code, out, err, "refs/heads" if case == "refs-fifo" else "config")
    after = repo_state(repo, env)
    del before["worktree list"], after["worktree list"]  # kept for inspection
    assert after == before


def _no_layer_left(tmpdir: Path) -> None:
    """No copy-on-write layer of the run is left in ``tmpdir``."""
    found = subprocess.run(
        ["find", str(tmpdir), "-name", "layers", "-o", "-name", "locked", "-o", "-name", "d"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert found.stdout == "", found.stdout[:2000]


def test_a_folder_1500_deep_in_home_is_reported_and_discarded(env, make_repo) -> None:
    repo = make_repo()
    code, out, err, _ = _run(repo, env, DEEP)
    assert code == 0, (out, err)
    assert "Traceback" not in err, err
    records = _records(out)
    assert records["files"] == "1", out
    assert f"outside-write {env['HOME']}/d" in out, out
    _no_layer_left(Path(env["TMPDIR"]))


def _sparse_object(size: int) -> tuple[str, str]:
    """The name of an LFS object of ``size`` zero bytes, and a script that
    plants it in the store as a sparse file."""
    digest = hashlib.sha256()
    for _ in range(size >> 20):
        digest.update(bytes(1 << 20))
    oid = digest.hexdigest()
    folder = f"$C/lfs/objects/{oid[:2]}/{oid[2:4]}"
    return oid, f'mkdir -p "{folder}" && truncate -s {size} "{folder}/{oid}"'


def test_an_lfs_object_no_pointer_names_stays_in_the_layer(env, make_repo) -> None:
    repo = make_repo()
    _, planted = _sparse_object(1 << 28)
    script = f"{COMMON}echo change >> README && {planted}"
    before = repo_state(repo, env)
    code, out, err, _ = _run(repo, env, script)
    assert code == 0 and _records(out)["files"] == "1", (out, err)
    assert not (repo / ".git" / "lfs").exists()
    assert repo_state(repo, env) == before


@pytest.mark.parametrize("named", ["its size", "another size"])
def test_an_lfs_object_a_pointer_names_goes_home_only_as_sparse_as_it_was(
    env, make_repo, named: str
) -> None:
    """A sparse object of 256 MiB that a pointer of the patch names: it
    goes into the real store with its holes (it fills no disk), and only
    when the pointer gives its size; else it stays in the layer."""
    repo = make_repo()
    size = 1 << 28
    oid, planted = _sparse_object(size)
    said = size if named == "its size" else 7
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {said}\n"
    script = f"{COMMON}printf '{pointer}' > big.bin && {planted}"
    code, out, err, _ = _run(repo, env, script)
    assert code == 0 and _records(out)["files"] == "1", (out, err)
    stored = repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    if named == "its size":
        assert stored.stat().st_size == size
        assert stored.stat().st_blocks * 512 < 1 << 20, "the holes were filled"
    else:
        assert not stored.exists()
    assert not list((repo / ".git" / "lfs" / "tmp").glob("*"))


def test_a_signal_ends_a_wait_on_a_fifo_the_command_left(env, make_repo, tmp_path: Path) -> None:
    """A ``.gitignore`` FIFO blocks git's look for new files; SIGTERM ends
    the run promptly with 143 and ``error-code interrupted``."""
    repo = make_repo()
    shared = tmp_path / "shared"
    shared.mkdir()
    done = shared / "done"
    script = 'echo change >> README && : > new && mkfifo .gitignore && : > "$DONE"'
    process = subprocess.Popen(
        [ISOPATCH, "--porcelain", "--sandbox", "--allow-write", shared, "--", "sh", "-c", script],
        cwd=repo, env={**env, "DONE": str(done)}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: done.exists() or process.poll() is not None, what="the command")
        time.sleep(3)  # the command has ended; extraction waits on the FIFO
        assert process.poll() is None, "the run ended without waiting: nothing to interrupt"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGTERM, (out, err)
    assert _records(out.decode()).get("error-code") == "interrupted", out
    assert b"Traceback" not in err, err


#: As uid 65534: each case's run, as [code, porcelain, stderr, leftovers].
AS_NOBODY = """
seen = {}
tmp = os.environ["TMPDIR"]
for name, script in json.loads(sys.argv[1]).items():
    argv = [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--",
            "sh", "-c", script]
    if name == "config-zero":
        argv = ["prlimit", "--as=1073741824", "--", *argv]
    try:
        done = subprocess.run(argv, cwd=repo, capture_output=True, stdin=subprocess.DEVNULL,
                              timeout=60, start_new_session=True)
        code, out, err = done.returncode, done.stdout.decode(), done.stderr.decode()
    except subprocess.TimeoutExpired:
        code, out, err = None, "", "timed out"
    left = subprocess.run(["find", tmp, "-name", "layers", "-o", "-name", "locked",
                           "-o", "-name", "d"], capture_output=True, text=True).stdout
    seen[name] = [code, out, err, left[:2000]]
print(json.dumps(seen))
"""


def test_layers_are_hostile_input_as_an_unprivileged_user(env) -> None:
    cases = {**CASES, "deep": DEEP, "locked": LOCKED}
    with run_as_nobody(env, AS_NOBODY, json.dumps(cases)) as seen:
        for case in CASES:
            code, out, err, _ = seen[case]
            _refused(code, out, err, "refs/heads" if case == "refs-fifo" else "config")
        for case in ("deep", "locked"):
            code, out, err, left = seen[case]
            assert code == 0 and "Traceback" not in err, (case, out, err)
            assert _records(out)["files"] == "1", out
            assert left == "", (case, left)
        assert "outside-write" in seen["locked"][1], seen["locked"]
