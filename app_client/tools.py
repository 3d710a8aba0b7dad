"""Turning a Python function into a tool: name, description, input schema, argument binding.

Theory of operation
-------------------
:func:`define_tool` inspects a function once, when it is declared:

* the **name** is the function's ``__name__`` unless ``name=`` is given; as protocol.md
  requires, 1-128 letters, digits, ``_ - . / :`` and inner spaces (the broker turns it into
  an agent-facing name that model APIs accept);
* the **description** is ``inspect.getdoc(fn)`` unless ``description=`` is given;
* the **input schema** comes from the parameters' type hints. The parameters (minus the one
  annotated :class:`~app_client.ToolContext`, wherever it is) become the fields of a msgspec
  Struct built with :func:`msgspec.defstruct` (``kw_only=True``,
  ``forbid_unknown_fields=True``); parameters with defaults are optional. The Struct's JSON
  schema (:func:`msgspec.json.schema_components`) is the tool's ``inputSchema``: its root is
  an object schema, nested types (Structs, TypedDicts, dataclasses, enums, ...) live in the
  root's ``$defs`` and every ``"$ref"`` points there, so the schema is self-contained.
  Unannotated parameters accept any JSON value. Per-parameter descriptions and constraints
  come from ``Annotated[int, msgspec.Meta(description=..., ge=0)]``; the pydantic / FastMCP
  spelling ``Annotated[str, Field(description=...)]`` works too, without this package
  depending on pydantic: any ``Annotated`` extra with a string ``description`` attribute (and
  optionally ``title``) is read as ``msgspec.Meta(description=..., title=...)``
  (:func:`_adapt`);
* a ``pathlib.Path`` (any ``PurePath`` class, also inside ``list[...]``, ``... | None``) is a
  string in the schema and reaches the handler as that path class (msgspec has no Path type:
  :func:`_path_schema` and :func:`_path_from_json` are its hooks). A parameter type that has no
  JSON schema is refused with a :class:`ToolDefinitionError` naming the parameter.

At call time :meth:`ToolDefinition.bind` converts the ``parameters`` object with
:func:`msgspec.convert` into that Struct — which validates it and builds nested Structs — and
returns the positional and keyword arguments for the function, with the context inserted.

Type hints are resolved with :func:`typing.get_type_hints`, so ``from __future__ import
annotations`` works as long as the names used in annotations are module-level.
"""

from __future__ import annotations

import copy
import inspect
import pathlib
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import msgspec

from .context import ToolContext
from .errors import InvalidArguments, ToolDefinitionError  # InvalidArguments: re-exported (defined here before)
from .protocol import ToolSpec, example_requests_problem

__all__ = [
    "TOOL_NAME_PATTERN",
    "InvalidArguments",
    "RemoteHandler",
    "ToolDefinition",
    "define_remote_tool",
    "define_tool",
    "derive_input_schema",
]

#: Tool names protocol.md allows (also no leading or trailing space).
TOOL_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_.\-/: ]{1,128}")


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    # A plain function is asked alone: its hints or an error. Falling through to
    # ``type(fn).__call__`` (the function type's slot wrapper, which has no hints) would turn
    # an unresolvable annotation into "every parameter takes anything" without a word.
    candidates: list[object] = [fn]
    if not inspect.isfunction(fn) and not inspect.ismethod(fn):
        candidates += [getattr(fn, "func", None), getattr(type(fn), "__call__", None)]
    last_error: Exception | None = None
    for candidate in candidates:
        if candidate is None:
            continue
        try:
            return typing.get_type_hints(candidate, include_extras=True)
        except (NameError, TypeError, AttributeError) as exc:
            last_error = exc
    raise ToolDefinitionError(
        f"cannot resolve the type hints of {fn!r} ({last_error}); annotations must name "
        "types visible at module level"
    )


