"""Whether bubblewrap can make the sandbox's namespaces here
(:func:`check_available`): one ``bwrap`` run of ``true`` under the
policy every command gets, its answer kept for the runs after
(:mod:`.availability`).

Layering: knows nothing of the command line or of git.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from . import availability
from .availability import file_id
from .bwrap import Bwrap, _first_error, find_bwrap, recalled, unavailable


@functools.cache
def _probe(bwrap: Bwrap, allow_network: bool) -> str | None:
    """Why namespaces cannot be made here (bwrap's own words), or ``None``.

    The program run inside is ``true`` by its absolute path in the
    system's folders (``os.defpath``), which the sandbox shows as they are:
    bwrap looks a bare name up on the caller's ``PATH``, which need not
    hold it, and a missing program must not read as missing namespaces.
    """
    # the launch's machinery, only for a check that starts bwrap (a kept
    # answer needs none of it)
    from .namespaces import NamespacePolicy, bwrap_arguments

    policy = NamespacePolicy(writable=(), allow_network=allow_network)
    inside = [shutil.which("true", path=os.defpath) or "/bin/true"]
    argv = [bwrap.path, *bwrap_arguments(policy, "/nonexistent"), "--", *inside]
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=30, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run '{bwrap.path}': {exc}"
    if done.returncode == 0:
        return None
    return _first_error(done.stderr)


#: What :func:`check_available` says where bubblewrap cannot make them.
NO_NAMESPACES = (
    "bubblewrap cannot make the namespaces here ({}); "
    "unprivileged user namespaces must be allowed (sysctl "
    "user.max_user_namespaces above 0, and where AppArmor restricts them, "
    "kernel.apparmor_restrict_unprivileged_userns=0 or a profile for bwrap)"
)


def check_available(*, allow_network: bool, work_tree: str | None = None) -> Bwrap:
    """The ``bwrap`` that made the namespaces here (kept for later runs: :mod:`.availability`).

    Raises:
        IsopatchError: ``sandbox-unavailable``, naming what is missing.
    """
    check = f"bwrap-{'net' if allow_network else 'nonet'}"
    kept = availability.recall(check, work_tree=work_tree)
    if isinstance(kept, dict) and kept.get("failure"):
        raise unavailable(NO_NAMESPACES.format(kept["failure"]))
    known = recalled(kept)
    if known is not None:
        return known
    found = find_bwrap()
    if isinstance(found, str):
        raise unavailable(found)
    failure = _probe(found, allow_network)
    answer = {"path": found.path, "version": list(found.version), "origin": found.origin}
    answer.update(file=file_id(found.path), failure=failure)
    availability.remember(check, answer, work_tree=work_tree)
    if failure is not None:
        raise unavailable(NO_NAMESPACES.format(failure))
    return found
