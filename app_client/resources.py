"""Resources an app offers (wire protocol v2): their declarations and how a read runs.

Theory of operation
-------------------
``@app.resource(uri)`` and ``@app.resource_template(uri_template)`` make a
:class:`ResourceDefinition`: the :class:`~app_client.protocol.ResourceSpec` (or template spec)
the app registers, and the handler that reads it. A handler may be sync (run in a worker
thread, under the app's concurrency limiter, so a slow read never stalls the connection; on
the GUI thread instead when the app has a ``gui_executor``, as sync tools do) or async (run
in the session's nursery). A plain resource's handler takes no arguments; a
template's takes the template's variables as keyword arguments (percent-decoded strings). It
returns ``str`` (a text content), ``bytes`` (a blob, sent base64), a content ``dict`` as MCP
defines it (``{"text": ...}`` or ``{"blob": ...}``, ``uri`` and ``mimeType`` filled in when
missing), or a list of those. An exception becomes the read's ``error`` (its message reaches
the agent).

:func:`find` picks the definition for a URI the broker asked for: a listed URI exactly, else the
first template (in declaration order) whose RFC 6570 level-1 pattern matches it.

``@app.prompt`` makes a :class:`PromptDefinition`: the function's parameters are the prompt's
arguments (strings; required when they have no default). :func:`render` runs it: a ``str``
becomes one user text message; a list holds messages (``str`` or MCP message dicts
``{"role", "content"}``); a dict with ``messages`` (and ``description``) is the whole answer.

Completions (protocol v2, section 12): ``complete=`` on ``@app.prompt`` (keyed by argument) and
``@app.resource_template`` (keyed by variable) gives a :class:`Completer` for each: a list of
strings (offered when they start with what the user typed, ignoring case), or a function of
the typed value — and, if it takes a second parameter, the arguments already chosen — that
returns the suggestions (an iterable of strings, or ``{"values", "total"?, "hasMore"?}``),
sync (run like a sync resource handler) or async. :func:`complete` runs one; at most 100 values go back
(``total`` and ``hasMore`` say how many there were).
"""

from __future__ import annotations

import base64
import inspect
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
import trio

from .guicall import GuiExecutor, run_sync_on_gui
from .protocol import PromptArgument, PromptSpec, ResourceSpec, ResourceTemplateSpec, UriTemplate

__all__ = ["Completer", "CompleterSpec", "PromptDefinition", "ResourceDefinition", "complete", "define_prompt",
           "define_resource", "define_template", "find", "read", "render"]

_EXPRESSION: Final = re.compile(r"\{([A-Za-z0-9_]+)\}")
#: MCP's bound on the values of one completion answer.
MAX_COMPLETION_VALUES: Final = 100
#: What ``complete=`` maps a name to: fixed options, or a function (see the module docstring).
CompleterSpec = Callable[..., Any] | Iterable[str]


@attrs.frozen
class Completer:
    """One argument's (or variable's) completion function, as :func:`complete` runs it."""

    fn: Callable[..., Any]
    #: It takes the already chosen arguments as a second parameter.
    with_arguments: bool = False

    @classmethod
    def of(cls, spec: CompleterSpec, name: str) -> Completer:
        if isinstance(spec, str) or not (callable(spec) or isinstance(spec, Iterable)):
            raise TypeError(f"complete[{name!r}] must be a list of strings or a function, not {type(spec).__name__}")
        if not callable(spec):
            options = list(spec)
            if not all(isinstance(option, str) for option in options):
                raise TypeError(f"complete[{name!r}]: the options must be strings")

            def starting_with(value: str) -> list[str]:
                typed = value.casefold()
                return [option for option in options if option.casefold().startswith(typed)]

            return cls(starting_with)
        try:
            parameters = [p for p in inspect.signature(spec).parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):  # a builtin without a signature: give it the value only
            parameters = []
        return cls(spec, with_arguments=len(parameters) >= 2)


def _completers(specs: Mapping[str, CompleterSpec] | None, names: Iterable[str], what: str) -> dict[str, Completer]:
    if not specs:
        return {}
    known = list(names)
    unknown = sorted(set(specs) - set(known))
    if unknown:
        raise ValueError(f"complete= names {', '.join(unknown)}, which {what} does not take (it takes: "
                         f"{', '.join(known) or 'nothing'})")
    return {name: Completer.of(spec, name) for name, spec in specs.items()}


