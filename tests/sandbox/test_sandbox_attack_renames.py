"""A hostile command turns the launcher's rename supervision
(``git_isopatch.sandbox.renames``) against a confinement of its own: a
process that restricted itself with Landlock, which no ``/proc`` file
shows, asks for a rename its ruleset forbids; the launcher must leave it
to the kernel, which refuses it as it does unconfined (``EACCES``).  And
a folder whose subfolder its owner may not write: ``rename(2)`` moves it
all the same, so the launcher's copy must be removed as whole, or its
half, when the copy fails.

Real bubblewrap, real git, a real Landlock ruleset; as root and as the
unprivileged uid 65534.
"""

from __future__ import annotations

import errno
import json
import sys

import pytest
from real_tools_helpers import sandboxed_and_unconfined
from repo_helpers import git, isopatch
from sandbox_helpers import run_as_nobody
from test_sandbox_renames import NOBODY_FOLDERS

pytestmark = pytest.mark.hostile

#: Restricts itself with a Landlock ruleset that forbids making and
#: removing folders anywhere, starts a child that inherits it, and has
#: both rename ``d`` of the base tree (as ``mv`` does first): what each got.
LANDLOCKED = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
handled = (ctypes.c_uint64 * 1)(1 << 4 | 1 << 7 | 1 << 13)  # REMOVE_DIR, MAKE_DIR, REFER
ruleset = libc.syscall(444, handled, 8, 0)  # landlock_create_ruleset
assert ruleset >= 0, ctypes.get_errno()
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.syscall(446, ruleset, 0) == 0, ctypes.get_errno()  # landlock_restrict_self
def rename(old, new):
    try:
        os.rename(old, new)
        return "renamed"
    except OSError as exc:
        return exc.errno
child = os.fork()
if child == 0:
    os._exit(0 if rename("d", "e") == errno.EACCES else 1)
said = [rename("d", "f"), os.waitpid(child, 0)[1], sorted(os.listdir("d"))]
print(json.dumps(said), file=sys.stderr)
"""


def _said(out: str) -> list:
    return json.loads(out.splitlines()[-1])


def test_a_landlocked_caller_gets_the_kernels_refusal(env, make_repo) -> None:
    """The process that made the ruleset and the child that inherited it
    both get ``EACCES`` and ``d`` stays whole: the same as unconfined."""
    repo = make_repo({"d/x": "x\n", "d/s/y": "y\n"})
    for mode in ("--sandbox", "--no-sandbox"):
        run = isopatch(mode, "--stdout", "-q", "--", sys.executable, "-c", LANDLOCKED,
                       cwd=repo, env=env)  # fmt: skip
        assert run.returncode == 0, run.err
        assert _said(run.err) == [errno.EACCES, 0, ["s", "x"]], (mode, run.err)
        assert run.stdout == b"", (mode, run.stdout)
    assert git("status", "--porcelain", cwd=repo, env=env) == b""


AS_NOBODY = (
    NOBODY_FOLDERS
    + """\
said = {}
for mode in ("--sandbox", "--no-sandbox"):
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", mode, "--stdout", "-q", "--",
         sys.executable, "-c", sys.argv[1]],
        cwd=repo, capture_output=True,
    )
    said[mode] = [done.returncode, done.stdout.decode(), done.stderr.decode().splitlines()[-1:]]
print(json.dumps(said))
"""
)


def test_a_landlocked_caller_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, LANDLOCKED) as said:
        assert said["--sandbox"] == said["--no-sandbox"], said
        code, patch, last = said["--sandbox"]
        assert (code, patch) == (0, ""), said
        assert json.loads(last[0]) == [errno.EACCES, 0, ["s", "x"]], said


#: ``d/s`` made read-only (its owner's ``r-x``), then ``d`` renamed.
READ_ONLY = "import os; os.chmod('d/s', 0o555); os.rename('d', 'e'); os.chmod('e/s', 0o755)"


def test_a_folder_holding_a_read_only_folder_renames_as_unconfined(env, make_repo) -> None:
    """The copy is removed whole from ``d``: the patch of an unconfined run."""
    repo = make_repo({"d/x": "x\n", "d/s/y": "y\n"})
    command = [sys.executable, "-c", READ_ONLY]
    patch = sandboxed_and_unconfined(repo, command, env).same_patch()
    assert patch.count(b"rename from d/") == 2, patch


#: A FIFO the launcher cannot copy beside the read-only ``d/s``: what is
#: left of ``d`` and of ``e`` after the rename.
HALF_COPIED = r"""
import json, os, sys
os.mkfifo("d/fifo")
os.chmod("d/s", 0o555)
try:
    os.rename("d", "e")
    said = "renamed"
except OSError as exc:
    said = exc.errno
print(json.dumps([said, sorted(os.listdir("d")), os.path.lexists("e")]), file=sys.stderr)
"""


def test_a_copy_that_fails_leaves_no_half_of_it(env, make_repo) -> None:
    """``EXDEV`` (``mv`` copies then), ``d`` whole, no ``e`` at all."""
    repo = make_repo({"d/x": "x\n", "d/s/y": "y\n"})
    run = isopatch("--sandbox", "--stdout", "-q", "--", sys.executable, "-c", HALF_COPIED,
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 0, run.err
    assert _said(run.err) == [errno.EXDEV, ["fifo", "s", "x"], False], run.err


def test_a_folder_holding_a_read_only_folder_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, READ_ONLY) as said:
        assert said["--sandbox"] == said["--no-sandbox"], said
        assert said["--sandbox"][1].count("rename from d/") == 2, said
