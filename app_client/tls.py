"""TLS for the link to the daemon: the client side's SSL context.

Theory of operation
-------------------
A daemon reachable from other machines or containers serves its app port over TLS
(``toolbridge serve --tls-cert ... --tls-key ...``). A client verifies it like any TLS
server: the certificate must chain to a CA it trusts — a CA file (``tls_ca``, or the
``TOOLBRIDGE_TLS_CA`` environment variable), which may also hold the server's own
(self-signed) certificate, or, without one, the system's trust store — and must name the
host the client connects to.

A client on the daemon's own machine may instead *pin* the daemon's certificate: the daemon
names its certificate file in ``runtime.json`` (``tlsCert``), and :func:`client_context`
with ``pinned_cert`` trusts exactly the certificates in that file (OpenSSL's partial-chain
mode makes the leaf itself a trust anchor). The host name is then not checked: the pinned
certificate, whose key only the daemon holds, is what proves the peer.
"""

from __future__ import annotations

import os
import ssl

__all__ = ["client_context"]


def client_context(
    ca: str | os.PathLike[str] | None = None,
    *,
    pinned_cert: str | os.PathLike[str] | None = None,
) -> ssl.SSLContext:
    """An SSL context for connecting to a daemon (see the module docstring).

    ``ca``: a PEM file of CA certificates to trust instead of the system's (the server's own
    certificate, e.g. a self-signed one, works too; its host names are checked). ``pinned_cert``:
    trust exactly the certificates in this PEM file, whatever host name they carry. Raises
    OSError or ssl.SSLError if a file cannot be read or holds no certificate.
    """
    if pinned_cert is not None:
        context = ssl.create_default_context(cafile=os.fspath(pinned_cert))
        context.check_hostname = False
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        return context
    if ca is None:
        return ssl.create_default_context()
    context = ssl.create_default_context(cafile=os.fspath(ca))
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the server's own certificate may be given
    return context
