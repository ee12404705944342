"""Sessions (``--session <name>``): one worktree across several runs.  Each
step runs where the last one left off; its result holds its own patch and
the session's whole change against the base; ``--end`` leaves nothing; a
killed step leaves the session broken, never half-put-away; two sessions
never see each other; the user's repository is never touched."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from hostile import admin_dirs, wait_until
from repo_helpers import (
    ISOPATCH,
    apply_to_clean_checkout,
    git,
    isopatch,
    repo_state,
    tmpfs,
    tree_manifest,
)
from session_helpers import session_manifest, written_folder

SANDBOXES = [pytest.param("--sandbox", id="sandbox"), pytest.param("--no-sandbox", id="unconfined")]
#: ``git -c isopatch.baseTrees=0`` for every run: no base tree kept.
BASE_TREES_NONE = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "isopatch.baseTrees",
    "GIT_CONFIG_VALUE_0": "0",
}


def _step(repo: Path, env: dict[str, str], name: str, *command: str, options: tuple = ()) -> dict:
    """One step of session ``name``, its JSON result."""
    done = isopatch("--session", name, "--json", *options, "--", *command, cwd=repo, env=env)
    assert done.returncode in (0, 1), done.err
    return json.loads(done.out)


def _without_worktrees(state: dict) -> dict:
    return {key: value for key, value in state.items() if key != "worktree list"}


def _but_base_trees(folders: list[Path]) -> list[Path]:
    """Worktrees' private folders but the base trees' (a cache kept for the
    next sandboxed runs, as after any run)."""
    return [folder for folder in folders if not (folder / "isopatch-base.json").exists()]


def _paths(result: dict) -> list[str]:
    return [p["path"] for p in result["path"]]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_three_steps_whose_session_patch_gives_the_worktree_byte_for_byte(
    make_repo, env, tmp_path, sandbox
) -> None:
    repo = make_repo({"a.txt": "one\n", "gone.txt": "bye\n", "old.txt": "x\n" * 20, "bin": b"\0"})
    before = repo_state(repo, env)
    first = _step(
        repo,
        env,
        "s",
        "sh",
        "-c",
        "echo two >> a.txt; printf '\\0\\1' > new.bin; ln -s a.txt l",
        options=(sandbox,),
    )
    assert sorted(_paths(first)) == ["a.txt", "l", "new.bin"]
    assert first["session"] == "s" and first["session-files"] == 3
    second = _step(repo, env, "s", "sh", "-c", "git mv old.txt moved.txt; chmod +x a.txt")
    assert sorted(_paths(second)) == ["a.txt", "moved.txt"]  # this step's change alone
    third = _step(repo, env, "s", "sh", "-c", "rm gone.txt; echo 'é' > 'sp ace\tä.txt'")
    assert sorted(_paths(third)) == ["gone.txt", "sp ace\tä.txt"]
    assert (
        third["base"] == first["base"] and third["session-files"] == 6
    )  # old.txt renamed: one path
    clean = apply_to_clean_checkout(
        repo, third["base"], Path(third["session-patch"]), tmp_path / "clean", env
    )
    assert tree_manifest(clean) == session_manifest(repo, env, "s")
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
    assert repo_state(repo, env) == before


def test_a_failing_step_keeps_the_earlier_steps(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    _step(repo, env, "s", "sh", "-c", "echo first > first.txt")
    failed = isopatch(
        "--session",
        "s",
        "--porcelain",
        "--",
        "sh",
        "-c",
        "echo half > half.txt; exit 3",
        cwd=repo,
        env=env,
    )
    assert failed.returncode == 3
    third = _step(repo, env, "s", "sh", "-c", "cat first.txt half.txt > both.txt")
    assert _paths(third) == ["both.txt"]
    patch = Path(third["session-patch"]).read_text()
    assert "+first" in patch and "+half" in patch and "+first\n+half" in patch


def test_a_step_that_commits_inside_the_session(make_repo, env) -> None:
    """The commit lives in the session's own object store: the next step
    sees it, the session's change holds it, and the user's repository never
    names it (``git gc`` and ``fsck`` pass between steps)."""
    repo = make_repo({"a.txt": "one\n"})
    first = _step(
        repo, env, "s", "sh", "-c", "echo two >> a.txt && git commit -qam step && echo new > n.txt"
    )
    assert sorted(_paths(first)) == ["a.txt", "n.txt"]
    git("gc", "-q", cwd=repo, env=env)
    git("fsck", "--no-progress", cwd=repo, env=env)
    before = _without_worktrees(repo_state(repo, env))
    second = _step(
        repo, env, "s", "sh", "-c", "git log --format=%s > log.txt; git status --short >> log.txt"
    )
    log = (written_folder(repo, env, "s") / "log.txt").read_text()
    assert log.splitlines()[:2] == ["step", "base"]
    assert "?? n.txt" in log  # untracked as the command left it, not marked intent-to-add
    assert _paths(second) == ["log.txt"]
    assert "+two" in Path(second["session-patch"]).read_text()
    assert _without_worktrees(repo_state(repo, env)) == before


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_end_leaves_nothing_behind(make_repo, env, sandbox) -> None:
    """No worktree, no layer, no base tree pinned (with
    ``isopatch.baseTrees=0`` the base tree goes with the session)."""
    repo = make_repo()
    before = repo_state(repo, env)
    env = {**env, **BASE_TREES_NONE}
    _step(
        repo, env, "s", "sh", "-c", "echo x > x.txt && git commit -qm x -- x.txt || git add x.txt",
        options=(sandbox,),
    )  # fmt: skip
    _step(repo, env, "s", "touch", "y")
    assert len(admin_dirs(repo, env)) == (2 if sandbox == "--sandbox" else 1)  # + its base tree
    ended = isopatch("--session", "s", "--end", cwd=repo, env=env)
    assert ended.returncode == 0, ended.err
    assert [name for name in os.listdir(repo.parent) if ".isopatch-" in name] == []
    assert admin_dirs(repo, env) == []
    assert not (repo / ".git" / "isopatch").exists()
    assert repo_state(repo, env) == before
    again = isopatch("--session", "s", "--end", cwd=repo, env=env)
    assert (again.returncode, again.err) == (128, "fatal: no session 's'\n")


def test_a_session_stays_beside_the_checkout_until_it_is_ended(make_repo, env) -> None:
    """However long it is idle, ``prune`` passes it by; ``-h`` says so."""
    repo = make_repo()
    _step(repo, env, "s", "true")
    pruned = isopatch("prune", "--expire", "now", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert [name for name in os.listdir(repo.parent) if ".isopatch-" in name] != []
    assert "session s at" in isopatch("list", cwd=repo, env=env).out
    usage = isopatch("-h", cwd=repo, env=env).out
    (line,) = [line for line in usage.splitlines() if line.startswith("    --session ")]
    assert "kept until --end" in line, line


def test_ending_a_session_there_is_not_names_those_there_are(make_repo, env) -> None:
    """A misspelt name (or ``-C`` another repository): the ``fatal:`` and a
    ``hint:`` naming the sessions there are, sorted; nothing ends."""
    repo = make_repo()
    for name in ("lint", "fix"):
        _step(repo, env, name, "touch", name)
    ended = isopatch("--session", "lnit", "--end", cwd=repo, env=env)
    assert (ended.returncode, ended.err) == (
        128,
        "fatal: no session 'lnit'\nhint: the sessions here: fix, lint\n",
    )
    listed = isopatch("list", "--porcelain", cwd=repo, env=env).out
    assert listed.count("state session\n") == 2, listed


@pytest.mark.parametrize(
    "option",
    [
        ("--apply",),
        ("--json",),
        ("--porcelain",),
        ("--keep",),
        ("--no-sandbox",),
        ("--output", "p"),
    ],
)
def test_end_refuses_a_run_option_and_ends_nothing(make_repo, env, option) -> None:
    """``--session s --end --apply`` reads as "bring it home, then end":
    ending then would drop the change unseen, and ``--json`` would leave
    an agent no object to read.  Like git's parse-options, a usage error
    (129) naming the pair (``--json`` and ``--porcelain`` read it on stdout
    too), and the session is still there."""
    repo = make_repo()
    _step(repo, env, "s", "sh", "-c", "echo x > x.txt")
    ended = isopatch("--session", "s", "--end", *option, cwd=repo, env=env)
    assert ended.returncode == 129, ended.err
    message = f"options '--end' and '{option[0]}' cannot be used together"
    assert ended.err.splitlines()[0] == f"error: {message}"
    records = {
        "--json": json.dumps({"version": 1, "error": message, "error-code": "usage"}) + "\n",
        "--porcelain": f"version 1\nerror {message}\nerror-code usage\n",
    }
    assert ended.out == records.get(option[0], "")
    assert not (repo / "x.txt").exists() and not (repo / "p").exists()
    listed = isopatch("list", "--porcelain", cwd=repo, env=env).out
    assert "state session\n" in listed, listed
    assert isopatch("--session", "s", "--end", "-q", cwd=repo, env=env).returncode == 0


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_list_shows_a_session_with_its_base_age_and_size(make_repo, env, sandbox) -> None:
    """Its size: what its layer holds over its base tree (sandboxed), or
    its whole change (a kept worktree); to a person, as git's own sizes
    (``count-objects -H``: 3000 bytes are 2.93 KiB)."""
    repo = make_repo()
    script = "head -c 2999 /dev/zero | tr '\\0' x > x.txt; echo >> x.txt"
    result = _step(repo, env, "lint", "sh", "-c", script, options=(sandbox,))
    listed = isopatch("list", "--porcelain", cwd=repo, env=env).fields()
    assert listed["state"] == "session" and listed["session"] == "lint"
    assert listed["head"] == result["base"]
    size = 3000 if sandbox == "--sandbox" else os.path.getsize(result["session-patch"])
    assert int(listed["size"]) == size > 0
    line = isopatch("list", cwd=repo, env=env).out
    shown = "2.93 KiB" if sandbox == "--sandbox" else r"\d+\.\d\d KiB"
    assert re.search(rf"session lint at {result['base'][:12]}, {shown}  ", line), line


def test_apply_brings_home_the_whole_change(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    _step(repo, env, "s", "sh", "-c", "echo two >> a.txt")
    applied = isopatch(
        "--session",
        "s",
        "--apply",
        "--porcelain",
        "--",
        "sh",
        "-c",
        "echo b > b.txt",
        cwd=repo,
        env=env,
    )
    assert applied.returncode == 0, applied.err
    assert applied.fields()["applied"] == "true"
    assert (repo / "a.txt").read_text() == "one\ntwo\n" and (repo / "b.txt").read_text() == "b\n"


def test_a_session_keeps_its_base_when_head_moves(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    first = _step(repo, env, "s", "sh", "-c", "echo two >> a.txt")
    git("commit", "-q", "--allow-empty", "-m", "later", cwd=repo, env=env)
    later = isopatch("--session", "s", "--", "true", cwd=repo, env=env)
    assert later.returncode == 0
    assert f"hint: session 's' keeps its base {first['base'][:12]}; HEAD is now" in later.err
    head = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    contradicting = isopatch("--session", "s", "--base", head, "--", "true", cwd=repo, env=env)
    assert contradicting.returncode == 129
    assert f"error: session 's' started at {first['base']}" in contradicting.err
    staged = isopatch("--session", "s", "--staged", "--", "true", cwd=repo, env=env)
    assert staged.returncode == 129
    same = isopatch("--session", "s", "--base", first["base"], "--", "true", cwd=repo, env=env)
    assert same.returncode == 0


def test_a_session_begun_at_another_base_says_nothing_until_head_moves(make_repo, env) -> None:
    """``--session s --base HEAD~1``: the agent chose that base, and the
    user's ``HEAD`` has not moved; only once it does, the hint says so."""
    repo = make_repo({"a.txt": "one\n"})
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo, env=env)
    first = isopatch("--session", "s", "--base", "HEAD~1", "--", "true", cwd=repo, env=env)
    assert first.returncode == 0, first.err
    assert "hint:" not in first.err
    later = isopatch("--session", "s", "--", "true", cwd=repo, env=env)
    assert later.returncode == 0, later.err
    assert "hint:" not in later.err
    git("commit", "-q", "--allow-empty", "-m", "third", cwd=repo, env=env)
    moved = isopatch("--session", "s", "--", "true", cwd=repo, env=env)
    base, head = git("rev-parse", "HEAD~2", "HEAD", cwd=repo, env=env).decode().split()
    assert f"hint: session 's' keeps its base {base[:12]}; HEAD is now {head[:12]}\n" in moved.err


