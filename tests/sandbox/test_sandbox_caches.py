"""Which discarded writes outside the worktree are a tool's own (its
caches, its logs, temporary files) and which folder names them for a
person (issue 34, "Quiet by default"): the table the summary line rests
on (:func:`git_isopatch.sandbox.caches.place`).  The real tools (black,
npm, pre-commit, cargo) are in ``test_sandbox_real_tools_*.py``."""

from __future__ import annotations

import pytest

from git_isopatch.sandbox.caches import place

HOME = "/home/me"
TOP = "/home/me/src/app"
ENV = {"HOME": HOME, "TMPDIR": "/run/user/1000/tmp"}


@pytest.mark.parametrize(
    "path, environ, top, shown, own",
    [
        ("/home/me/.cache/black/24.1/cache.pickle", ENV, TOP, "~/.cache/black", True),
        ("/home/me/.cache/pre-commit/db.db", ENV, TOP, "~/.cache/pre-commit", True),
        ("/home/me/.cache", ENV, TOP, "~/.cache", True),
        ("/x/cache/black/a", {**ENV, "XDG_CACHE_HOME": "/x/cache"}, TOP, "/x/cache/black", True),
        ("/home/me/.npm/_logs/2026-debug-0.log", ENV, TOP, "~/.npm", True),
        ("/n/_cacache/x", {**ENV, "npm_config_cache": "/n"}, TOP, "/n", True),
        ("/home/me/.cargo/registry/index/x", ENV, TOP, "~/.cargo", True),
        ("/home/me/.cargo/.package-cache", ENV, TOP, "~/.cargo", True),
        ("/home/me/.cargo", ENV, TOP, "~/.cargo", True),  # made on the way
        ("/home/me/.cargo/bin/cargo", ENV, TOP, "~/.cargo", False),  # a program
        ("/c/registry/x", {**ENV, "CARGO_HOME": "/c"}, TOP, "/c", True),
        ("/p/http/x", {**ENV, "PIP_CACHE_DIR": "/p"}, TOP, "/p", True),
        ("/home/me/.cache/pip/http/x", ENV, TOP, "~/.cache/pip", True),
        ("/tmp/tool-123/x", ENV, TOP, "/tmp", True),
        ("/var/tmp/x", ENV, TOP, "/var/tmp", True),
        ("/run/user/1000/tmp/x", ENV, TOP, "/run/user/1000/tmp", True),
        # what is never a tool's own
        ("/home/me/src/app/README", ENV, TOP, "~/src/app", False),
        ("/home/me/src/other/x", ENV, TOP, "~/src", False),
        ("/home/me/.bashrc", ENV, TOP, "~/.bashrc", False),
        ("/home/me/.config/x/y", ENV, TOP, "~/.config", False),
        ("/home/me", ENV, TOP, "/home", False),
        ("/etc/passwd", ENV, TOP, "/etc", False),
        # a checkout under /tmp: a write into it or beside it is not a tool's
        ("/tmp/t/app/README", ENV, "/tmp/t/app", "/tmp/t/app", False),
        ("/tmp/t/sibling", ENV, "/tmp/t/app", "/tmp", False),
        ("/home/me/.cache/black/x", {"TMPDIR": "/t"}, TOP, "/home", False),  # no HOME
    ],
)
def test_place(path, environ, top, shown, own) -> None:
    assert place(path, environ, top) == (shown, own)
