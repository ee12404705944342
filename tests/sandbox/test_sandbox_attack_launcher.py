"""A hostile command in the namespaces sandbox turns on the launcher
between bubblewrap and itself (``git_isopatch.sandbox.launcher``), the
one process of the namespace that speaks for it (design: "Exit status").

- It opens the launcher's report descriptor again through
  ``/proc/<pid>/fd`` and writes a wait status of its own first (a stopped
  process, a number no status fits, ``exec`` failed, success), reads the
  launcher's memory or attaches to it with ``ptrace``: refused, and the run
  reports the command's real exit with no traceback.
- It stops the launcher (``SIGSTOP``) or kills it (``SIGKILL``), then
  exits: the run ends, with the command's own exit code, instead of
  hanging on a stopped launcher or ending as if killed.

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import encodings
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from repo_helpers import isopatch
from sandbox_helpers import run_as_nobody

import git_isopatch

#: Forges the launcher's report wherever the command can reach it, then
#: exits 3; prints what it managed.
FORGE = """\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
lines = [b"wait 4991\\n", b"wait 99999999999999999999\\n", b"wait -1\\n"]
lines += [b"exec 2\\n", b"wait 0\\n"]
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me):
    try:
        fds = [int(fd) for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        fds = list(range(3, 64))
    for fd in (fd for fd in fds if fd > 2):
        try:
            out = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        for line in lines:
            try:
                os.write(out, line)
            except OSError:
                pass
        print("forged", pid, fd)
    try:
        open(f"/proc/{pid}/mem", "rb").close()
        print("mem", pid)
    except OSError:
        pass
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print("traced", pid)
        libc.ptrace(17, pid, 0, 0)
print("probed")
raise SystemExit(3)
"""

#: Stops, then kills, every other process of the namespace, then exits 5.
STOP_KILL = """\
import os, signal
me = os.getpid()
for sig in (signal.SIGSTOP, signal.SIGKILL):
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
print("probed")
raise SystemExit(5)
"""

PROBES = {"forge": (FORGE, 3), "stop-kill": (STOP_KILL, 5)}


def _check(code: int, out: str, err: str, expected: int) -> None:
    """The run reports the command's own exit, and the probe got nowhere."""
    records = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert "Traceback" not in err, err
    assert code == expected, (code, out, err)
    assert records.get("exit") == str(expected), out
    assert "signal" not in records and "command-error" not in records, out
    said = Path(records["stdout"]).read_text()
    assert said.splitlines() == ["probed"], said


def test_the_command_cannot_forge_the_launchers_report(env, make_repo, no_leftovers) -> None:
    """Its descriptor, memory and ``ptrace`` are out of the command's reach."""
    repo = make_repo()
    run = isopatch("--porcelain", "--sandbox", "--", sys.executable, "-c", FORGE, cwd=repo, env=env)
    _check(run.returncode, run.out, run.err, 3)


def test_the_command_cannot_stop_or_kill_the_launcher(env, make_repo, no_leftovers) -> None:
    """``SIGSTOP`` then ``SIGKILL`` to every other process it sees: the run
    still ends (bounded by the timeout here) with the command's exit."""
    repo = make_repo()
    run = isopatch(
        "--porcelain", "--sandbox", "--", sys.executable, "-c", STOP_KILL,
        cwd=repo, env=env, timeout=90,
    )  # fmt: skip
    _check(run.returncode, run.out, run.err, 5)


#: As uid 65534: each probe's run, as [returncode, stdout, stderr] in JSON.
AS_NOBODY = """
seen = {}
for name, probe in json.loads(sys.argv[1]).items():
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--",
         sys.executable, "-c", probe],
        cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=90)
    seen[name] = [done.returncode, done.stdout.decode(), done.stderr.decode()]
print(json.dumps(seen))
"""


def test_the_launcher_holds_as_an_unprivileged_user(env) -> None:
    """As uid 65534 (bubblewrap makes an unprivileged user namespace),
    both attacks fail the same way."""
    probes = {name: probe for name, (probe, _) in PROBES.items()}
    with run_as_nobody(env, AS_NOBODY, json.dumps(probes)) as seen:
        for name, (_, expected) in PROBES.items():
            _check(*seen[name], expected)  # reads the captured stdout


def test_the_launchers_program_is_the_packages_whatever_the_environment(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    """The launcher's program (``launcher_main``) is never a module found
    by name: one of that name where the environment points Python, or in
    the folder the run starts in, is never the one it runs."""
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "launcher_main.py").write_text(
        "import os\ndef main(argv):\n    os.write(2, b'planted launcher\\n')\n    os._exit(0)\n"
    )
    repo = make_repo()
    (repo / "launcher_main.py").write_text((planted / "launcher_main.py").read_text())
    hostile = {**env, "PYTHONPATH": str(planted)}
    run = isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c", "echo ran > ran.txt; exit 7",
        cwd=repo, env=hostile,
    )  # fmt: skip
    assert run.returncode == 7, run.err
    assert "planted launcher" not in run.err
    assert run.fields().get("exit") == "7"
    assert "A ran.txt" in run.out


