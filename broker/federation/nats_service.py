"""This broker as a NATS service (the services API: ``$SRV.PING/INFO/STATS``), with one
endpoint per tool.

Theory of operation
-------------------
nats-py's ``nats.micro`` answers the services API. A broker subscribes two real endpoints: the
calls of all its tools (``toolbridge.call.<NAME>.>``, one wildcard subscription, so a tool
coming or going needs no new subscription) and its tool list by pages
(``toolbridge.list.<NAME>``, see ``nats_catalog``). :class:`ToolService` shows the wildcard
as what it serves: ``$SRV.INFO`` lists one endpoint per tool (subject
``toolbridge.call.<NAME>.<tool>``, metadata: description, title, input and output schema as
JSON strings, within the server's ``max_payload``), and ``$SRV.STATS`` counts each tool's calls
from other brokers. So ``nats micro info toolbridge`` or any services-API client discovers the
tools without knowing toolbridge.

Everything here runs on the NATS client's asyncio thread; it reads the broker's current
:class:`~broker.federation.nats_catalog.Catalog` through a callable (a snapshot that trio
replaces, never changes) and never calls into trio.

Imported only when ``--nats`` is used (nats-py is an optional extra).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from nats.aio.client import Client
from nats.micro.request import Request
from nats.micro.service import EndpointInfo, EndpointStats, Service, ServiceConfig, ServiceInfo, ServiceStats

from .nats_catalog import PREFIX, Catalog, ListRequest, list_request_decoder, list_subject

#: The services-API version of the toolbridge service (its subjects and bodies: protocol.md §14).
SERVICE_VERSION: Final = "1.1.0"
#: The name of the wildcard endpoint that ``$SRV.INFO``/``STATS`` show as one endpoint per tool.
CALL_ENDPOINT: Final = "call"


class ToolService(Service):
    """A ``nats.micro`` service whose INFO and STATS list each tool as an endpoint."""

    def __init__(self, client: Client, config: ServiceConfig, catalog: Callable[[], Catalog]) -> None:
        super().__init__(client, config)
        self._catalog = catalog

    def _budget(self) -> int:
        return int(self._client.max_payload)

    def info(self) -> ServiceInfo:
        info = super().info()
        catalog = self._catalog()
        endpoints, extra = catalog.endpoints(self._budget())
        info.endpoints = [e for e in info.endpoints if e.name != CALL_ENDPOINT] + [
            EndpointInfo(name=e["name"], subject=e["subject"], queue_group=e["queue_group"], metadata=e["metadata"])
            for e in endpoints
        ]
        info.metadata = {**info.metadata, **extra}
        return info

    def stats(self) -> ServiceStats:
        stats = super().stats()
        catalog = self._catalog()
        endpoints, extra = catalog.endpoints(self._budget())
        tools = []
        for entry in endpoints:
            stat = catalog.stats.get(entry["name"])
            if stat is None:
                continue
            requests = stat.num_requests
            tools.append(EndpointStats(
                name=entry["name"], subject=entry["subject"], queue_group=entry["queue_group"],
                num_requests=requests, num_errors=stat.num_errors, last_error=stat.last_error,
                processing_time=stat.processing_time,
                average_processing_time=stat.processing_time // requests if requests else 0))
        stats.endpoints = [e for e in stats.endpoints if e.name != CALL_ENDPOINT] + tools
        stats.metadata = {**stats.metadata, **extra}
        return stats


async def start_tool_service(nc: Client, *, name: str, broker_id: str, catalog: Callable[[], Catalog],
                             on_call: Callable[[Request], Awaitable[None]]) -> ToolService:
    """Start the service of broker ``name`` (on the asyncio thread): ``$SRV`` verbs, calls, list."""

    async def on_list(request: Request) -> None:
        current = catalog()
        try:
            asked = list_request_decoder.decode(request.data) if request.data else ListRequest()
        except Exception:  # a bad body asks for the first page
            asked = ListRequest()
        await request.respond(current.page(asked.page, int(nc.max_payload)))

    service = ToolService(nc, ServiceConfig(
        name=PREFIX, version=SERVICE_VERSION, description=f"toolbridge broker {name}",
        metadata={"broker": name, "broker_id": broker_id}), catalog)
    await service.start()
    await service.add_endpoint(name=CALL_ENDPOINT, subject=f"{PREFIX}.call.{name}.>", handler=on_call)
    await service.add_endpoint(name="list", subject=list_subject(name), handler=on_list,
                               metadata={"description": "this broker's tools, a page per request: "
                                                        'body {"page": N}; protocol.md §14'})
    return service
