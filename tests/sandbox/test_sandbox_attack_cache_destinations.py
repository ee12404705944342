"""A hostile command plants a symbolic link in the cache layer
(``git_isopatch.sandbox.cache_layer``), which later runs of the repository
mount again, where a later run's bubblewrap makes a mount point: the
folder of a file the user sends that run's output to.  bubblewrap 0.11
(CVE-2026-87766, fixed in 0.12) makes a mount point's folders and file
while the machine's root is still at ``/oldroot``, following such a link
there: the file would be made in the user's own work tree.  A cache
folder that holds the output's file gets no cache layer.

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, isopatch, repo_state
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: Replaces the cache folder's ``logs`` by a link to the checkout, as
#: bubblewrap sees it while it sets up the namespaces.
PLANT = 'rm -rf "$HOME/.npm/logs"; ln -s "/oldroot$1" "$HOME/.npm/logs"'


def test_an_output_file_in_a_cache_folder_is_never_made_through_its_layer(env, make_repo) -> None:
    repo = make_repo()
    cache = Path(env["HOME"]) / ".npm"
    (cache / "logs").mkdir(parents=True)
    run = isopatch("--sandbox", "-q", "--", "sh", "-c", PLANT, "sh", repo, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    before = repo_state(repo, env)
    with open(cache / "logs" / "out", "wb") as out:
        done = subprocess.run(
            [ISOPATCH, "--sandbox", "-q", "--", "sh", "-c", "echo said; ls ~/.npm/logs"],
            cwd=repo, env=env, stdout=out, stderr=subprocess.PIPE, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (repo / "out").exists()
    assert repo_state(repo, env) == before
    assert (cache / "logs" / "out").read_bytes() == b"said\nout\n"


AS_NOBODY = """\
cache = os.path.join(os.environ["HOME"], ".npm")
os.makedirs(os.path.join(cache, "logs"))
run = [sys.executable, "-m", "git_isopatch", "--sandbox", "-q", "--", "sh", "-c"]
plant = subprocess.run([*run, sys.argv[1], "sh", repo], cwd=repo, capture_output=True)
with open(os.path.join(cache, "logs", "out"), "wb") as out:
    done = subprocess.run([*run, "echo said"], cwd=repo, stdout=out, stderr=subprocess.PIPE)
print(json.dumps([plant.returncode, done.returncode, sorted(os.listdir(repo)),
                  open(os.path.join(cache, "logs", "out")).read()]))
"""


def test_an_output_file_in_a_cache_folder_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, PLANT) as said:
        assert said == [0, 0, [".git"], "said\n"], said