#: Plants, where the package sits inside the cache folder, a launcher
#: program that never moves into the run's cgroups: the genuine one with
#: that one step taken out (``launcher_main.py``, and its compiled file).
PLANT_IN_CACHE = """\
import os, sys
folder = sys.argv[1]
source = open(os.path.join(folder, "launcher_main.py")).read()
planted = source.replace("        _bound(bounds)\\n", "        pass\\n")
assert planted != source
with open(os.path.join(folder, "launcher_main.py"), "w") as handle:
    handle.write(planted)
os.makedirs(os.path.join(folder, "__pycache__"), exist_ok=True)
for name in os.listdir(os.path.join(folder, "__pycache__")):
    if name.startswith("launcher_main."):
        os.unlink(os.path.join(folder, "__pycache__", name))
print("planted")
"""


def _install(site: Path) -> Path:
    """A copy of the package in ``site`` (as pip or uv would install it
    there, compiled files aside); its ``sandbox`` folder."""
    package = Path(git_isopatch.__file__).parent
    shutil.copytree(package, site / "git_isopatch", ignore=shutil.ignore_patterns("__pycache__"))
    return site / "git_isopatch" / "sandbox"


def _run_installed(site: Path, repo: Path, env, *argv: str) -> tuple[dict[str, str], str]:
    """``argv`` run sandboxed by the copy of the package in ``site``: the
    porcelain records and what the command printed."""
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox",
         "--max-processes", "64", "--", *argv],
        cwd=repo, env={**env, "PYTHONPATH": str(site)}, capture_output=True,
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    records = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines() if " " in line)
    assert records.get("exit") == str(done.returncode), (done.returncode, records, err)
    return records, Path(records["stdout"]).read_text()


@pytest.mark.hostile
def test_a_launcher_planted_in_the_cache_layer_never_runs(env, make_repo, tmp_path) -> None:
    """git-isopatch installed inside a cache folder the cache layer keeps
    (``uvx`` runs it from ``~/.cache/uv/archive-v0/...``, pre-commit's
    environments live in ``~/.cache/pre-commit``): a command that rewrites
    the launcher's program there writes the cache layer, which the next
    run of the repository mounts; that run's launcher is still the
    package's, and the next command still lives in the run's cgroups."""
    _needs_root_for_cgroups()
    cache = Path(env["HOME"]) / ".cache"
    site = cache / "uv" / "archive-v0" / "abc" / "site-packages"
    folder = _install(site)
    env = {**env, "XDG_CACHE_HOME": str(cache)}
    repo = make_repo()
    records, said = _run_installed(
        site, repo, env, sys.executable, "-c", PLANT_IN_CACHE, str(folder)
    )
    assert records["exit"] == "0" and said == "planted\n", (records, said)
    assert "_bound(bounds)" in (folder / "launcher_main.py").read_text()  # the real one
    records, seen = _run_installed(site, repo, env, "cat", "/proc/self/cgroup")
    assert records["exit"] == "0", records
    pids = [line for line in seen.splitlines() if ":pids:" in line or line.startswith("0::")]
    assert any("/git-isopatch-" in line for line in pids), seen


@pytest.mark.hostile
@pytest.mark.parametrize("where", ["/dev/shm", "/run"])
def test_a_package_installed_where_the_sandbox_hides_still_runs(env, make_repo, where) -> None:
    """git-isopatch installed under a folder the sandbox replaces with an
    empty one of its own (``/dev/shm``, ``/run``): the command runs and its
    own exit status is the run's, as with any other installation."""
    if not os.access(where, os.W_OK):
        pytest.skip(f"{where} cannot be written here")
    site = Path(tempfile.mkdtemp(prefix="git-isopatch-test-", dir=where))
    try:
        _install(site)
        repo = make_repo()
        records, said = _run_installed(site, repo, env, "sh", "-c", "echo ran; exit 3")
        assert records["exit"] == "3" and said == "ran\n", (records, said)
    finally:
        shutil.rmtree(site, ignore_errors=True)


