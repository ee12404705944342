"""Why the kernel refuses the sandbox's namespaces here, and the one step
that would allow them (:func:`explained`), for the ``warning:`` of the
default's fallback and the ``fatal:`` of ``--sandbox``.

What is read: the sysctls that turn user namespaces off (upstream's
``user.max_user_namespaces``, Debian's ``kernel.unprivileged_userns_clone``,
Ubuntu's AppArmor restriction since 23.10,
``kernel.apparmor_restrict_unprivileged_userns``, which does not hold for
a process with ``CAP_SYS_ADMIN``), this process's seccomp filter (a
container's default profile refuses namespaces), a container's marks, and
:data:`SANDBOX_VARIABLE`, which the sandbox sets for its command: a run
inside another run's sandbox cannot make namespaces of its own (bubblewrap
says "No space left on device").  Only on the failure path.

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import IsopatchError
from ..git.record import Record

#: Set to ``1`` in a sandboxed command's environment.
SANDBOX_VARIABLE = "GIT_ISOPATCH_SANDBOX"

#: Where the AppArmor profile of :func:`apparmor_profile` goes.
PROFILE_FILE = "/etc/apparmor.d/git-isopatch-bwrap"

#: The one step where AppArmor restricts user namespaces.
APPARMOR_STEP = (
    "allow bubblewrap with an AppArmor profile: git isopatch --apparmor-profile | "
    f"sudo tee {PROFILE_FILE} >/dev/null && sudo apparmor_parser -r {PROFILE_FILE}"
)

#: The one step in a container that refuses namespaces.
CONTAINER_STEP = (
    "start the container with --security-opt seccomp=unconfined "
    "--security-opt apparmor=unconfined (docker, podman)"
)

_CAP_SYS_ADMIN = 21


class Refusal(Record):
    """What refuses the namespaces here, and what would allow them."""

    cause: str
    step: str


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).decode("ascii", "replace").strip()
    except OSError:
        return None


def _status(field: str) -> str | None:
    for line in (_read("/proc/self/status") or "").splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return value.strip()
    return None


def _privileged() -> bool:
    """This process holds ``CAP_SYS_ADMIN`` (AppArmor's restriction then
    does not hold)."""
    try:
        return bool(int(_status("CapEff") or "0", 16) >> _CAP_SYS_ADMIN & 1)
    except ValueError:
        return False


def _in_a_container(environ: Mapping[str, str]) -> bool:
    marks = ("/.dockerenv", "/run/.containerenv")
    return "container" in environ or any(os.path.exists(mark) for mark in marks)


def diagnose(failure: str, environ: Mapping[str, str] | None = None) -> Refusal | None:
    """What refuses the namespaces here (``failure``: bubblewrap's or the
    kernel's words), or ``None`` when nothing read says."""
    environ = os.environ if environ is None else environ
    if environ.get(SANDBOX_VARIABLE) == "1":
        return Refusal(
            "this run is inside another git-isopatch run's sandbox, which lets no "
            "namespaces be made within it",
            "its command runs in that run's sandbox",
        )
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return Refusal(
            "user namespaces are turned off (user.max_user_namespaces=0)",
            "allow them: sudo sysctl -w user.max_user_namespaces=65536",
        )
    unprivileged = not _privileged()
    if unprivileged and _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return Refusal(
            "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone=0)",
            "allow them: sudo sysctl -w kernel.unprivileged_userns_clone=1",
        )
    if unprivileged and _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return Refusal(
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns=1)",
            APPARMOR_STEP,
        )
    if _status("Seccomp") == "2":
        return Refusal(
            "a seccomp filter of this process refuses them (as a container's default does)",
            CONTAINER_STEP,
        )
    initial = (_read("/proc/self/uid_map") or "").split() == ["0", "0", "4294967295"]
    if "No space left on device" in failure and not initial:
        return Refusal(
            "this run is inside a sandbox that lets no user namespaces be made within it",
            "run it outside that sandbox",
        )
    if _in_a_container(environ):
        return Refusal("the container refuses them", CONTAINER_STEP)
    return None


def explained(failure: IsopatchError) -> IsopatchError:
    """``failure`` (``sandbox-unavailable`` where namespaces could not be
    made) with the cause :func:`diagnose` finds and its step added."""
    found = diagnose(failure.message)
    if found is None:
        return failure
    message = f"{failure.message}: {found.cause}; {found.step}"
    return IsopatchError(failure.code, message, hint=failure.hint)


def apparmor_profile(bwrap: str) -> str:
    """The AppArmor profile that lets the bubblewrap at ``bwrap`` make
    user namespaces where AppArmor restricts them (the form Ubuntu's own
    profiles for such programs take)."""
    path = os.path.realpath(bwrap).replace("\\", "\\\\").replace('"', '\\"')
    return f"""\
# Lets git-isopatch's bubblewrap make the sandbox's user namespaces where
# AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns=1).
#   git isopatch --apparmor-profile | sudo tee {PROFILE_FILE}
#   sudo apparmor_parser -r {PROFILE_FILE}
# It names the file by its path: any program that can replace that file
# gets user namespaces through it.
abi <abi/4.0>,
include <tunables/global>

profile git-isopatch-bwrap "{path}" flags=(unconfined) {{
  userns,

  # Site-specific additions and overrides. See local/README for details.
  include if exists <local/git-isopatch-bwrap>
}}
"""
