"""The call pipeline, transport-free: the registry of app instances and their tools, the
correlation map of calls in flight, admission, the router (validation, guards, deadlines,
audit), the call log, the apps' resources, prompts and completions (``resources``, protocol v2),
their log messages (``applog``); large results passed through raw (``passthrough``) and held as
links (``result_store``); the prepared list pages (``listing``).

Layers inside, one way: ``router`` -> ``registry`` / ``calls`` / ``admission`` -> ``validation``,
``guards``, ``names``. May import: ``broker.config``, ``broker.errors``, ``app_client.protocol``
(the protocol's messages). Never ``broker.daemon``, ``broker.mcp``, ``broker.cli``,
``broker.federation`` (links and front doors reach it through small Protocols).
"""
