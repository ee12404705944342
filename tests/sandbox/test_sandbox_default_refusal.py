"""Where the kernel refuses the namespaces, the fallback says why and how
to allow them (design: "What it does"; sandbox/refusal.py): a seccomp
filter (a container's default), AppArmor's restriction of Ubuntu 23.10 and
later (its sysctl faked in a mount namespace of the test's own, the
refusal provoked with a seccomp filter, the real code path reading both),
and a run inside another run's sandbox, which bubblewrap's words alone
blamed on "No space left on device"."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git
from sandbox_helpers import NO_NAMESPACES, nobody_python, readable_site, refuse_syscall

from git_isopatch.sandbox.refusal import APPARMOR_STEP, CONTAINER_STEP


def _warning(stderr: bytes) -> str:
    lines = [line for line in stderr.decode().splitlines() if line.startswith("warning: no")]
    assert len(lines) == 1, stderr.decode()
    return lines[0]


def test_a_seccomp_refusal_names_the_filter_and_the_containers_step(env, make_repo) -> None:
    repo = make_repo()
    done = subprocess.run(
        [str(ISOPATCH), "-q", "--", "true"], cwd=repo, env=env, capture_output=True,
        preexec_fn=refuse_syscall(*NO_NAMESPACES), timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warning = _warning(done.stderr)
    assert "a seccomp filter of this process refuses them" in warning
    assert CONTAINER_STEP in warning
    fatal = subprocess.run(
        [str(ISOPATCH), "--sandbox", "--", "true"], cwd=repo, env=env, capture_output=True,
        preexec_fn=refuse_syscall(*NO_NAMESPACES), timeout=120, check=False,
    )  # fmt: skip
    assert fatal.returncode == 128
    assert CONTAINER_STEP in fatal.stderr.decode().splitlines()[0]


#: As root: a mount namespace in which /proc/sys/kernel holds AppArmor's
#: restriction turned on, then uid 65534 (no CAP_SYS_ADMIN: the
#: restriction holds for it), then namespaces refused, then the run.
APPARMOR_MACHINE = """\
import os, shutil, subprocess, sys
sys.path.insert(0, sys.argv[1])
fake = sys.argv[2]
subprocess.run(["mount", "-t", "tmpfs", "none", fake], check=True)
os.mkdir(os.path.join(fake, "random"))
shutil.copy("/proc/sys/kernel/random/boot_id", os.path.join(fake, "random"))
with open(os.path.join(fake, "apparmor_restrict_unprivileged_userns"), "w") as f:
    f.write("1\\n")
subprocess.run(["mount", "--bind", fake, "/proc/sys/kernel"], check=True)
from sandbox_helpers import NO_NAMESPACES, refuse_syscall
os.setgroups([]); os.setgid(65534); os.setuid(65534)
refuse_syscall(*NO_NAMESPACES)()
os.execv(sys.executable, [sys.executable, "-m", "git_isopatch", "-q", "--", "true"])
"""


@pytest.fixture
def place_of_nobody():
    """A folder of /tmp that uid 65534 may enter, gone after the test."""
    shared = Path(tempfile.mkdtemp(prefix="isopatch-nobody-", dir="/tmp"))
    shared.chmod(0o755)
    yield shared
    shutil.rmtree(shared, ignore_errors=True)


def test_apparmors_restriction_names_the_profile_step(env, place_of_nobody) -> None:
    if os.geteuid() != 0:
        pytest.skip("makes a mount namespace and becomes uid 65534: needs root")
    place = place_of_nobody
    (place / "home").mkdir(parents=True)
    (place / "fake").mkdir()
    repo = place / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo, env=env)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo, env=env)
    for path in [place, *place.rglob("*")]:
        os.chown(path, 65534, 65534)
    # uid 65534 may enter neither the checkout nor the virtual environment
    # (in a folder of mode 0700): an interpreter it may run, and the
    # package and helpers where it may read them
    site = str(readable_site())
    environ = {
        **env, "HOME": str(place / "home"), "TMPDIR": str(place / "home"),
        "XDG_CACHE_HOME": str(place / "home" / ".cache"), "PATH": "/usr/bin:/bin",
        "PYTHONPATH": site,
    }  # fmt: skip
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", nobody_python(), "-c", APPARMOR_MACHINE,
         site, str(place / "fake")],
        cwd=repo, env=environ, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warning = _warning(done.stderr)
    assert "AppArmor restricts unprivileged user namespaces" in warning, warning
    assert APPARMOR_STEP in warning


def test_a_run_inside_a_runs_sandbox_says_so(env, make_repo) -> None:
    repo = make_repo()
    done = subprocess.run(
        [str(ISOPATCH), "-q", "--sandbox", "--", str(ISOPATCH), "-q", "--", "true"],
        cwd=repo, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warning = _warning(done.stderr)
    assert "this run is inside another git-isopatch run's sandbox" in warning, warning


def test_the_apparmor_profile_names_the_bubblewrap_in_use(env, make_repo) -> None:
    from git_isopatch.sandbox.bwrap import find_bwrap

    bwrap = find_bwrap()
    assert not isinstance(bwrap, str)
    done = subprocess.run(
        [str(ISOPATCH), "--apparmor-profile"], env=env, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    profile = done.stdout.decode()
    assert f'profile git-isopatch-bwrap "{os.path.realpath(bwrap.path)}" flags=(unconfined) {{'
    assert f'"{os.path.realpath(bwrap.path)}"' in profile
    assert "\n  userns,\n" in profile and profile.startswith("#")
