"""One exception tree per package (issue 15 e): every exception class has its package's root.

``broker`` (the daemon) raises :class:`broker.errors.BrokerError`s, ``broker.agent`` (the agent
library) :class:`broker.agent.AgentError`s, ``app_client`` :class:`app_client.ToolbridgeError`s,
so a caller can catch one package's errors, and nothing else, with one ``except``. The classes
are found by importing every module of each package and looking at the classes it defines, so
a new exception class with the wrong base fails here without anyone listing it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import app_client
import app_client.errors
import broker
import broker.agent
import broker.errors

#: Exception classes deliberately left outside their package's tree, with the reason. An entry
#: that is gone or already conforms fails the test, so this list only shrinks.
ALLOWED_STRAYS: dict[str, str] = {}  # none: every exception class is under its package's root


def _modules(package: ModuleType) -> list[ModuleType]:
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the CLI when imported
            continue
        found.append(importlib.import_module(info.name))
    return found


def _exception_classes(package: ModuleType) -> dict[str, type[BaseException]]:
    """``module.Class`` -> class, for every exception class defined in a module of ``package``."""
    classes: dict[str, type[BaseException]] = {}
    for module in _modules(package):
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and value.__qualname__ == name  # not an alias (ToolError = ToolCallError)
            ):
                classes[f"{module.__name__}.{name}"] = value
    return classes


def _in(name: str, package: str) -> bool:
    return name.startswith(package + ".")


def _root_of(name: str) -> type[BaseException]:
    if _in(name, "broker.agent"):
        return broker.agent.AgentError
    return broker.errors.BrokerError if _in(name, "broker") else app_client.errors.ToolbridgeError


BROKER = {name: cls for name, cls in _exception_classes(broker).items() if not _in(name, "broker.agent")}
AGENT = _exception_classes(broker.agent)
APP = _exception_classes(app_client)


@pytest.mark.parametrize(
    ("classes", "root"),
    [(BROKER, broker.errors.BrokerError), (AGENT, broker.agent.AgentError), (APP, app_client.errors.ToolbridgeError)],
    ids=["broker", "broker.agent", "app_client"],
)
def test_every_exception_class_has_its_package_root(classes: dict[str, type[BaseException]], root: type) -> None:
    strays = sorted(name for name, cls in classes.items() if not issubclass(cls, root) and name not in ALLOWED_STRAYS)
    assert not strays, f"derive these from {root.__module__}.{root.__name__}: {strays}"


def test_the_walk_finds_the_classes() -> None:
    # Guards the discovery itself: a walk that found nothing would pass the test above.
    assert {"broker.core.admission.Busy", "broker.mcp.http._Reply", "broker.config.tokens.TokenError"} <= set(BROKER)
    assert {"broker.agent._errors.AgentError", "broker.agent._errors.ToolCallError"} <= set(AGENT)
    assert "broker.agent._errors.ToolError" not in AGENT  # the alias is not a second class
    assert {"app_client.errors.InvalidArguments", "app_client.protocol._errors.ConnectionClosed"} <= set(APP)
    assert len(BROKER) + len(AGENT) + len(APP) >= 37  # the 38 of issue 15's count, less PeerClosed (now the channel's)


def test_no_exception_class_is_in_two_trees() -> None:
    roots = (broker.errors.BrokerError, broker.agent.AgentError, app_client.errors.ToolbridgeError)
    for cls in {**BROKER, **AGENT, **APP}.values():
        assert sum(issubclass(cls, root) for root in roots) <= 1, cls


def test_allowed_strays_are_still_strays() -> None:
    everything = {**BROKER, **AGENT, **APP}
    for name in ALLOWED_STRAYS:
        assert name in everything, f"{name} is gone: delete it from ALLOWED_STRAYS"
        assert not issubclass(everything[name], _root_of(name)), f"{name} conforms now: delete it from ALLOWED_STRAYS"
