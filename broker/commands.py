"""Sub-commands beyond ``serve`` and ``token``; each module registers itself with the CLI."""

from . import logs_command  # noqa: F401,E402  (toolbridge logs)