def _is_context(annotation: object) -> bool:
    """``ToolContext``, a subclass, ``ToolContext | None`` or ``Annotated[...]`` of those."""
    if annotation is ToolContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_context(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return len(members) == 1 and _is_context(members[0])
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def _foreign_meta(extra: object) -> msgspec.Meta | None:
    """``msgspec.Meta`` for an ``Annotated`` extra from another library (pydantic's ``Field``).

    Duck-typed, so pydantic is never imported: an object with a string ``description``
    attribute (and perhaps a string ``title``) describes the parameter.
    """
    if isinstance(extra, msgspec.Meta):
        return None
    description = getattr(extra, "description", None)
    if not isinstance(description, str) or not description:
        return None
    title = getattr(extra, "title", None)
    return msgspec.Meta(description=description, title=title if isinstance(title, str) and title else None)


def _adapt(annotation: Any) -> Any:
    """``annotation`` with foreign ``Annotated`` descriptions turned into ``msgspec.Meta``."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return annotation
    base, *extras = typing.get_args(annotation)
    adapted = [meta if (meta := _foreign_meta(extra)) is not None else extra for extra in extras]
    if all(a is e for a, e in zip(adapted, extras)):
        return annotation
    return typing.Annotated.__class_getitem__((base, *adapted))


def _path_schema(kind: type) -> dict[str, Any]:
    """msgspec's ``schema_hook``: a path is a string in the schema."""
    if isinstance(kind, type) and issubclass(kind, pathlib.PurePath):
        return {"type": "string"}
    raise NotImplementedError


def _path_from_json(kind: type, value: Any) -> Any:
    """msgspec's ``dec_hook``: a string becomes the parameter's path class."""
    if isinstance(kind, type) and issubclass(kind, pathlib.PurePath):
        if isinstance(value, str):
            return kind(value)
        raise ValueError("Expected a path (a string)")
    raise NotImplementedError


def _needs_factory(default: object) -> bool:
    """msgspec takes only empty mutable defaults as they are; others need a factory."""
    return isinstance(default, (list, dict, set, bytearray)) and len(default) > 0


def _field_default(default: object) -> object:
    """A default msgspec accepts: immutable values as they are, others copied per call."""
    if _needs_factory(default):
        return msgspec.field(default_factory=lambda: copy.deepcopy(default))
    return default


@attrs.frozen
class _Signature:
    arguments_type: type[msgspec.Struct]
    positional: tuple[str, ...]
    keyword: tuple[str, ...]
    context_param: str | None
    context_positional_index: int | None
    #: Defaults msgspec holds as factories, so the schema would not show them.
    factory_defaults: Mapping[str, Any]
    #: Parameters whose default is a path: msgspec holds it as a string (its schema could not
    #: show a Path), turned back into this path class when the call leaves it out.
    path_defaults: Mapping[str, type[pathlib.PurePath]] = attrs.field(factory=dict)


def _analyse(fn: Callable[..., Any], struct_name: str) -> _Signature:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read the signature of {fn!r}: {exc}") from exc
    hints = _type_hints(fn)
    fields: list[tuple[Any, ...]] = []
    positional: list[str] = []
    keyword: list[str] = []
    context_param: str | None = None
    context_index: int | None = None
    factory_defaults: dict[str, Any] = {}
    path_defaults: dict[str, type[pathlib.PurePath]] = {}
    for parameter in signature.parameters.values():
        annotation = _adapt(hints.get(parameter.name, Any))
        if _is_context(annotation):
            if context_param is not None:
                raise ToolDefinitionError(f"{fn!r} has two ToolContext parameters")
            context_param = parameter.name
            if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
                context_index = len(positional)
                positional.append(parameter.name)
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{fn!r}: *args and **kwargs cannot be described by a schema; "
                f"declare each parameter ({parameter.name!r})"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(parameter.name)
        else:
            keyword.append(parameter.name)
        if parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, annotation))
        elif isinstance(parameter.default, pathlib.PurePath):
            path_defaults[parameter.name] = type(parameter.default)
            fields.append((parameter.name, annotation, str(parameter.default)))
        else:
            _check_default(fn, parameter)
            fields.append((parameter.name, annotation, _field_default(parameter.default)))
            if _needs_factory(parameter.default):
                factory_defaults[parameter.name] = parameter.default
    try:
        arguments_type = msgspec.defstruct(
            struct_name, fields, kw_only=True, forbid_unknown_fields=True, module=__name__
        )
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{fn!r}: unsupported parameters{_culprit(fields)}: {exc}") from exc
    return _Signature(
        arguments_type,
        tuple(positional),
        tuple(keyword),
        context_param,
        context_index,
        factory_defaults,
        path_defaults,
    )


