"""Configuration and the home directory: settings (file, environment, flags), the home's files
and lock, named tokens, TLS contexts, logging set-up, ``net`` (loopback and port helpers) and
``web_login`` (the status page's one-time login tickets, minted by the CLI, redeemed by the daemon).

May import: ``broker.errors``, ``broker.discovery`` (the re-rank setting's check),
``app_client.discovery`` / ``app_client.transport`` / ``app_client.tls`` (one definition of the
home's file names for apps and daemon). Nothing else of ``broker``: every other package may
import this one.
"""
