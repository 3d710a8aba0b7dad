"""Sub-commands beyond ``serve`` and ``token``; each module registers itself with the CLI."""

from . import logs_command  # noqa: F401,E402  (toolbridge logs)
from . import client_commands  # noqa: F401,E402  (toolbridge status, tools, call)
from . import stdio_relay  # noqa: F401,E402  (toolbridge stdio)
from . import codegen_command  # noqa: F401,E402  (toolbridge codegen)