@attrs.frozen
class ResourceDefinition:
    """A resource or template the app offers, and its handler."""

    handler: Callable[..., Any]
    spec: ResourceSpec | None = None
    template: ResourceTemplateSpec | None = None
    #: A template's matcher: linear in the URI (no backtracking regex), values as a greedy regex
    #: would split them.
    pattern: UriTemplate | None = None
    #: A template's completion functions by variable (protocol v2, section 12).
    completers: Mapping[str, Completer] = attrs.field(factory=dict)
    #: The handler takes the URI read, exactly as the broker sent it (``handler(uri=...)``),
    #: instead of the template's decoded variables: for a relay (a broker's uplink).
    takes_uri: bool = False

    @property
    def key(self) -> str:
        if self.spec is not None:
            return self.spec.uri
        assert self.template is not None
        return self.template.uri_template

    @property
    def mime_type(self) -> str | None:
        return self.spec.mime_type if self.spec is not None else self.template.mime_type if self.template else None


def _name_of(fn: Callable[..., Any], name: str | None) -> str:
    return name or getattr(fn, "__name__", None) or "resource"


def _description_of(fn: Callable[..., Any], description: str | None) -> str | None:
    return description if description is not None else (inspect.getdoc(fn) or None)


def define_resource(fn: Callable[..., Any], uri: str, *, name: str | None = None, title: str | None = None,
                    description: str | None = None, mime_type: str | None = None, size: int | None = None,
                    annotations: Mapping[str, Any] | None = None) -> ResourceDefinition:
    if not isinstance(uri, str) or not uri:
        raise ValueError("a resource needs a non-empty uri")
    spec = ResourceSpec(uri, _name_of(fn, name), title=title, description=_description_of(fn, description),
                        mime_type=mime_type, size=size, annotations=dict(annotations) if annotations else None)
    return ResourceDefinition(fn, spec=spec)


def define_template(fn: Callable[..., Any], uri_template: str, *, name: str | None = None, title: str | None = None,
                    description: str | None = None, mime_type: str | None = None,
                    annotations: Mapping[str, Any] | None = None,
                    complete: Mapping[str, CompleterSpec] | None = None) -> ResourceDefinition:
    variables = _EXPRESSION.findall(uri_template)
    if not variables:
        raise ValueError(f"the template {uri_template!r} has no {{variable}}: declare it with @app.resource")
    leftover = _EXPRESSION.sub("", uri_template)
    if "{" in leftover or "}" in leftover:
        raise ValueError(f"the template {uri_template!r} uses more than RFC 6570 level 1 ({{name}} only)")
    if len(set(variables)) < len(variables):
        raise ValueError(f"the template {uri_template!r} names a variable twice")
    spec = ResourceTemplateSpec(uri_template, _name_of(fn, name), title=title,
                                description=_description_of(fn, description), mime_type=mime_type,
                                annotations=dict(annotations) if annotations else None)
    return ResourceDefinition(fn, template=spec, pattern=UriTemplate(uri_template, expression=_EXPRESSION,
                                                                     excluded="/?#"),
                              completers=_completers(complete, variables, f"the template {uri_template!r}"))


def find(definitions: Mapping[str, ResourceDefinition], uri: str) -> tuple[ResourceDefinition, dict[str, str]] | None:
    """The definition that serves ``uri`` and the template's variables, or None."""
    exact = definitions.get(uri)
    if exact is not None and exact.spec is not None:
        return exact, {}
    for definition in definitions.values():
        if definition.pattern is not None:
            values = definition.pattern.match(uri)
            if values is not None:
                return definition, {k: urllib.parse.unquote(v) for k, v in values.items()}
    return None


async def _run_sync(fn: Callable[[], Any], limiter: trio.CapacityLimiter,
                    gui_executor: GuiExecutor | None) -> Any:
    """A sync handler's call: on the GUI thread when the app has one (a handler of a GUI
    program may touch its widgets or, in Blender, ``bpy``), else in a worker thread."""
    if gui_executor is not None:
        return await run_sync_on_gui(gui_executor, fn, limiter)
    return await trio.to_thread.run_sync(fn, limiter=limiter)


