"""The broker's exception tree.

Errors here never reach an agent as text: the router turns every outcome into a
:class:`~broker.core.router.CallOutcome` with a short, safe message, and the log keeps the detail.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Root of every error raised by the broker."""


class ConfigError(BrokerError):
    """A setting is invalid; the message names the key and the allowed values."""


class StartupError(BrokerError):
    """The daemon cannot start (port taken, home owned by another daemon, ...)."""


class RegistrationError(BrokerError):
    """An app's registration (or tool update) was refused.

    ``code`` travels to the app in an ``error`` message (see protocol.md).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
