"""A hostile command in the sandbox tries to get what it wrote run outside
the namespaces by git-isopatch's own git after it (design: "there is one
boundary, not a stronger one for the command and a weaker one after it").

Every program it plants (in its ``TMPDIR``, really written: what it
writes in its copy-on-write home git-isopatch's own git never sees, as it
sees the real home) records the PID namespace it runs in (in
``$PROOF``, really writable: ``--allow-write``) and tries what only the
outside allows: a mark in a folder the sandbox keeps read-only (``$MARKS``)
and a change of mode of the user's ``README``.  Whatever of them runs must
run in a namespace that is not git-isopatch's own, and nothing reaches the
user's files:

- a clean filter in the command's copy-on-write ``.git/config``, with a
  ``.gitattributes`` that applies it (git-isopatch's ``git diff`` runs it);
- one in its copy-on-write ``~/.gitconfig`` (never run: git-isopatch's
  own git reads the user's global configuration as it was);
- ``core.fsmonitor`` and a ``post-index-change`` hook in its view of the
  git directory (git-isopatch pins both off: if they ran, inside);
- ``extensions.worktreeConfig`` with a filter in the worktree's
  ``config.worktree`` (put back before git-isopatch's git reads it);
- ``.gitmodules`` with an ``update = !command`` (nothing of git-isopatch's
  runs it);
- the worktree's ``.git`` file and its ``commondir`` pointing at a planted
  repository with a filter (git-isopatch names the git directory itself,
  and puts ``commondir`` back);
- a ``git`` of its own early on ``PATH``, in its copy-on-write home
  (git-isopatch's git is the one found outside);
- the worktree's index made a link to the user's index: no git runs on
  it (``unsafe-git-dir``), the user's index is untouched.

``GIT_*`` variables cannot be planted: git-isopatch's own git gets
git-isopatch's environment, never the command's.
Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from repo_helpers import isopatch, repo_state
from sandbox_helpers import run_as_nobody

pytestmark = pytest.mark.hostile

#: A program that proves where it ran (``$1``: its name), tries the
#: outside, and passes its input through (a clean filter's job).
PROGRAM = textwrap.dedent(
    """\
    #!/bin/sh
    readlink /proc/self/ns/pid >> "PROOF/$1"
    touch "MARKS/$1" 2>/dev/null
    chmod 600 "VICTIM" 2>/dev/null
    cat
    """
)

#: Plants every vector of the module's list that lets extraction go on.
PLANT = textwrap.dedent(
    """\
    set -e
    C=$(git rev-parse --path-format=absolute --git-common-dir)
    A=$(git rev-parse --absolute-git-dir)
    P="$TMPDIR"
    printf '%s' "$PROGRAM" > "$TMPDIR/p"
    for name in repo-filter home-filter fsmonitor hook wt-filter planted-filter git; do
        printf '#!/bin/sh\\nexec sh %s/prog %s\\n' "$P" "$name" > "$P/$name"
        chmod +x "$P/$name"
    done
    cp "$TMPDIR/p" "$P/prog"
    git config filter.r.clean "$P/repo-filter"
    git config --global filter.h.clean "$P/home-filter"
    git config core.fsmonitor "$P/fsmonitor"
    mkdir -p "$C/hooks" && cp "$P/hook" "$C/hooks/post-index-change"
    git config extensions.worktreeConfig true
    git config --worktree filter.w.clean "$P/wt-filter"
    printf '* filter=r\\n*.h filter=h\\n*.w filter=w\\n' > .gitattributes
    printf '[submodule "s"]\\n\\tpath = s\\n\\turl = ./s\\n\\tupdate = !%s/planted-filter\\n' \\
        "$P" > .gitmodules
    mkdir -p "$HOME/bin" && cp "$P/git" "$HOME/bin/git"
    git init -q --bare "$TMPDIR/planted.git"
    git config -f "$TMPDIR/planted.git/config" filter.r.clean "$P/planted-filter"
    echo "$TMPDIR/planted.git" > "$A/commondir"
    echo "gitdir: $TMPDIR/planted.git" > .git
    echo changed >> README
    echo new > a.h
    echo new > a.w
    """
)

#: The vectors whose program must run (inside): git-isopatch's diff cleans
#: the files they apply to.
MUST_RUN = ("repo-filter",)
#: The vectors whose program must not run at all.
NEVER_RUN = ("git", "planted-filter", "home-filter")


def _attack(repo: Path, tmp_path: Path, env, script: str):
    """``script`` run sandboxed on ``repo``; the run, the proof folder and
    the marks folder, with the user's repository checked unchanged."""
    proof, marks = tmp_path / "proof", tmp_path / "marks"
    proof.mkdir()
    marks.mkdir()
    home_bin = Path(env["HOME"]) / "bin"
    home_bin.mkdir(exist_ok=True)
    program = PROGRAM.replace("PROOF", str(proof)).replace("MARKS", str(marks))
    program = program.replace("VICTIM", str(repo / "README"))
    run_env = {**env, "PROGRAM": program, "PATH": f"{home_bin}{os.pathsep}{env['PATH']}"}
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain", "--sandbox", "--allow-write", proof, "--", "sh", "-c", script,
        cwd=repo, env=run_env,
    )  # fmt: skip
    assert "Traceback" not in run.err, run.err
    after = repo_state(repo, env)
    if run.returncode == 128:  # the worktree is kept for inspection
        del before["worktree list"], after["worktree list"]
    assert after == before
    assert list(marks.iterdir()) == []
    return run, proof