@pytest.mark.hostile
@pytest.mark.parametrize(
    "name", ["a/b", "..", "x..y", ".hidden", "-n", "tab\there", "", "é" * 51, "caf\udce9", "\x9b2J"]
)
def test_a_session_name_is_not_a_path(make_repo, env, name) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    for args in (("--", "true"), ("--end",)):
        done = isopatch("--session", name, *args, cwd=repo, env=env)
        assert done.returncode == 129, done.err
        assert done.err.startswith("error: ")
    assert repo_state(repo, env) == before
    assert not (repo / ".git" / "isopatch").exists()


@pytest.mark.parametrize("args", [("--", "true"), ("--end",)])
def test_a_session_name_left_out_is_named_as_such(make_repo, env, args) -> None:
    """``--session -- cmd`` takes ``--`` for the name: the error says a name
    is missing (the option is what takes it), not that ``--`` is a path."""
    repo = make_repo()
    done = isopatch("--session", *args, cwd=repo, env=env)
    assert done.returncode == 129, done.err
    assert done.err.splitlines()[0] == (
        f"error: option 'session' expects a name, not '{args[0]}' (a name does not start with '-')"
    )
    assert not (repo / ".git" / "isopatch").exists()


@pytest.mark.hostile
def test_a_second_run_of_a_busy_session_waits_then_fails(make_repo, env, tmp_path) -> None:
    """The first step runs until the test lets it end (no fixed sleep: on a
    loaded machine the waiting runs may take seconds to start)."""
    repo = make_repo()
    flag = tmp_path / "started"
    hold = f"touch {flag}; while [ -e {flag} ]; do sleep 0.05; done"
    busy = subprocess.Popen(
        [ISOPATCH, "--session", "s", "--no-sandbox", "--", "sh", "-c", hold],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(flag.exists, what="the first step")
    second = isopatch(
        "--session",
        "s",
        "--porcelain",
        "--",
        "true",
        cwd=repo,
        env={**env, "ISOPATCH_LOCK_TIMEOUT": "0.5"},
    )
    assert second.returncode == 128
    assert second.fields()["error-code"] == "session-busy"
    one = isopatch(
        "--session", "s", "--", "true", cwd=repo, env={**env, "ISOPATCH_LOCK_TIMEOUT": "1"}
    )
    assert one.err.startswith("fatal: session 's' is busy: another run has held it for 1 second\n")
    flag.unlink()
    assert busy.wait(timeout=120) == 0
    assert _step(repo, env, "s", "true")["session-files"] == 0


@pytest.mark.hostile
def test_a_step_killed_leaves_the_session_broken_and_end_cleans_it(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    before = repo_state(repo, env)
    _step(repo, env, "s", "sh", "-c", "echo two >> a.txt")
    flag = written_folder(repo, env, "s") / "started"  # the worktree is really writable
    step = subprocess.Popen(
        [
            ISOPATCH,
            "--session",
            "s",
            "--",
            "sh",
            "-c",
            "echo half >> a.txt; touch started; sleep 60",
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(flag.exists, what="the step")
    step.send_signal(signal.SIGKILL)
    step.wait(timeout=60)
    after = isopatch("--session", "s", "--porcelain", "--", "true", cwd=repo, env=env)
    assert after.returncode == 128
    assert after.fields()["error-code"] == "session-broken"
    assert "hint: end it with 'git isopatch --session s --end'" in after.err
    ended = isopatch("--session", "s", "--end", cwd=repo, env=env)
    assert ended.returncode == 0, ended.err
    assert repo_state(repo, env) == before
    assert _but_base_trees(admin_dirs(repo, env)) == []


@pytest.mark.hostile
def test_a_run_killed_while_it_waits_for_the_session_leaves_it_whole(
    make_repo, env, tmp_path
) -> None:
    """Killed before its step began (between two steps of the session),
    a run leaves the session as its last step did."""
    repo = make_repo({"a.txt": "one\n"})
    _step(repo, env, "s", "sh", "-c", "echo two >> a.txt")
    flag = written_folder(repo, env, "s") / "started"
    holder = subprocess.Popen(
        [ISOPATCH, "--session", "s", "--", "sh", "-c", "touch started; sleep 3; rm started"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(flag.exists, what="the holding step")
    waiter = subprocess.Popen(
        [ISOPATCH, "--session", "s", "--", "sh", "-c", "echo never > never.txt"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    waiter.send_signal(signal.SIGKILL)
    waiter.wait(timeout=60)
    assert holder.wait(timeout=120) == 0
    last = _step(repo, env, "s", "true")
    patch = Path(last["session-patch"]).read_text()
    assert "+two" in patch and "never" not in patch


def test_two_sessions_at_one_base_run_in_parallel_and_stay_apart(make_repo, env) -> None:
    repo = make_repo({"a.txt": "one\n"})
    runs = [
        subprocess.Popen(
            [
                ISOPATCH,
                "--session",
                name,
                "--json",
                "--",
                "sh",
                "-c",
                f"echo {name} > {name}.txt; ls > seen-{name}",
            ],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("left", "right")
    ]
    results = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    for name, result in zip(("left", "right"), results, strict=True):
        other = "right" if name == "left" else "left"
        assert sorted(_paths(result)) == [f"{name}.txt", f"seen-{name}"]
        seen = (written_folder(repo, env, name) / f"seen-{name}").read_text()
        assert f"{other}.txt" not in seen
    again = _step(repo, env, "left", "ls")
    assert "right" not in Path(again["session-patch"]).read_text()


@pytest.mark.hostile
def test_a_step_that_rewrites_its_record_cannot_take_another_session(make_repo, env) -> None:
    """The worktree's private folder is the command's to write: a record
    naming another session is put right when the step ends, and the other
    session is never found there."""
    repo = make_repo()
    _step(repo, env, "other", "sh", "-c", "echo other > o.txt")
    forge = (
        "r=$(git rev-parse --git-dir)/isopatch.json; "
        'sed \'s/"session": "mine"/"session": "other"/\' "$r" > "$r.new" && mv "$r.new" "$r"; '
        "echo mine > m.txt"
    )
    _step(repo, env, "mine", "sh", "-c", forge, options=("--no-sandbox",))
    other = _step(repo, env, "other", "ls")
    assert "m.txt" not in Path(other["session-patch"]).read_text()
    mine = _step(repo, env, "mine", "ls")
    assert "+mine" in Path(mine["session-patch"]).read_text()


def test_an_idle_session_counts_against_max_worktrees(make_repo, env) -> None:
    repo = make_repo()
    _step(repo, env, "s", "touch", "x")
    git("config", "isopatch.maxWorktrees", "1", cwd=repo, env=env)
    plain = isopatch("--", "true", cwd=repo, env=env)
    assert plain.returncode == 0, plain.err
    assert "warning: removed the oldest idle session 's' (isopatch.maxWorktrees is 1)" in plain.err
    listed = json.loads(isopatch("list", "--json", cwd=repo, env=env).out)
    assert [e for e in listed if e["state"] != "base"] == []  # the run's base tree stays
    git("config", "isopatch.maxWorktrees", "5", cwd=repo, env=env)
    told = isopatch("--session", "s", "--", "true", cwd=repo, env=env)
    assert told.returncode == 128, told.err
    assert re.match(
        r"fatal: session 's' was ended by a run that made room \(isopatch.maxWorktrees is 1\) "
        r"at "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n",
        told.err,
    ), told.err


def test_prune_sessions_removes_an_idle_session_and_its_lock(make_repo, env) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    _step(repo, env, "s", "touch", "x")
    pruned = isopatch("prune", "-v", "--sessions", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert "session" in pruned.out
    assert os.listdir(repo / ".git" / "isopatch" / "sessions") == ["s.ended"]  # word for it
    assert admin_dirs(repo, env) == []
    assert repo_state(repo, env) == before
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0
    assert not (repo / ".git" / "isopatch").exists()


def test_a_session_from_uncommitted_work_keeps_it_as_its_base(make_repo, env) -> None:
    """Made with ``--include-uncommitted``, the session starts from the
    user's edits; later steps say nothing of HEAD or of edits left out,
    and its whole change applies on the user's work tree as it is."""
    repo = make_repo({"a.txt": "one\n"})
    (repo / "a.txt").write_text("one\nmine\n")
    first = isopatch(
        "--session", "s", "--include-uncommitted", "--porcelain", "--", "true", cwd=repo, env=env
    )
    assert first.returncode == 0, first.err
    later = isopatch("--session", "s", "--", "sh", "-c", "echo theirs >> a.txt", cwd=repo, env=env)
    assert later.returncode == 0 and "hint:" not in later.err.replace("hint: to apply it", ""), (
        later.err
    )
    applied = isopatch("--session", "s", "--apply", "-q", "--", "true", cwd=repo, env=env)
    assert applied.returncode == 0, applied.err
    assert (repo / "a.txt").read_text() == "one\nmine\ntheirs\n"


@pytest.mark.hostile
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_step_whose_state_cannot_be_recorded_leaves_the_session_broken(
    make_repo, env, sandbox
) -> None:
    """A repository without a commit inside the worktree: ``git add --all``
    refuses it, so the session's state after the step cannot be recorded.
    The step fails saying so and the session is broken, never left at its
    last state with a worktree that no longer matches it (a later step
    would lose this one's change)."""
    repo = make_repo({"a.txt": "one\n"})
    before = repo_state(repo, env)
    _step(repo, env, "s", "sh", "-c", "echo first > first.txt", options=(sandbox,))
    step = isopatch(
        "--session", "s", "--porcelain", sandbox, "--", "sh", "-c",
        "echo two >> a.txt && git init -q sub",
        cwd=repo, env=env,
    )  # fmt: skip
    assert step.returncode == 128, step.err
    assert "session 's' is broken: could not record the session's state" in step.err
    assert "'sub/' does not have a commit checked out" in step.err
    assert "session-patch" not in step.fields()
    after = isopatch("--session", "s", "--porcelain", sandbox, "--", "true", cwd=repo, env=env)
    assert after.returncode == 128
    assert after.fields()["error-code"] == "session-broken"
    assert "session 's' is broken: could not record the session's state" in after.err
    ended = isopatch("--session", "s", "--end", cwd=repo, env=env)
    assert ended.returncode == 0, ended.err
    assert repo_state(repo, env) == before
    assert _but_base_trees(admin_dirs(repo, env)) == []


@pytest.mark.hostile
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_commit_a_step_makes_is_there_for_the_next_and_other_repositories_work(
    make_repo, env, tmp_path, sandbox
) -> None:
    """The command's git is not pointed at the session's object store: a
    ``git clone`` and a repository it makes work as in a run of their own;
    a commit a step makes is kept in the session's store (under the
    sandbox the repository's is copy-on-write and discarded) and the next
    step sees it."""
    other = make_repo({"o.txt": "o\n"}, name="other")
    repo = make_repo({"a.txt": "one\n"})
    commit = "git -c user.name=a -c user.email=a@b.invalid commit -qm"
    _step(repo, env, "s", "sh", "-c", "echo two >> a.txt", options=(sandbox,))
    made = _step(
        repo,
        env,
        "s",
        "sh",
        "-c",
        f"git add -A && {commit} mine && echo three >> a.txt",
        options=(sandbox,),
    )
    assert made["exit"] == 0, made
    seen = _step(
        repo,
        env,
        "s",
        "sh",
        "-c",
        "git log -2 --format=%s > seen.txt && git show HEAD:a.txt >> seen.txt",
        options=(sandbox,),
    )
    assert seen["exit"] == 0, seen
    assert (written_folder(repo, env, "s") / "seen.txt").read_text() == "mine\nbase\none\ntwo\n"
    clone = tmp_path / "clone"
    cloned = _step(
        repo,
        env,
        "s",
        "git",
        "clone",
        "-q",
        "--no-hardlinks",
        str(other),
        str(clone),
        options=(sandbox,),
    )
    assert cloned["exit"] == 0, cloned
    nested = (
        "git init -q inner && cd inner && echo i > i && git add i "
        f"&& {commit} i && cd .. && git add inner 2>/dev/null"
    )
    inner = _step(repo, env, "s", "sh", "-c", nested, options=(sandbox,))
    assert inner["exit"] == 0, inner
    assert inner.get("session-patch") and "error" not in inner, inner
    clean = apply_to_clean_checkout(
        repo, inner["base"], Path(inner["session-patch"]), tmp_path / "clean", env
    )
    shown = session_manifest(repo, env, "s")
    expected = {k: v for k, v in shown.items() if not k.startswith(b"inner/")}
    assert tree_manifest(clean) == expected
    assert isopatch("--session", "s", "--end", cwd=repo, env=env).returncode == 0


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("folder", "name"),
    [("--absolute-git-dir", "planted"), ("--git-common-dir", "packed-refs")],
    ids=["worktree-git-dir", "common-dir"],
)
def test_a_fifo_planted_in_the_git_directory_breaks_the_session(
    make_repo, env, tmp_path: Path, folder: str, name: str
) -> None:
    """Under the sandbox a FIFO in the git directory fails the step
    (``unsafe-git-dir``) and no git of ours opens it (one in
    ``packed-refs`` would wait for ever): the session's state cannot be
    recorded, so the session is broken, its last whole change kept, and
    every later step fails with one line."""
    repo = make_repo({"a.txt": "one\n"})
    _step(repo, env, "s", "sh", "-c", "echo first > first.txt", options=("--sandbox",))
    kept = list(tmp_path.glob("repo.isopatch-*/session/session.patch"))
    assert len(kept) == 1, kept
    last = kept[0].read_bytes()
    plant = f'd=$(git rev-parse {folder}) && rm -f "$d/{name}" && mkfifo "$d/{name}"'
    step = isopatch(
        "--session", "s", "--porcelain", "--sandbox", "--", "sh", "-c",
        f"echo two >> a.txt && {plant}",
        cwd=repo, env=env, timeout=60,
    )  # fmt: skip
    assert step.returncode == 128, step.err
    assert step.fields()["error-code"] == "unsafe-git-dir", step.out
    assert step.err.startswith("fatal: the command left "), step.err
    assert "\nhint: session 's' is broken: the command left" in step.err, step.err
    assert kept[0].read_bytes() == last
    for _ in range(2):
        after = isopatch("--session", "s", "--porcelain", "--", "true", cwd=repo, env=env)
        assert after.returncode == 128, after.err
        assert after.fields()["error-code"] == "session-broken", after.out
        errors = [line for line in after.err.splitlines() if not line.startswith("hint:")]
        assert len(errors) == 1 and errors[0].startswith("fatal: session 's' is broken: "), errors
        assert "Error" not in after.err and "[(" not in after.err, after.err
    assert kept[0].read_bytes() == last
    ended = isopatch("--session", "s", "--end", cwd=repo, env=env)
    assert ended.returncode == 0, ended.err


@pytest.mark.hostile
def test_a_session_whose_git_state_cannot_be_moved_says_why_in_one_line(make_repo, env) -> None:
    """Unconfined, the worktrees' private folders on a file system of
    their own: putting the step's git state away copies it, and a FIFO
    the command left in a folder there cannot be copied.  The session is
    broken, and its message names the path, not Python's list of errors."""
    repo = make_repo({"a.txt": "one\n"})
    with tmpfs(repo / ".git" / "worktrees", "16m"):
        _step(repo, env, "s", "sh", "-c", "echo first > first.txt", options=("--no-sandbox",))
        plant = 'd=$(git rev-parse --absolute-git-dir)/refs/q && mkdir -p "$d" && mkfifo "$d/x"'
        _step(repo, env, "s", "sh", "-c", plant, options=("--no-sandbox",))
        after = isopatch("--session", "s", "--porcelain", "--", "true", cwd=repo, env=env)
        assert after.returncode == 128, after.err
        assert after.fields()["error-code"] == "session-broken", after.out
        errors = [line for line in after.err.splitlines() if not line.startswith("hint:")]
        assert len(errors) == 1, errors
        assert errors[0].startswith("fatal: session 's' is broken: its git state could not be "), (
            errors
        )
        assert "refs/q/x'" in errors[0] and "[(" not in errors[0] and "`" not in errors[0], errors
        ended = isopatch("--session", "s", "--end", cwd=repo, env=env)
        assert ended.returncode == 0, ended.err
