"""The command's end through the sandbox (design: "Porcelain v1", "Exit
status"): a sandboxed run reports what the unconfined one does, in
porcelain and in JSON, whether the command was killed by its own signal,
by one git-isopatch forwarded, by ``--timeout``, or merely exited 143.

bubblewrap itself says ``128+N`` for a command killed by signal N (as
``exit 128+N``); the launcher between it and the command
(``git_isopatch.sandbox.launcher``) reports the real wait status.  Real
bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from hostile import wait_until
from repo_helpers import ISOPATCH, isopatch
from sandbox_helpers import run_as_nobody

#: The records (porcelain) that tell how the command ended.
ENDING = ("exit", "signal", "timed-out", "command-error")
#: The same, in JSON.
ENDING_JSON = ("exit", "signal", "timed_out", "command_error")

MODES = ("--no-sandbox", "--sandbox")

#: Commands and how each ends: (argv, the ending records of the run).
CASES = {
    "own-sigterm": (["sh", "-c", "kill -TERM $$"], {"exit": "143", "signal": "SIGTERM"}),
    "own-sigkill": (["sh", "-c", "kill -KILL $$"], {"exit": "137", "signal": "SIGKILL"}),
    "own-sigint": (["sh", "-c", "kill -INT $$"], {"exit": "130", "signal": "SIGINT"}),
    "exit-143": (["sh", "-c", "exit 143"], {"exit": "143"}),
    "exit-137": (["sh", "-c", "exit 137"], {"exit": "137"}),
    "exit-0": (["true"], {"exit": "0"}),
    "not-found": (
        ["no-such-program-here"],
        {
            "exit": "127",
            "command-error": "cannot run 'no-such-program-here': No such file or directory",
        },
    ),
    "not-executable": (
        ["./README"],
        {"exit": "126", "command-error": "cannot run './README': Permission denied"},
    ),
}


def _ending(out: str) -> dict[str, str]:
    records = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return {key: value for key, value in records.items() if key in ENDING}


def _json_ending(out: str) -> dict[str, object]:
    value = json.loads(out)
    return {key: value.get(key) for key in ENDING_JSON}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_ending_is_the_unconfined_one(env, make_repo, no_leftovers, case: str) -> None:
    """Porcelain, JSON and exit status, sandboxed as unconfined."""
    argv, expected = CASES[case]
    repo = make_repo()
    seen = {}
    for mode in MODES:
        run = isopatch("--porcelain", mode, "--", *argv, cwd=repo, env=env)
        as_json = isopatch("--json", mode, "--", *argv, cwd=repo, env=env)
        seen[mode] = (
            run.returncode,
            _ending(run.out),
            as_json.returncode,
            _json_ending(as_json.out),
        )
        assert _ending(run.out) == expected, (mode, run.err)
    assert seen["--sandbox"] == seen["--no-sandbox"]


def test_a_timeout_is_the_unconfined_one(env, make_repo, no_leftovers) -> None:
    """``--timeout``: 124, ``timed-out true``, no ``signal``, even for a
    command that the SIGKILL after the grace period ends."""
    repo = make_repo()
    seen = {}
    for mode in MODES:
        for argv in (["sleep", "60"], ["sh", "-c", "trap '' TERM; sleep 60"]):
            run = isopatch("--porcelain", mode, "--timeout", "1", "--", *argv, cwd=repo, env=env)
            as_json = isopatch("--json", mode, "--timeout", "1", "--", *argv, cwd=repo, env=env)
            ending = _ending(run.out)
            assert ending == {"exit": "124", "timed-out": "true"}, (mode, argv, run.err)
            seen[mode, argv[0]] = (run.returncode, ending, _json_ending(as_json.out))
    for argv0 in ("sleep", "sh"):
        assert seen["--sandbox", argv0] == seen["--no-sandbox", argv0]


#: Traps the signal, then (after git-isopatch has had time to misbehave)
#: writes a file and exits 3: a command that cleans up.
CLEANS_UP = (
    'trap \'sleep 0.5; echo "cleaned $SIG" > cleaned; exit 3\' "$SIG"; '
    ': > "$READY"; sleep 60 & wait'
)


def _forwarded(repo: Path, env, tmp_path: Path, mode: str, signum: int) -> tuple[int, str]:
    shared = tmp_path / "shared"  # really writable in the sandbox
    shared.mkdir(exist_ok=True)
    ready = shared / f"ready-{mode}-{signum}"
    name = signal.Signals(signum).name.removeprefix("SIG")
    allow = ["--allow-write", str(shared)] if mode == "--sandbox" else []
    process = subprocess.Popen(
        [ISOPATCH, "--porcelain", mode, *allow, "--", "sh", "-c", CLEANS_UP],
        cwd=repo,
        env={**env, "READY": str(ready), "SIG": name},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: ready.exists() or process.poll() is not None, what="the command")
    os.kill(process.pid, signum)
    out, err = process.communicate(timeout=120)
    return process.returncode, out.decode() + err.decode()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_forwarded_signal_reaches_only_the_command(
    env, make_repo, tmp_path: Path, no_leftovers, signum: int
) -> None:
    """A signal sent to git-isopatch reaches the command, which cleans up as
    it would unconfined (its file is in the patch): bubblewrap's monitor,
    in the same process group, does not die of it and take the namespace
    with it."""
    repo = make_repo()
    for mode in MODES:
        code, out = _forwarded(repo, env, tmp_path, mode, signum)
        assert code == 128 + signum, (mode, out)
        records = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        assert _ending(out) == {"exit": str(128 + signum), "signal": signal.Signals(signum).name}
        patch = Path(records["patch"]).read_text()
        name = signal.Signals(signum).name.removeprefix("SIG")
        assert f"+cleaned {name}" in patch, (mode, out)


#: The signals the command inherited blocked and ignored (proc(5)), read by
#: the program the shell execs (the shell's own state changes while it
#: waits for a child).
SIGNAL_STATE = "exec grep -E '^Sig(Blk|Ign)' /proc/self/status"


def test_the_command_gets_the_unconfined_signal_state(env, make_repo, no_leftovers) -> None:
    """No signal blocked or ignored that unconfined is not (the launcher
    blocks every signal for itself, bubblewrap's monitor the forwarded
    ones), ``SIGPIPE`` back to its default (``yes`` ends of it)."""
    repo = make_repo()
    script = f"yes | head -c 1 >/dev/null; echo pipe=$?; {SIGNAL_STATE}"
    shown = {}
    for mode in MODES:
        run = isopatch("--porcelain", mode, "--", "sh", "-c", script, cwd=repo, env=env)
        assert run.returncode == 0, run.err
        shown[mode] = Path(run.fields()["stdout"]).read_text()
    assert shown["--sandbox"].startswith("pipe=0\nSigBlk:\t0000000000000000\n"), shown
    assert shown["--sandbox"] == shown["--no-sandbox"]


def test_the_environment_gets_no_lc_ctype_from_the_launcher(env, make_repo, no_leftovers) -> None:
    """A C locale that git-isopatch leaves alone (``PYTHONCOERCECLOCALE=0``)
    reaches the command as it is: the launcher, isolated from the user's
    variables, would coerce it (PEP 538) and add ``LC_CTYPE``."""
    repo = make_repo()
    plain = {k: v for k, v in env.items() if k not in ("LC_ALL", "LC_CTYPE", "LANG")}
    plain["PYTHONCOERCECLOCALE"] = "0"
    shown = {}
    for mode in MODES:
        run = isopatch(
            "--porcelain", mode, "--", "sh", "-c", 'echo "[${LC_CTYPE-unset}]"',
            cwd=repo, env=plain,
        )  # fmt: skip
        assert run.returncode == 0, run.err
        shown[mode] = Path(run.fields()["stdout"]).read_text()
    assert shown == {mode: "[unset]\n" for mode in MODES}


#: As uid 65534: each case's ending, sandboxed and unconfined, printed as JSON.
AS_NOBODY = """
isopatch = [sys.executable, "-m", "git_isopatch"]
seen = {}
for name, argv in json.loads(sys.argv[1]).items():
    for mode in ("--no-sandbox", "--sandbox"):
        done = subprocess.run([*isopatch, "--porcelain", mode, "--", *argv], cwd=repo,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        records = dict(l.split(" ", 1) for l in done.stdout.decode().splitlines() if " " in l)
        seen[f"{name} {mode}"] = [done.returncode, records.get("exit"), records.get("signal"),
                                  done.stderr.decode()]
print(json.dumps(seen))
"""


def test_the_ending_as_an_unprivileged_user(env) -> None:
    """As uid 65534 (no capability: bubblewrap makes an unprivileged user
    namespace), the same endings."""
    cases = {name: CASES[name][0] for name in ("own-sigterm", "exit-143", "not-found")}
    with run_as_nobody(env, AS_NOBODY, json.dumps(cases)) as seen:
        for name in cases:
            expected = CASES[name][1]
            code, exit_record, signal_record, err = seen[f"{name} --sandbox"]
            assert (exit_record, signal_record) == (expected["exit"], expected.get("signal")), err
            assert seen[f"{name} --sandbox"][:3] == seen[f"{name} --no-sandbox"][:3], err
