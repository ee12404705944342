"""Concurrency (issue 4): eight runs at once on one repository all succeed,
each with exactly its own changes; only worktree add/remove are serialized,
never the commands.

Without the lock around ``git worktree add`` (provider.py,
``worktree_admin_lock``), git 2.39 itself races: one ``add`` reads the
half-made registration of another and dies ("failed to read
.../worktrees/<id>/commondir").  That shows in about one run in eight of
this test, not in every run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hostile import admin_dirs
from repo_helpers import ISOPATCH, repo_state

RUNS = 8

#: Each command waits at a barrier until all eight commands have started:
#: if git-isopatch ran the commands one after another, the first would wait
#: for ever (it gives up after about two minutes, exit 99).  Then it writes
#: its own file and commits it in its worktree.
COMMAND = """set -e
: > "$BARRIER/$RUN"
n=0
while [ "$(ls "$BARRIER" | wc -l)" -lt {runs} ]; do
    n=$((n + 1)); [ "$n" -lt 2400 ] || exit 99; sleep 0.05
done
echo "run $RUN" > "out-$RUN.txt"
git add "out-$RUN.txt" && git commit -qm "run $RUN"
""".format(runs=RUNS)


def test_eight_runs_at_once(env, make_repo, tmp_path: Path, no_leftovers) -> None:
    repo = make_repo()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    before = repo_state(repo, env)
    runs = [
        subprocess.Popen(
            [ISOPATCH, "--porcelain", "--", "sh", "-c", COMMAND],
            cwd=repo,
            env={**env, "BARRIER": str(barrier), "RUN": str(n)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(RUNS)
    ]
    results = [(run.communicate(timeout=600), run.returncode) for run in runs]
    failed = {n: (status, err.decode()) for n, ((_, err), status) in enumerate(results) if status}
    assert failed == {}
    for n, ((out, _), _) in enumerate(results):
        fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
        patch = Path(fields["patch"]).read_bytes()
        assert patch.count(b"diff --git ") == 1, patch
        assert f"+++ b/out-{n}.txt\n@@ -0,0 +1 @@\n+run {n}\n".encode() in patch
    assert sorted(p.name for p in barrier.iterdir()) == [str(n) for n in range(RUNS)]
    assert repo_state(repo, env) == before
    assert admin_dirs(repo, env) == []
