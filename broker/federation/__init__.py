"""Federation: this daemon's broker id, the hop chains and loop/depth checks applied at
registration (``rules``), and the uplink that appears in a parent broker as one app
(``uplink``, an ``app_client.App``).

May import: ``broker.core``, ``broker.config``, ``broker.errors``, ``app_client``. Never
``broker.daemon``, ``broker.mcp``, ``broker.cli``.
"""