def _check_default(fn: Callable[..., Any], parameter: inspect.Parameter) -> None:
    """Refuse pydantic's ``x: str = Field(description=...)``: msgspec would take it as the value."""
    default = parameter.default
    if type(default).__name__ == "FieldInfo" and hasattr(default, "description"):
        raise ToolDefinitionError(
            f"{fn!r}: parameter {parameter.name!r} has a pydantic Field as its default; write "
            f"`{parameter.name}: Annotated[<type>, Field(description=...)] = <default>` instead"
        )


def _culprit(fields: list[tuple[Any, ...]]) -> str:
    """`` (parameter 'x')`` for the first field msgspec cannot describe, else ``""``."""
    for name, annotation, *_ in fields:
        try:
            msgspec.json.schema_components([annotation], schema_hook=_path_schema)
        except Exception:
            return f" (parameter {name!r} of type {_type_name(annotation)})"
    return ""


def _type_name(annotation: Any) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def _schema_of(signature: _Signature, fn: Callable[..., Any]) -> dict[str, Any]:
    arguments_type = signature.arguments_type
    try:
        (root_ref,), components = msgspec.json.schema_components([arguments_type], schema_hook=_path_schema)
    except Exception as exc:  # TypeError mostly; NameError from a class msgspec inspects (attrs)
        fields = [(f.name, f.type) for f in msgspec.structs.fields(arguments_type)]
        culprit = _culprit(fields)
        why = f"{culprit.strip(' ()')} has no JSON schema" if culprit else f"a parameter type has no JSON schema ({exc})"
        raise ToolDefinitionError(
            f"{fn!r}: {why}; use JSON-compatible types (int, str, pathlib.Path, list[...], msgspec "
            "Structs, TypedDicts, Literal, ...)"
        ) from exc
    root = dict(components.pop(root_ref["$ref"].rsplit("/", 1)[-1]))
    root.pop("title", None)
    root["type"] = "object"
    properties = root.setdefault("properties", {})
    for name, default in signature.factory_defaults.items():
        properties[name] = {**properties[name], "default": msgspec.to_builtins(default)}
    if components:
        root["$defs"] = components
    return root


def _struct_name(tool_name: str) -> str:
    return "_Arguments_" + re.sub(r"\W", "_", tool_name)


def derive_input_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema (root ``"type": "object"``) describing ``fn``'s parameters."""
    return _schema_of(_analyse(fn, _struct_name(getattr(fn, "__name__", "tool"))), fn)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)
    )


@attrs.frozen
class ToolDefinition:
    """A declared tool: its wire spec plus how to call the function behind it.

    ``on_gui_thread`` is ``None`` when the choice is left to the app: sync handlers run on
    the GUI thread when the app has a ``gui_executor``, in a worker thread otherwise.
    """

    name: str
    fn: Callable[..., Any]
    spec: ToolSpec
    is_async: bool
    on_gui_thread: bool | None
    #: ``None`` for a tool made by :func:`define_remote_tool` (parameters passed as they are).
    _signature: _Signature | None

    def bind(
        self, parameters: Mapping[str, Any], ctx: ToolContext
    ) -> tuple[list[Any], dict[str, Any]]:
        """Validate ``parameters`` and return ``(args, kwargs)`` for :attr:`fn`.

        Raises :class:`InvalidArguments` with msgspec's message (it names the bad field,
        e.g. ``Expected `int`, got `str` - at `$.x```).
        """
        sig = self._signature
        if sig is None:  # a remote tool: the broker validated against spec.input_schema
            return [dict(parameters), ctx], {}
        try:
            # msgspec.convert reads a dict without changing it: no copy when it already is one.
            plain = parameters if type(parameters) is dict else dict(parameters)
            values = msgspec.convert(plain, sig.arguments_type, dec_hook=_path_from_json)
        except msgspec.ValidationError as exc:
            raise InvalidArguments(str(exc)) from None
        for name, path_class in sig.path_defaults.items():
            if isinstance(getattr(values, name), str):  # the default, held as a string
                setattr(values, name, path_class(getattr(values, name)))
        args: list[Any] = []
        for name in sig.positional:
            args.append(ctx if name == sig.context_param else getattr(values, name))
        kwargs = {name: getattr(values, name) for name in sig.keyword}
        if sig.context_param is not None and sig.context_positional_index is None:
            kwargs[sig.context_param] = ctx
        return args, kwargs


