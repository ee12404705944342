"""A hostile command leaves its worktree's index a sparse file of
gigabytes, which costs it nothing: git-isopatch compares the run's index
with the base tree's in its own process, outside the sandbox and its
memory bound (``git_isopatch.git.index_entries.changed_entries``), and
must never read such a file whole.  On a machine with less memory than
the file (here: an address-space limit on git-isopatch) that read was a
traceback; git, in the sandbox, refuses the index in its own words.

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import resource
import subprocess

import pytest
from repo_helpers import ISOPATCH
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
