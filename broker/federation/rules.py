"""Federation rules: broker ids, hop chains, and the checks that keep uplinks loop-free and shallow.

Theory of operation
-------------------
Every daemon has a stable random id, kept in ``<home>/broker-id``. A broker that uplinks into
another (``broker.federation.uplink``) registers there as one app, and says so with ``via`` — on the
``register`` (its own id first, then the ids of the brokers below it whose tools it carries)
and on every tool (the path the tool came by: the registering broker first, the broker of
the app that owns it last). The parent answers with ``chain`` in ``registered``: its own id,
then the ids of the brokers it is itself uplinked into, nearest first.

The parent refuses (:func:`check_register`, :func:`check_tools`):

* a loop — a ``via`` that names this broker or one it is uplinked into (``loop_detected``);
* too deep — a tool whose ``via`` is longer than :data:`MAX_HOPS` (``too_many_hops``): a call
  crosses at most that many uplinks below the broker the agent talks to.

The child refuses a parent whose ``chain`` names itself or a broker below it, and leaves
out tools the parent would refuse. Registration-time checks catch a loop as it is set up;
because every tool is also checked at every hop with the path it really took, no tool can
go round a loop even when two brokers uplink into each other at the same moment.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import attrs

from app_client.protocol import Register, ToolSpec

from ..errors import RegistrationError, StartupError

BROKER_ID_FILE: Final = "broker-id"
#: Uplinks a call may cross below the broker the agent talks to.
MAX_HOPS: Final = 4
#: Broker ids a register's ``via`` may list (the brokers below an uplink).
MAX_VIA: Final = 256
_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def load_or_create_broker_id(home: Path) -> str:
    """This daemon's stable id (created on first start). Raises StartupError if unusable."""
    from ..config.home import _write_private

    path = home / BROKER_ID_FILE
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise StartupError(f"cannot read {path}: {exc.strerror}") from None
    if text:
        if not _ID.match(text):
            raise StartupError(f"{path} does not hold a valid broker id; delete it to make a new one")
        return text
    broker_id = secrets.token_hex(8)
    _write_private(path, broker_id + "\n")
    return broker_id


@attrs.define
class FederationState:
    """Where this broker stands among brokers: what the checks below need, and all they need.

    The daemon holds one (``BrokerCore.federation``); its links check registrations against it
    and its uplink keeps ``upstream`` current (:meth:`set_upstream`).
    """

    #: This daemon's id ("" until start-up has read it, or in a core built by a test).
    broker_id: str = ""
    #: The ids of the brokers this one is uplinked into, nearest first, while connected.
    upstream: tuple[str, ...] = ()

    def own_chain(self) -> list[str]:
        """This broker's id, then the ids of the brokers it is uplinked into."""
        return [i for i in (self.broker_id, *self.upstream) if i]

    def set_upstream(self, chain: Iterable[str]) -> None:
        """The uplink's parent chain (empty when the uplink is down)."""
        self.upstream = tuple(chain)


def own_chain(state: FederationState) -> list[str]:
    """This broker's id, then the ids of the brokers it is uplinked into."""
    return state.own_chain()


def _check_ids(ids: list[str], what: str) -> None:
    for broker_id in ids:
        if not isinstance(broker_id, str) or not _ID.match(broker_id):
            raise RegistrationError("invalid_register", f"{what}: {broker_id!r} is not a broker id")


def _loop(state: FederationState, via: Iterable[str], what: str) -> RegistrationError | None:
    mine = state.own_chain()
    hit = next((i for i in via if i in mine), None)
    if hit is None:
        return None
    whose = "this broker" if hit == state.broker_id else f"the broker {hit}, which this one is uplinked into"
    return RegistrationError(
        "loop_detected", f"{what} would make a loop: it comes through {whose}; uplinks must form a tree"
    )


def check_register(state: FederationState, register: Register) -> None:
    """Refuse a register whose ``via`` (if any) is malformed or makes a loop. RegistrationError."""
    if register.via is not None:
        if not register.via or len(register.via) > MAX_VIA:
            raise RegistrationError("invalid_register", f"via must list 1 to {MAX_VIA} broker ids")
        _check_ids(register.via, "via")
        error = _loop(state, register.via, f"the uplink {register.app_name!r}")
        if error is not None:
            raise error
    check_tools(state, register.tools)


def check_tools(state: FederationState, tools: Iterable[ToolSpec]) -> None:
    """Refuse tools whose ``via`` is malformed, too long or makes a loop. RegistrationError."""
    for spec in tools:
        if spec.via is None:
            continue
        _check_ids(spec.via, f"tool {spec.name!r}: via")
        if len(spec.via) > MAX_HOPS:
            raise RegistrationError(
                "too_many_hops",
                f"tool {spec.name!r} comes through {len(spec.via)} uplinks; at most {MAX_HOPS} are allowed",
            )
        error = _loop(state, spec.via, f"tool {spec.name!r}")
        if error is not None:
            raise error