def define_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    path_guard: bool = True,
    on_gui_thread: bool | None = None,
    example_requests: Sequence[str] | None = None,
) -> ToolDefinition:
    """Inspect ``fn`` and build its :class:`ToolDefinition` (see the module docstring).

    ``timeout`` is the tool's default deadline in seconds (sent as ``timeoutMs``; the
    broker's default applies if ``None``). ``path_guard=False`` opts the tool out of the
    broker's path-traversal argument check. ``annotations`` are MCP tool annotations
    (``readOnlyHint``, ``destructiveHint``, ...). ``example_requests`` are typical requests of
    users that the tool serves (``["my pallet came in, log it"]``): the daemon's tool search
    reads them, agents never see them (at most 16, each 1-200 characters).

    Raises :class:`ToolDefinitionError` for anything that would make a broken tool.
    """
    if not callable(fn):
        raise ToolDefinitionError(f"a tool must be a function, not {type(fn).__name__}")
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str):
        raise ToolDefinitionError(f"{fn!r} has no __name__; pass name=")
    if not TOOL_NAME_PATTERN.fullmatch(tool_name) or tool_name != tool_name.strip():
        raise ToolDefinitionError(
            f"invalid tool name {tool_name!r}: use 1-128 letters, digits, '_', '-', '.', '/', "
            "':' and inner spaces"
        )
    if timeout is not None and not timeout > 0:
        raise ToolDefinitionError(f"{tool_name}: timeout must be a positive number of seconds")
    # a lone string would be a list of its letters
    requests = None if example_requests is None else [example_requests] if isinstance(example_requests, str) \
        else list(example_requests)
    problem = example_requests_problem(requests) if requests is not None else None
    if problem is not None:
        raise ToolDefinitionError(f"{tool_name}: {problem.replace('exampleRequests', 'example_requests')}")
    is_async = _is_async(fn)
    if on_gui_thread and is_async:
        raise ToolDefinitionError(
            f"{tool_name}: on_gui_thread=True needs a sync function (async handlers run in trio)"
        )
    signature = _analyse(fn, _struct_name(tool_name))
    spec = ToolSpec(
        name=tool_name,
        description=description if description is not None else (inspect.getdoc(fn) or ""),
        input_schema=_schema_of(signature, fn),
        title=title,
        annotations=dict(annotations) if annotations is not None else None,
        output_schema=dict(output_schema) if output_schema is not None else None,
        timeout_ms=None if timeout is None else max(1, round(timeout * 1000)),
        path_guard=path_guard,
        example_requests=requests or None,
    )
    return ToolDefinition(tool_name, fn, spec, is_async, on_gui_thread, signature)


#: Handles every call of tools made by :func:`define_remote_tool`: ``await handler(parameters,
#: ctx)`` with the invocation's parameters as they came and its context (``ctx.tool`` is the
#: tool's name); returns what a tool function returns (a :class:`ToolResult` is sent as is).
RemoteHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]


def define_remote_tool(spec: ToolSpec, handler: RemoteHandler) -> ToolDefinition:
    """A tool given as a wire :class:`ToolSpec` whose calls all go to one async ``handler``.

    For programs that relay tools they do not implement themselves (a toolbridge broker
    uplinking into another, a bridge to another RPC system): the spec is sent as it is and
    the parameters reach ``handler`` unconverted (the broker has already validated them
    against ``spec.input_schema``). Raises :class:`ToolDefinitionError` for an invalid name.
    """
    if not TOOL_NAME_PATTERN.fullmatch(spec.name) or spec.name != spec.name.strip():
        raise ToolDefinitionError(
            f"invalid tool name {spec.name!r}: use 1-128 letters, digits, '_', '-', '.', '/', "
            "':' and inner spaces"
        )

    async def relay(parameters: dict[str, Any], ctx: ToolContext) -> Any:
        return await handler(parameters, ctx)

    return ToolDefinition(spec.name, relay, spec, True, None, None)
