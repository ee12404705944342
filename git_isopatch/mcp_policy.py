"""What the MCP server's tool calls may ask for (design: Command line,
"Subcommands"): the operator decides when the server starts, not the
agent that calls its tools.

A call runs in the sandbox with the network kept from it and its writes
outside the worktree discarded, unless the server was started with the
option that lets calls loosen that (``--allow-unconfined`` for ``sandbox:
false``, ``--allow-network`` for ``allow_network``, ``--allow-write <path>``
for an ``allow_write`` path under that path); a call that asks for more is
a tool error naming the option.  The repositories a call may name are those
under the folder the server was started in (``-C <path>``, else where it
runs), or under the client's MCP roots when it sends them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse


class Refused(Exception):
    """A call asked for what the server does not allow: the text says
    what, and which option of ``git isopatch mcp`` would allow it."""


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class ServerPolicy:
    """What the server lets calls loosen, fixed when it starts.

    Attributes:
        folder: the folder the server was started in (a real path): a
            call without ``repo`` works there, and one with ``repo`` may
            name only a folder inside it (or inside a root of the client).
        unconfined: ``--allow-unconfined``: a call may ask ``sandbox: false``.
        network: ``--allow-network``: a call may ask ``allow_network``.
        writable: ``--allow-write`` paths (real paths): a call's
            ``allow_write`` path must be one of them or inside one.
    """

    folder: str
    unconfined: bool = False
    network: bool = False
    writable: tuple[str, ...] = ()

    @classmethod
    def started(
        cls,
        folder: str,
        *,
        unconfined: bool = False,
        network: bool = False,
        writable: Iterable[str] = (),
    ) -> ServerPolicy:
        """The policy of a server started in ``folder`` with these options."""
        real = tuple(os.path.realpath(path) for path in writable)
        return cls(os.path.realpath(folder), unconfined, network, real)

    def repository(self, repo: str | None, roots: Sequence[str] = ()) -> str:
        """The folder a call with ``repo`` works in: ``repo`` taken from the
        server's folder (the server's folder itself without one).

        Raises:
            Refused: it leads outside the server's folder and the client's
                ``roots``.
        """
        path = os.path.join(self.folder, repo) if repo else self.folder
        real = os.path.realpath(path)
        if any(_inside(real, os.path.realpath(f)) for f in (self.folder, *roots)):
            return path
        raise Refused(
            f"repo '{repo}' is outside the folders this server works in ('{self.folder}'"
            + "".join(f", '{root}'" for root in roots)
            + "): start it there (git isopatch mcp -C <path>), or send that folder "
            "as one of the client's MCP roots"
        )

    def told(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with its network hint, which names the command line's
        options, told in the terms of this server's calls: ``allow_network``
        and ``sandbox: false`` where the server lets a call ask them, the
        option of ``git isopatch mcp`` that would where it does not."""
        from .hints import NETWORK_HINT, NETWORK_REFUSED

        hints = result.get("hint")
        if not isinstance(hints, list) or NETWORK_HINT not in hints:
            return result
        network = (
            "a call with allow_network keeps the network"
            if self.network
            else "this server keeps the network from every call "
            "(started with 'git isopatch mcp --allow-network', a call may ask allow_network)"
        )
        unconfined = ", one with sandbox false runs it unconfined" if self.unconfined else ""
        told = f"{NETWORK_REFUSED}; {network}{unconfined}"
        return {**result, "hint": [told if h == NETWORK_HINT else h for h in hints]}

    def check(
        self,
        where: str,
        *,
        sandbox: bool | None,
        allow_network: bool,
        allow_write: Sequence[str],
    ) -> None:
        """Refuse what the call in ``where`` asks beyond the policy.

        Raises:
            Refused: ``sandbox`` false without ``--allow-unconfined``,
                ``allow_network`` without ``--allow-network``, or an
                ``allow_write`` path (taken from ``where``) under no
                ``--allow-write`` path.
        """
        if sandbox is False and not self.unconfined:
            raise Refused(
                "sandbox false: this server runs commands in the sandbox only; "
                "start it with 'git isopatch mcp --allow-unconfined' to allow unconfined runs"
            )
        if allow_network and not self.network:
            raise Refused(
                "allow_network: this server keeps the network from commands; "
                "start it with 'git isopatch mcp --allow-network' to allow it"
            )
        for path in allow_write:
            real = os.path.realpath(os.path.join(where, path))
            if not any(_inside(real, allowed) for allowed in self.writable):
                raise Refused(
                    f"allow_write '{path}': not under a path this server lets commands "
                    "write; start it with 'git isopatch mcp --allow-write <path>' to allow it"
                )


def root_folders(uris: Iterable[str]) -> list[str]:
    """The folders of the client's MCP roots (``file://`` URIs; others are
    left out)."""
    folders = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
            folders.append(unquote(parsed.path))
    return folders
