"""The ``git_isopatch`` logger (the warnings of a run, and the notes of a
clean-up that could not finish), made on its first use: :data:`log` stands
for ``logging.getLogger("git_isopatch")``, and :func:`warning` is a run's
default way to warn.

``logging`` costs a run some 10 M instructions (2-3 ms) to import, and a
run that has nothing to warn of never needs it.  What shows the messages
(:func:`configure_logging`: one ``warning:`` line each, as git prints
them) is named with :meth:`LazyLogger.on_first_use` and set up as the
logger is made (:func:`configure_logging_on_first_use`).

Layering: beside ``errors``; of the package, only :mod:`.git.quote`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable
    from typing import Any, TextIO

#: The logger's name: every message of the package goes to it.
NAME = "git_isopatch"


class LazyLogger:
    """``logging.getLogger(NAME)``, made when an attribute of it is first
    asked for (``log.warning(...)``, ``log.debug(...)``)."""

    def __init__(self) -> None:
        self._logger: logging.Logger | None = None
        self._configure: Callable[[], object] | None = None

    def on_first_use(self, configure: Callable[[], object]) -> None:
        """Call ``configure`` as the logger is made (now, if it is made)."""
        if self._logger is None:
            self._configure = configure
        else:
            configure()

    def __getattr__(self, name: str) -> Any:
        logger = self._logger
        if logger is None:
            import logging

            logger = self._logger = logging.getLogger(NAME)
            configure, self._configure = self._configure, None
            if configure is not None:
                configure()
        return getattr(logger, name)


log = LazyLogger()


def warning(message: str) -> None:
    """Warn of ``message`` (one ``warning:`` line, once the command line
    has set up the logger): the default ``warn`` of a run."""
    log.warning(message)


def configure_logging_on_first_use() -> None:
    """:func:`configure_logging` (to stderr) once the logger is first used:
    a run with nothing to warn of never imports ``logging``."""
    log.on_first_use(configure_logging)


def configure_logging(stream: TextIO | None = None) -> logging.Handler:
    """Send the ``git_isopatch`` logger's warnings and errors to ``stream``
    (default: stderr) as one ``warning: ...`` / ``error: ...`` line each, as
    git prints them; without this, Python would print them bare.  Returns
    the handler."""
    import logging

    from .git.quote import terminal_safe

    class GitStyleFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            prefix = "error" if record.levelno >= logging.ERROR else "warning"
            return terminal_safe(f"{prefix}: {record.getMessage()}")

    logger = logging.getLogger(NAME)
    for old in [h for h in logger.handlers if getattr(h, "git_style", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(GitStyleFormatter())
    handler.setLevel(logging.WARNING)
    handler.git_style = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
    return handler