async def read(definition: ResourceDefinition, uri: str, variables: dict[str, str],
               limiter: trio.CapacityLimiter, gui_executor: GuiExecutor | None = None) -> list[dict[str, Any]]:
    """Run the handler and turn what it returned into contents (raises what the handler raised)."""
    handler = definition.handler
    arguments = {"uri": uri} if definition.takes_uri else variables
    if inspect.iscoroutinefunction(handler):
        value = await handler(**arguments)
    else:
        value = await _run_sync(lambda: handler(**arguments), limiter, gui_executor)
    items = value if isinstance(value, list) else [value]
    return [_content(item, uri, definition.mime_type) for item in items]


def _content(item: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if isinstance(item, str):
        content: dict[str, Any] = {"uri": uri, "text": item}
    elif isinstance(item, (bytes, bytearray, memoryview)):
        content = {"uri": uri, "blob": base64.b64encode(bytes(item)).decode("ascii")}
    elif isinstance(item, dict) and (isinstance(item.get("text"), str) or isinstance(item.get("blob"), str)):
        content = {"uri": uri, **item}
    else:
        raise TypeError(f"a resource handler returns str, bytes, a content dict with 'text' or 'blob', or a list "
                        f"of those; got {type(item).__name__}")
    if mime_type is not None:
        content.setdefault("mimeType", mime_type)
    return content


@attrs.frozen
class PromptDefinition:
    """A prompt the app offers, and its handler."""

    handler: Callable[..., Any]
    spec: PromptSpec
    #: Completion functions by argument (protocol v2, section 12).
    completers: Mapping[str, Completer] = attrs.field(factory=dict)


def define_prompt(fn: Callable[..., Any], *, name: str | None = None, title: str | None = None,
                  description: str | None = None,
                  complete: Mapping[str, CompleterSpec] | None = None) -> PromptDefinition:
    arguments = []
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        arguments.append(PromptArgument(parameter.name, required=parameter.default is inspect.Parameter.empty))
    spec = PromptSpec(_name_of(fn, name), title=title, description=_description_of(fn, description),
                      arguments=arguments)
    return PromptDefinition(fn, spec, _completers(complete, [arg.name for arg in arguments],
                                                  f"the prompt {spec.name!r}"))


async def render(definition: PromptDefinition, arguments: dict[str, str],
                 limiter: trio.CapacityLimiter,
                 gui_executor: GuiExecutor | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Run the prompt's handler: its ``(messages, description)`` (raises what the handler raised)."""
    handler = definition.handler
    if inspect.iscoroutinefunction(handler):
        value = await handler(**arguments)
    else:
        value = await _run_sync(lambda: handler(**arguments), limiter, gui_executor)
    description = definition.spec.description
    if isinstance(value, dict) and "messages" in value:
        description = value.get("description", description)
        value = value["messages"]
    items = value if isinstance(value, list) else [value]
    messages = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, dict) and "role" in item and "content" in item:
            messages.append(item)
        else:
            raise TypeError(f"a prompt handler returns str, a message dict {{role, content}}, a list of those, or "
                            f"{{'messages': [...]}}; got {type(item).__name__}")
    return messages, description


async def complete(completer: Completer, value: str, arguments: dict[str, str],
                   limiter: trio.CapacityLimiter,
                   gui_executor: GuiExecutor | None = None) -> tuple[list[str], int | None, bool]:
    """Run a completion function: ``(values, total, has_more)``, at most 100 values (raises
    what the function raised, TypeError for an answer that is not strings)."""
    fn = completer.fn
    args: tuple[Any, ...] = (value, dict(arguments)) if completer.with_arguments else (value,)
    if inspect.iscoroutinefunction(fn):
        answer = await fn(*args)
    else:
        answer = await _run_sync(lambda: fn(*args), limiter, gui_executor)
    total: int | None = None
    has_more = False
    if isinstance(answer, Mapping):
        given = answer.get("total")
        total = given if isinstance(given, int) and not isinstance(given, bool) and given >= 0 else None
        has_more = bool(answer.get("hasMore", False))
        answer = answer.get("values", [])
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise TypeError(f"a completion function returns a list of strings or {{'values': [...]}}; got "
                        f"{type(answer).__name__}")
    values = list(answer)
    if not all(isinstance(item, str) for item in values):
        raise TypeError("a completion function's values must be strings")
    if total is None:
        total = len(values)
    return values[:MAX_COMPLETION_VALUES], total, has_more or len(values) > MAX_COMPLETION_VALUES
