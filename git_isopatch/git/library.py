"""pygit2, loaded without the TLS set-up that only a network transport needs.

git-isopatch reads local repositories with pygit2 and never fetches or
pushes through it (every transport is git's own, in a subprocess).  Yet
``import pygit2`` readies TLS for a transport, twice: libgit2's start
loads OpenSSL's default certificate file, and ``pygit2.settings`` imports
Python's ``ssl`` (OpenSSL, its enums) to name that file again, which
libgit2 then parses a second time.  Hundreds of certificates parsed twice
and the ``ssl`` module: about 150 M instructions, a third of what the
libraries' import costs, on every run.

So while pygit2 loads, and only then, OpenSSL's ``SSL_CERT_FILE`` names a
file that does not exist (nothing parsed), and the ``ssl`` that
``pygit2.settings`` imports answers ``get_default_verify_paths`` with no
file and a folder of no certificates (a lookup folder is read only when a
certificate is verified).  The caller's environment and ``sys.modules``
are as they were once the import returns, so no child process and no
later ``import ssl`` sees either; a name of ``ssl`` other than those two
is the real module's.  A TLS connection made through this pygit2 would
trust no certificate: it fails closed.
"""

from __future__ import annotations

import os
import sys
import types

#: The certificate file OpenSSL finds while pygit2 loads: none.
NO_CERTIFICATE_FILE = os.path.join(os.path.dirname(__file__), "no-certificates.pem")
#: The certificate folder pygit2 hands libgit2: one holding no certificate.
NO_CERTIFICATE_FOLDER = os.path.dirname(__file__)


class _NoVerifyPaths:
    """What :func:`ssl.get_default_verify_paths` answers while pygit2 loads."""

    cafile = None
    capath = NO_CERTIFICATE_FOLDER


def _real_ssl(name: str) -> object:
    """Any other name of ``ssl``: the real module's (loaded on this first
    need); a module's own attributes (``__path__``, which every ``from ssl
    import`` looks for) it does not have."""
    if name.startswith("__"):
        raise AttributeError(name)
    sys.modules.pop("ssl", None)
    import ssl

    return getattr(ssl, name)


def _without_certificates() -> types.ModuleType:
    ssl = types.ModuleType("ssl")
    ssl.DefaultVerifyPaths = _NoVerifyPaths  # type: ignore[attr-defined]
    ssl.get_default_verify_paths = _NoVerifyPaths  # type: ignore[attr-defined]
    ssl.__getattr__ = _real_ssl  # type: ignore[method-assign]
    return ssl


def load_pygit2() -> types.ModuleType:
    """``pygit2``, imported without reading a certificate when this is its
    first import (later calls return the module loaded)."""
    if "pygit2" in sys.modules:
        return sys.modules["pygit2"]
    saved = os.environ.get("SSL_CERT_FILE")
    stand_in = None if "ssl" in sys.modules else _without_certificates()
    os.environ["SSL_CERT_FILE"] = NO_CERTIFICATE_FILE
    if stand_in is not None:
        sys.modules["ssl"] = stand_in
    try:
        import pygit2
    finally:
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved
        if stand_in is not None and sys.modules.get("ssl") is stand_in:
            del sys.modules["ssl"]
    return pygit2
