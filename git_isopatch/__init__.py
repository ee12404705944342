"""git-isopatch: run a command in an ephemeral git worktree and capture what
it changed as a binary-safe patch.

The Python API is :func:`capture` (``git_isopatch.capture(command, ...)``,
whose keyword arguments are the fields of :class:`CaptureRequest`) and
:func:`run` (``git_isopatch.run(CaptureRequest(...))``), returning a
:class:`CaptureResult`; expected failures raise
:class:`IsopatchError`.  The command line is ``git isopatch``.

Nothing heavy is imported here: pygit2 loads on first use of :func:`capture`,
so that ``git isopatch -h`` and ``--version`` start fast (issue: speed).
Not even ``typing``: the executable imports this package before its entry
point (:mod:`.entry`) can take over Ctrl-C, so this costs next to nothing.
"""

from __future__ import annotations

import sys
import types

__version__ = "0.1.0"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .capture import capture, run
    from .errors import IsopatchError
    from .request import CaptureRequest
    from .result import CaptureResult

__all__ = ["CaptureRequest", "CaptureResult", "IsopatchError", "__version__", "capture", "run"]

_LAZY = {
    "capture": "git_isopatch.capture",
    "run": "git_isopatch.capture",
    "CaptureRequest": "git_isopatch.request",
    "CaptureResult": "git_isopatch.result",
    "IsopatchError": "git_isopatch.errors",
}


class _Package(types.ModuleType):
    """The package module.  The submodule ``capture.py`` and the function
    ``capture`` share a name; importing the submodule would make the package
    attribute the module, so the attribute is pinned to the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "capture" and isinstance(value, types.ModuleType):
            value = value.capture
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'git_isopatch' has no attribute {name!r}")
