"""Sub-commands beyond ``serve`` and ``token``; each module registers itself with the CLI."""
