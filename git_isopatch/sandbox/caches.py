"""Where tools keep their caches and logs, and the temporary folders: the
places outside its worktree that a command in the sandbox writes for its
own sake on every run (black's and pre-commit's caches under the XDG cache
folder, npm's ``_logs`` and ``_cacache``, cargo's registry and locks, pip's
cache, ``/tmp``).  Such writes land in a copy-on-write layer and are
discarded like any other, but they say nothing about the command: the
summary of a run counts them as a tool's own (:func:`place`), never as a
warning.

Each folder follows the variable its tool reads first, as the tool does
(``XDG_CACHE_HOME``, ``npm_config_cache``, ``CARGO_HOME``,
``PIP_CACHE_DIR``, ``PRE_COMMIT_HOME``, ``GOMODCACHE``...).

Layering: stdlib only; knows nothing of the command line or of git.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping

#: What cargo keeps under ``CARGO_HOME`` for itself (the Cargo Book,
#: "Cargo Home"): downloaded crates and git checkouts, and the files it
#: locks them with.
CARGO_CACHES = ("registry", "git", ".package-cache", ".package-cache-mutate", ".global-cache")


def _absolute(path: str | None) -> str | None:
    return os.path.normpath(path) if path and os.path.isabs(path) else None


def _home(environ: Mapping[str, str]) -> str | None:
    home = _absolute(environ.get("HOME"))
    return home if home != "/" else None


def _under_home(environ: Mapping[str, str], *parts: str) -> str | None:
    home = _home(environ)
    return posixpath.join(home, *parts) if home else None


def cache_folders(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The user's cache and log folders, as absolute paths, each with the
    folder a person knows it by (cargo's under ``CARGO_HOME``); those whose
    variable or ``HOME`` is unset or relative are left out."""
    found = [
        environ.get("XDG_CACHE_HOME") or _under_home(environ, ".cache"),
        # npm: _cacache, _logs, _npx, _update-notifier-last-checked
        environ.get("npm_config_cache") or _under_home(environ, ".npm"),
        environ.get("PIP_CACHE_DIR"),
        environ.get("PRE_COMMIT_HOME"),
        environ.get("GOMODCACHE") or _under_home(environ, "go", "pkg", "mod"),
        environ.get("YARN_CACHE_FOLDER") or _under_home(environ, ".yarn", "berry", "cache"),
        _under_home(environ, ".m2", "repository"),
        _under_home(environ, ".gradle", "caches"),
    ]
    pairs = [(p, p) for p in map(_absolute, found) if p]
    cargo = _absolute(environ.get("CARGO_HOME") or _under_home(environ, ".cargo"))
    if cargo:
        pairs += [(posixpath.join(cargo, name), cargo) for name in CARGO_CACHES]
    return tuple(pairs)


#: What of cargo's own (:data:`CARGO_CACHES`) is a folder the cache layer
#: keeps (:func:`kept_cache_folders`); the rest are the locks of them.
CARGO_KEPT = ("registry", "git")


def kept_cache_folders(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The cache folders whose writes the cache layer keeps for the later
    sandboxed runs of a repository (:mod:`.cache_layer`): the XDG cache
    folder (black, pip, pre-commit by default), npm's, ``PIP_CACHE_DIR``,
    ``PRE_COMMIT_HOME`` and cargo's registry and git checkouts, as
    absolute paths (each may not exist)."""
    found = [
        environ.get("XDG_CACHE_HOME") or _under_home(environ, ".cache"),
        environ.get("npm_config_cache") or _under_home(environ, ".npm"),
        environ.get("PIP_CACHE_DIR"),
        environ.get("PRE_COMMIT_HOME"),
    ]
    cargo = _absolute(environ.get("CARGO_HOME") or _under_home(environ, ".cargo"))
    if cargo:
        found += [posixpath.join(cargo, name) for name in CARGO_KEPT]
    return tuple(dict.fromkeys(p for p in map(_absolute, found) if p))


def temporary_folders(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The shared temporary folders and the user's ``TMPDIR``."""
    tmpdir = _absolute(environ.get("TMPDIR"))
    return ("/tmp", "/var/tmp", *([tmpdir] if tmpdir else []))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _child(folder: str, path: str) -> str:
    """The entry of ``folder`` that holds ``path`` (a path inside it)."""
    return posixpath.join(folder, path[len(folder) :].lstrip("/").split("/")[0])


def place(path: str, environ: Mapping[str, str], top: str) -> tuple[str, bool]:
    """Where ``path`` (absolute, outside the worktree) lies, for a person,
    and whether a tool writes there for its own sake.

    The folder is the innermost of: a cache or temporary folder
    (:func:`cache_folders`, :func:`temporary_folders`; in the XDG cache
    folder, the tool's own: ``~/.cache/black``), the checkout (``top``),
    the entry of ``HOME`` that holds it (``~/.config``), else the first
    folder of the path; ``~`` stands for ``HOME``.  A tool's own
    (``True``) when that folder is a cache or temporary one that does not
    hold the checkout (for a checkout under ``/tmp``, a write beside it or
    into it is never a tool's own), or when ``path`` is a folder below
    ``HOME`` made on the way to a cache (``~/.cargo`` for its registry).
    """
    home = _home(environ)
    caches = cache_folders(environ)
    xdg = _absolute(environ.get("XDG_CACHE_HOME") or _under_home(environ, ".cache"))
    own = [*caches, *((t, t) for t in temporary_folders(environ))]
    candidates = [(f, shown, not _inside(top, f)) for f, shown in own if _inside(path, f)]
    if _inside(path, top):
        candidates.append((top, top, False))
    if home and _inside(path, home) and path != home:
        on_the_way = any(_inside(f, path) and not _inside(top, f) for f, _ in caches)
        candidates.append((_child(home, path), _child(home, path), on_the_way))
    # the innermost; on a tie the first, a cache before HOME's entry
    folder, shown, tool_own = max(candidates, key=lambda c: len(c[0]), default=("", "", False))
    if not folder:
        shown = "/" + path.lstrip("/").split("/")[0]
    elif folder == xdg and path != folder:
        shown = _child(folder, path)
    return _tilde(shown, home), tool_own


def _tilde(path: str, home: str | None) -> str:
    return "~" + path[len(home) :] if home and _inside(path, home) else path


def places(
    paths: tuple[str, ...], environ: Mapping[str, str], top: str
) -> tuple[tuple[str, int, bool], ...]:
    """``paths`` by where they lie (:func:`place`): each folder, how many,
    whether all are a tool's own.  Those in the checkout are named by the
    innermost folder that holds them all (``node_modules/.cache``, written
    through a ``--link``), not by the checkout's top."""
    groups: dict[str, list] = {}
    for path in paths:
        folder, tool_own = place(path, environ, top)
        group = groups.setdefault(folder, [[], True])
        group[0].append(path)
        group[1] = group[1] and tool_own
    checkout = place(top, environ, top)[0]
    if checkout in groups:
        inside = groups[checkout][0]
        common = posixpath.commonpath(inside) if len(inside) > 1 else posixpath.dirname(inside[0])
        named = _tilde(common if _inside(common, top) else top, _home(environ))
        groups = {named if f == checkout else f: group for f, group in groups.items()}
    return tuple((folder, len(inside), tool_own) for folder, (inside, tool_own) in groups.items())