def _needs_root_for_cgroups() -> None:
    if os.geteuid() != 0:
        pytest.skip("a cgroup of the run's own needs root here")


#: As uid 65534: the package installed in its own cache folder, the plant,
#: then a run whose command says its process limit: [first, second], each
#: [returncode, stderr, what the command printed].
PLANTED_AS_NOBODY = """
import shutil, git_isopatch
home = os.environ["HOME"]
site = os.path.join(home, ".cache", "uv", "archive-v0", "abc", "site-packages")
package = os.path.dirname(git_isopatch.__file__)
ignored = shutil.ignore_patterns("__pycache__")
shutil.copytree(package, os.path.join(site, "git_isopatch"), ignore=ignored)
folder = os.path.join(site, "git_isopatch", "sandbox")
env = dict(os.environ, XDG_CACHE_HOME=os.path.join(home, ".cache"))
env["PYTHONPATH"] = site + os.pathsep + env["PYTHONPATH"]

def run(*argv):
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox",
         "--max-processes", "16", "--", *argv],
        cwd=repo, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    out = done.stdout.decode()
    fields = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    said = open(fields["stdout"]).read() if "stdout" in fields else ""
    return [done.returncode, done.stderr.decode(), said]

first = run(sys.executable, "-c", sys.argv[1], folder)
limit = "import resource; print(resource.getrlimit(resource.RLIMIT_NPROC)[0])"
second = run(sys.executable, "-c", limit)
print(json.dumps([first, second]))
"""


@pytest.mark.hostile
def test_a_launcher_planted_in_the_cache_layer_never_runs_as_an_unprivileged_user(env) -> None:
    """As uid 65534, where the launcher sets the process bound as an
    rlimit: after the plant, the next command still has that bound."""
    with run_as_nobody(env, PLANTED_AS_NOBODY, PLANT_IN_CACHE) as (first, second):
        assert first[0] == 0 and first[2] == "planted\n", first
        assert second[0] == 0 and second[2] == "16\n", second


#: Planted by the command at the head of a module of the interpreter's own
#: library (``{proof}``: a really writable folder): whatever process runs
#: it records its status there, capabilities included.
RECORD = (
    "import os as _os\n"
    "with open('{proof}/%d' % _os.getpid(), 'w') as _h:\n"
    "    _h.write(open('/proc/self/status').read())\n"
)


@pytest.mark.hostile
def test_a_module_the_command_rewrote_never_runs_with_a_capability(
    env, make_repo, tmp_path, no_leftovers
) -> None:
    """The interpreter lives in the home (pyenv, conda, uv's Pythons),
    copy-on-write inside: the command rewrites a module of its library
    (one the launcher would load only after the command, a codec).  No
    code of the command's ever runs in the launcher while it holds its
    capabilities (its ``CAP_SYS_ADMIN`` makes mounts for our own git); the
    command's own Python runs it, with none."""
    library = Path(encodings.__file__).resolve().parent.parent
    home = Path(sys.base_prefix).resolve()
    assert library.is_relative_to(home), (library, home)
    proof = tmp_path / "proof"
    proof.mkdir()
    module = library / "encodings" / "unicode_escape.py"
    record = tmp_path / "record.py"
    record.write_text(RECORD.format(proof=proof))
    script = (
        f'{{ cat "{record}" "{module}"; }} > "$TMPDIR/m" && cp "$TMPDIR/m" "{module}"'
        f' && rm -f "{module.parent}"/__pycache__/unicode_escape.* && echo evil >> README'
        f" && {sys.executable} -I -c \"b'x'.decode('unicode_escape')\""  # the plant holds
    )
    repo = make_repo()
    run = isopatch(
        "--porcelain", "--sandbox", "--allow-write", str(proof), "--", "sh", "-c", script,
        cwd=repo, env={**env, "HOME": str(home)},
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert "M README" in run.out, run.out
    assert list(proof.iterdir()), "the planted module never ran"
    for status in proof.iterdir():
        held = [ln for ln in status.read_text().splitlines() if ln.startswith("Cap")]
        assert all(ln.endswith("\t0000000000000000") for ln in held), (status.name, held)
