"""The daemon process: ``run_daemon`` (listeners, start-up, shutdown), ``BrokerCore`` (what a
connection to the app port is: app, agent or admin), app links, the per-connection line
writer, the Unix socket, the loop-stall watchdog, the garbage-collection policy (``gc_policy``,
installed by ``toolbridge serve``), and ``admin`` (the ``tools`` and ``stop``
admin handlers; ``broker.mcp.front_door.install`` returns ``agents``, which ``run_daemon``
gives the core).

The top of the daemon's layers: may import ``broker.core``, ``broker.mcp``,
``broker.federation``, ``broker.config``, ``broker.errors``, ``app_client.protocol`` (the
protocol's messages and rules: each connection's ``BrokerConnection`` machine) and
``app_client.channel`` (the line channel). Never ``broker.cli`` (the admin handlers it serves
live here).
"""
