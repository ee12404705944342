"""A hostile command leaves its worktree's index a sparse file of
gigabytes, which costs it nothing: git-isopatch compares the run's index
with the base tree's in its own process, outside the sandbox and its
memory bound (``git_isopatch.git.index_entries.changed_entries``), and
must never read such a file whole.  On a machine with less memory than
the file (here: an address-space limit on git-isopatch) that read was a
traceback; git, in the sandbox, refuses the index in its own words.  A
session's step copies its index aside and back, and keeps it between
steps (``git_isopatch.git.admin_files.copy_admin_file``): a hole stays a
hole, or the sparse gigabytes become real ones on the user's disk.

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, isopatch
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: A new file, and the worktree's index made a sparse file of 3 GiB.
SPARSE = 'echo new > new; truncate -s 3G "$(git rev-parse --git-dir)/index"'

#: The address space git-isopatch (and all it starts) may have: less than
#: the index.
LIMIT = 2 << 30


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _fatal_alone(code: int, err: str) -> None:
    lines = [line for line in err.splitlines() if not line.startswith(("hint:", "warning:"))]
    assert code == 128 and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("fatal: could not read the index"), err


def test_a_sparse_index_of_gigabytes_is_never_read_into_git_isopatch(env, make_repo) -> None:
    repo = make_repo()
    done = subprocess.run(
        [ISOPATCH, "--sandbox", "-q", "--", "sh", "-c", SPARSE],
        cwd=repo, env=env, capture_output=True, preexec_fn=_bounded, check=False,
    )  # fmt: skip
    _fatal_alone(done.returncode, done.stderr.decode(errors="replace"))


AS_NOBODY = """\
import resource
limit = int(sys.argv[2])
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--sandbox", "-q", "--", "sh", "-c", sys.argv[1]],
    cwd=repo, capture_output=True,
    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
)
print(json.dumps([done.returncode, done.stderr.decode(errors="replace")]))
"""


def test_a_sparse_index_of_gigabytes_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, SPARSE, str(LIMIT)) as (code, err):
        _fatal_alone(code, err)


def _allocated(top: str | Path) -> int:
    """The bytes the files under ``top`` hold on disk."""
    found = [os.path.join(f, n) for f, _, names in os.walk(top) for n in names]
    return sum(os.lstat(p).st_blocks * 512 for p in found)


#: A session's step whose index is a sparse file of 1 GiB; the next step.
SESSION = """\
step = [sys.executable, "-m", "git_isopatch", "--sandbox", "-q", "--session", "s", "--"]
sparse = subprocess.run([*step, "sh", "-c", sys.argv[1]], cwd=repo, capture_output=True)
after = subprocess.run([*step, "true"], cwd=repo, capture_output=True)
disk = sum(os.lstat(os.path.join(f, n)).st_blocks * 512
           for f, _, names in os.walk(os.path.dirname(repo)) for n in names)
print(json.dumps([[d.returncode, d.stderr.decode(errors="replace")] for d in (sparse, after)]
                 + [disk]))
"""


def _broken(first: tuple[int, str], second: tuple[int, str]) -> None:
    """The step failed in git's words, the session is broken: no traceback."""
    assert first[0] == 128 and "fatal: could not read the index" in first[1], first
    assert second[0] == 128 and second[1].startswith("fatal: session 's' is broken"), second
    assert "Traceback" not in first[1] + second[1]


def test_a_sessions_sparse_index_stays_sparse(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    step = ("--sandbox", "-q", "--session", "s", "--")
    first = isopatch(*step, "sh", "-c", SPARSE.replace("3G", "1G"), cwd=repo, env=env)
    second = isopatch(*step, "true", cwd=repo, env=env)
    _broken((first.returncode, first.err), (second.returncode, second.err))
    assert _allocated(tmp_path) < 64 << 20
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


def test_a_sessions_sparse_index_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, SESSION, SPARSE.replace("3G", "1G")) as (first, second, disk):
        _broken(first, second)
        assert disk < 64 << 20, disk