def _inside_only(proof: Path) -> dict[str, list[str]]:
    """Each program that ran, with the PID namespaces it ran in: never this one's."""
    mine = os.readlink("/proc/self/ns/pid")
    seen = {p.name: p.read_text().split() for p in proof.iterdir()}
    for name, spaces in seen.items():
        assert mine not in spaces, (name, spaces)
    return seen


def test_nothing_the_command_plants_runs_outside(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    run, proof = _attack(repo, tmp_path, env, PLANT)
    assert run.returncode == 0, run.err
    seen = _inside_only(proof)
    assert set(MUST_RUN) <= set(seen), seen
    assert not set(NEVER_RUN) & set(seen), seen
    patch = Path(run.fields()["patch"]).read_text()
    assert "+changed" in patch and "a.h" in patch, patch


def test_an_index_linked_to_the_users_is_never_used(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    index = repo / ".git" / "index"
    link = (
        "A=$(git rev-parse --absolute-git-dir) && echo changed >> README && "
        f'rm "$A/index" && ln -s "{index}" "$A/index"'
    )
    run, _ = _attack(repo, tmp_path, env, link)
    assert run.returncode == 128, run.err
    assert run.fields()["error-code"] == "unsafe-git-dir", run.out
    assert "/index" in run.fields()["error"], run.out


#: As uid 65534: the planting run; prints its exit, stderr, porcelain and
#: what proved where it ran, with this process's PID namespace.
AS_NOBODY = """
home = os.environ["HOME"]
proof, marks = os.path.join(home, "proof"), os.path.join(home, "marks")
os.mkdir(proof)
os.mkdir(marks)
os.makedirs(os.path.join(home, "bin"))
program = sys.argv[1].replace("PROOF", proof).replace("MARKS", marks)
program = program.replace("VICTIM", os.path.join(repo, "README"))
path = os.path.join(home, "bin") + ":" + os.environ["PATH"]
env = {**os.environ, "PROGRAM": program, "PATH": path}
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--allow-write", proof,
     "--", "sh", "-c", sys.argv[2]],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, env=env, timeout=120)
seen = {}
for name in os.listdir(proof):
    with open(os.path.join(proof, name)) as handle:
        seen[name] = handle.read().split()
print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "seen": seen,
                  "mine": os.readlink("/proc/self/ns/pid"), "marks": os.listdir(marks)}))
"""


def test_nothing_the_command_plants_runs_outside_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, PROGRAM, PLANT) as seen:
        assert "Traceback" not in seen["err"], seen["err"]
        assert seen["code"] == 0, seen["err"]
        assert set(MUST_RUN) <= set(seen["seen"]), seen
        assert not set(NEVER_RUN) & set(seen["seen"]), seen
        for name, spaces in seen["seen"].items():
            assert seen["mine"] not in spaces, (name, spaces)
        assert seen["marks"] == [], seen
