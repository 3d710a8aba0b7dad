"""broker.codegen: typed bindings for tricky schemas pass mypy --strict and tsc --strict, and run.

The TypeScript compiler comes from the npm registry; CI installs it with
``npm install --prefix "$HOME/.cache/toolbridge-tsc" typescript@5`` (see TSC_HINT) and the tests
find it through $TOOLBRIDGE_TSC, that directory, or ``tsc`` on PATH.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app_client.wire import ToolSpec
from broker.codegen import CodegenTool, generate, generate_python, generate_typescript, tools_from_admin
from broker.codegen._names import NameAllocator, camel_case, clean_text, pascal_case, snake_case

ROOT = Path(__file__).resolve().parent.parent
TSC_CACHE = Path.home() / ".cache" / "toolbridge-tsc"
TSC_HINT = f'npm install --prefix "{TSC_CACHE}" typescript@5'


def find_tsc() -> str:
    candidates = [os.environ.get("TOOLBRIDGE_TSC"), str(TSC_CACHE / "node_modules" / ".bin" / "tsc"), shutil.which("tsc")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail(f"tsc (TypeScript) not found: install it with `{TSC_HINT}` or set TOOLBRIDGE_TSC")


def tool(app: str, name: str, schema: Any, output: Any = None, description: str = "", agent: str | None = None) -> CodegenTool:
    spec = ToolSpec(name=name, description=description, input_schema=schema, output_schema=output)
    return CodegenTool(agent or f"{app}__{name}", app, name, spec)


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        schema["required"] = required
    return schema


WEIRD_KEYS = [
    "class", "import", "from", "def", "None", "True", "async", "await", "lambda", "self", "arguments",
    "__proto__", "constructor", "prototype", "__init__", "__class__", "__dunder", "_private", "x-y",
    "with space", "123start", "", "naïve", "ﬁle", "emoji😀", "str", "int", "list", "dict", "Any", "Literal",
    "Required", "TypedDict", "ToolCaller", "Apps", "WatchTowerClickElementArgs", "delete", "typeof",
    "then", "toString", 'quo"te', "back\\slash", "new\nline", "*/", '"""', "\u202eevil", "type", "match",
]

RECURSIVE = {
    "type": "object",
    "$defs": {
        "Node": obj({"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                    ["value"], description="A tree node."),
        "A": obj({"b": {"$ref": "#/$defs/B"}}),
        "B": obj({"a": {"$ref": "#/$defs/A"}, "name": {"type": "string"}}),
        "Loop": {"type": "array", "items": {"$ref": "#/$defs/Loop"}},
        "Alias": {"$ref": "#/$defs/Alias"},
        "a/b~c": {"type": "string", "enum": ["x", "y"]},
    },
    "definitions": {"Legacy": obj({"old": {"type": "boolean"}})},
    "properties": {
        "tree": {"$ref": "#/$defs/Node"},
        "pair": {"$ref": "#/$defs/A"},
        "loop": {"$ref": "#/$defs/Loop"},
        "alias": {"$ref": "#/$defs/Alias"},
        "escaped": {"$ref": "#/$defs/a~1b~0c"},
        "percent": {"$ref": "#/$defs/a~1b~0c".replace("~1", "%7E1")},
        "legacy": {"$ref": "#/definitions/Legacy"},
        "self_root": {"$ref": "#"},
        "missing": {"$ref": "#/$defs/Nope"},
        "remote": {"$ref": "https://example.com/schema.json"},
        "anchor": {"$ref": "#anchor"},
    },
    "required": ["tree"],
}

ALL_TYPES = obj(
    {
        "s": {"type": "string", "description": "A string.", "default": "hi", "format": "date-time"},
        "n": {"type": "number"},
        "i": {"type": "integer"},
        "b": {"type": "boolean"},
        "z": {"type": "null"},
        "e": {"enum": ["red", "green", 3, True, None, 1.5, -2]},
        "c": {"const": "fixed"},
        "c_obj": {"const": {"a": 1}},
        "f": {"enum": [0.5, 2.5]},
        "strs": {"type": "array", "items": {"type": "string"}},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
        "anyarr": {"type": "array"},
        "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        "oldtuple": {"type": "array", "items": [{"type": "string"}]},
        "nested": obj({"inner": obj({"deep": {"type": "string"}}, ["deep"])}, ["inner"], description="Nested."),
        "map": {"type": "object", "additionalProperties": {"type": "integer"}},
        "freeform": {"type": "object"},
        "union": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "one": {"oneOf": [obj({"kind": {"const": "a"}, "x": {"type": "number"}}, ["kind"]),
                          obj({"kind": {"const": "b"}, "y": {"type": "string"}}, ["kind"])]},
        "typelist": {"type": ["string", "null"]},
        "nullable": {"type": "integer", "nullable": True},
        "alt_required": {**obj({"p": {"type": "string"}, "q": {"type": "string"}}), "oneOf": [{"required": ["p"]}, {"required": ["q"]}]},
        "merged": {"allOf": [obj({"a": {"type": "string"}}, ["a"]), obj({"b": {"type": "integer"}})]},
        "bad_allof": {"allOf": [{"type": "string"}, {"type": "integer"}]},
        "single_allof": {"allOf": [{"type": "string"}]},
        "closed": obj({"only": {"type": "string"}}, additionalProperties=False),
        "open": obj({"first": {"type": "string"}}, additionalProperties={"type": "string"}),
        "pattern": obj({"k": {"type": "string"}}, patternProperties={"^x": {"type": "string"}}),
        "req_missing": obj({"here": {"type": "string"}}, ["here", "not_here"]),
        "big": {"enum": [10**30, -(10**30)]},
        "true_schema": True,
        "false_schema": False,
        "not_schema": {"not": {"type": "string"}},
        "if_then": {"if": {"type": "string"}, "then": {"minLength": 1}},
        "bad_type": {"type": "strange"},
        "bad_type_list": {"type": ["string", 3]},
        "empty_enum": {"enum": []},
        "obj_enum": {"enum": [{"a": 1}]},
        "junk": 42,
    },
    ["s", "e", "nested"],
    description='Doc with """ triple quotes, a */ comment end, a back\\slash and \u202e bidi \x00 control.',
)


def tricky_tools() -> list[CodegenTool]:
    weird = obj({key: {"type": "string", "description": f"key {key!r}"} for key in WEIRD_KEYS}, ["class", "__proto__"])
    return [
        tool("WatchTower", "ClickElement", obj({"x": {"type": "integer"}, "y": {"type": "integer"}}, ["x", "y"]),
             description="Click at a point."),
        tool("WatchTower", "click_element", obj({"x": {"type": "integer"}})),
        tool("WatchTower", "click-element", {"type": "object"}, agent="WatchTower__click-element"),
        tool("WatchTower", "Click Element", {"type": "object", "properties": {}}, agent="WatchTower__Click_Element"),
        tool("WatchTower", "AllTypes", ALL_TYPES,
             output=obj({"ok": {"type": "boolean"}, "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
                        ["ok"], **{"$defs": {"Item": obj({"id": {"type": "string"}}, ["id"])}})),
        tool("WatchTower", "Recursive", RECURSIVE, output={"type": "array", "items": {"type": "string"}}),
        tool("WatchTower", "WeirdKeys", weird, description="*/ evil(); /*"),
        tool("WatchTower", "OptionalWeird", obj({"class": {"type": "integer"}})),
        tool("WatchTower", "MapRoot", {"type": "object", "additionalProperties": {"type": "number"}}),
        tool("WatchTower", "JunkRoot", {"type": "object", "properties": "nope", "required": "x"}),
        tool("WatchTower", "RootRef", {"$ref": "#/$defs/Args", "$defs": {"Args": obj({"q": {"type": "string"}}, ["q"])}}),
        tool("Keywords", "class", obj({"value": {"type": "string"}})),
        tool("Keywords", "import", {"type": "object"}),
        tool("Keywords", "from", {"type": "object"}),
        tool("Keywords", "__proto__", {"type": "object"}, agent="Keywords____proto__"),
        tool("Keywords", "constructor", {"type": "object"}),
        tool("Keywords", "delete", {"type": "object"}),
        tool("Keywords", "str", obj({"s": {"type": "string"}}, ["s"])),
        tool("Keywords", "list", {"type": "object"}),
        tool("Keywords", "3DExport", {"type": "object"}),
        tool("Keywords", "__init__", {"type": "object"}, agent="Keywords____init__"),
        tool("Keywords", "Ünïcödé Tööl", {"type": "object"}, agent="Keywords__Unicode_Tool"),
        tool("Keywords", "日本", {"type": "object"}, agent="Keywords__nihon"),
        tool("3D-Studio", "Render", obj({"samples": {"type": "integer"}})),
        tool("class", "Run", {"type": "object"}),
        tool("WatchTowerClickElementArgs", "X", {"type": "object"}),
    ]


def junk_schemas(seed: int, count: int) -> list[Any]:
    """Deterministic junk: random mixes of schema keywords and values."""
    rng = random.Random(seed)
    keys = ["type", "properties", "items", "required", "enum", "const", "$ref", "anyOf", "oneOf", "allOf",
            "additionalProperties", "description", "nullable", "$defs", "prefixItems", "title", "default"]
    types = ["string", "number", "integer", "boolean", "null", "array", "object", "weird", 7, None]
    refs = ["#", "#/$defs/a", "#/$defs/b", "#/properties/x", "#/nope", "http://x", "#/$defs/a/properties/x", 5]

    def value(depth: int) -> Any:
        if depth > 3:
            return rng.choice([True, False, 1, "x", None, {}])
        makers: list[Callable[[], Any]] = [
            lambda: schema(depth + 1),
            lambda: [schema(depth + 1) for _ in range(rng.randint(0, 3))],
            lambda: rng.choice(types),
            lambda: rng.choice(refs),
            lambda: rng.random(),
            lambda: 'text */ """ \\',
        ]
        return rng.choice(makers)()

    def schema(depth: int) -> Any:
        if depth > 4 or rng.random() < 0.1:
            return rng.choice([True, False, {}, {"type": rng.choice(types)}])
        out: dict[str, Any] = {}
        for key in rng.sample(keys, rng.randint(1, 5)):
            if key == "properties" or key == "$defs":
                out[key] = {rng.choice(WEIRD_KEYS + ["a", "b", "x"]): schema(depth + 1) for _ in range(rng.randint(0, 4))}
            elif key == "type":
                out[key] = rng.choice([rng.choice(types), [rng.choice(types) for _ in range(2)]])
            elif key == "$ref":
                out[key] = rng.choice(refs)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                out[key] = [schema(depth + 1) for _ in range(rng.randint(0, 3))]
            elif key == "enum":
                out[key] = [rng.choice(["a", 1, 2.5, None, True, [1], {"a": 1}]) for _ in range(rng.randint(0, 3))]
            elif key == "required":
                out[key] = rng.choice([["a", "x", "class"], "a", [1]])
            else:
                out[key] = value(depth)
        return out

    return [{"type": "object", **s} if isinstance(s, dict) else s for s in (schema(0) for _ in range(count))]


def all_tools() -> list[CodegenTool]:
    junk = [tool("Junk", f"Junk{i}", s if isinstance(s, dict) else {"type": "object"}, output=s if i % 3 == 0 else None)
            for i, s in enumerate(junk_schemas(8, 40))]
    return tricky_tools() + junk


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


# --- Python ------------------------------------------------------------------------------

PY_USAGE_OK = '''
from __future__ import annotations
from typing import Any
from bindings import Apps, ToolCaller, WatchTowerAllTypesResult, WatchTowerWeirdKeysArgs

class Client:
    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return {}

async def use(apps: Apps) -> None:
    await apps.WatchTower.click_element(x=1, y=2)
    await apps.WatchTower.click_element_2()
    await apps.WatchTower.click_element_3()
    await apps.WatchTower.click_element_3({"anything": 1})
    await apps.WatchTower.click_element_4()
    await apps.WatchTower.click_element_4(x=3)
    weird: WatchTowerWeirdKeysArgs = {"class": "c", "__proto__": "p", "x-y": "z", "self": "s"}
    await apps.WatchTower.weird_keys(weird)
    await apps.WatchTower.optional_weird()
    await apps.WatchTower.map_root({"a": 1.5})
    result: WatchTowerAllTypesResult = await apps.WatchTower.all_types(s="x", e="red", nested={"inner": {"deep": "d"}})
    ok: bool = result["ok"]
    await apps.WatchTower.recursive(tree={"value": 1, "children": [{"value": 2}]}, pair={"b": {"a": {}}})
    await apps.WatchTower.root_ref(q="query")
    await apps.Keywords.class_(value="v")
    await apps.Keywords.import_()
    await apps.Keywords.str_(s="x")
    await apps.Keywords.tool_3d_export()
    await apps.app_3D_Studio.render(samples=4)
    await apps.class_.run()

apps = Apps(Client())
caller: ToolCaller = Client()
'''

PY_USAGE_BAD = '''
from __future__ import annotations
from bindings import Apps

async def use(apps: Apps) -> None:
    await apps.WatchTower.click_element(x="1", y=2)
    await apps.WatchTower.click_element(x=1)
    await apps.WatchTower.click_element(x=1, y=2, z=3)
    await apps.WatchTower.all_types(s="x", e="blue", nested={"inner": {"deep": "d"}})
    await apps.WatchTower.weird_keys({"class": "c"})
    await apps.WatchTower.recursive(tree={"value": "one"})
'''


@pytest.fixture(scope="module")
def python_source() -> str:
    return generate_python(all_tools())


def mypy(tmp_path: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy_cache"),
                "--python-version", "3.11", *files], tmp_path)


def test_python_bindings_pass_mypy_strict(tmp_path: Path, python_source: str) -> None:
    (tmp_path / "bindings.py").write_text(python_source, encoding="utf-8")
    (tmp_path / "usage_ok.py").write_text(PY_USAGE_OK)
    (tmp_path / "usage_bad.py").write_text(PY_USAGE_BAD)
    good = mypy(tmp_path, "bindings.py", "usage_ok.py")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = mypy(tmp_path, "usage_bad.py")
    errors = [line for line in bad.stdout.splitlines() if ": error:" in line]
    lines = {int(line.split(":")[1]) for line in errors}
    assert lines == {6, 7, 8, 9, 10, 11}, bad.stdout  # every wrong call is caught


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # typing.get_type_hints looks the module up there
    spec.loader.exec_module(module)
    return module


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        return {"ok": True}


async def test_python_bindings_import_and_call_through_the_client(tmp_path: Path, python_source: str) -> None:
    path = tmp_path / "bindings_runtime.py"
    path.write_text(python_source, encoding="utf-8")
    module = load_module(path, "bindings_runtime")
    try:
        await check_runtime(module)
    finally:
        sys.modules.pop("bindings_runtime", None)


async def check_runtime(module: Any) -> None:
    client = RecordingClient()
    apps = module.Apps(client)
    assert await apps.WatchTower.click_element(x=1, y=2) == {"ok": True}
    await apps.WatchTower.click_element_2()
    await apps.WatchTower.click_element_3({"free": 1})
    await apps.WatchTower.click_element_4(x=5)
    await apps.WatchTower.weird_keys({"class": "c", "__proto__": "p", "self": "s"})
    await apps.Keywords.class_(value="v")
    await apps.Keywords.proto()
    await apps.Keywords.init()
    await apps.app_3D_Studio.render(samples=4)
    assert client.calls == [
        ("WatchTower__ClickElement", {"x": 1, "y": 2}),
        ("WatchTower__Click_Element", {}),
        ("WatchTower__click-element", {"free": 1}),
        ("WatchTower__click_element", {"x": 5}),
        ("WatchTower__WeirdKeys", {"class": "c", "__proto__": "p", "self": "s"}),
        ("Keywords__class", {"value": "v"}),
        ("Keywords____proto__", {}),
        ("Keywords____init__", {}),
        ("3D-Studio__Render", {"samples": 4}),
    ]
    weird = module.WatchTowerWeirdKeysArgs
    assert set(weird.__annotations__) == set(WEIRD_KEYS)  # wire keys, exactly
    assert module.WatchTowerRecursiveNode.__required_keys__ == frozenset({"value"})
    for name in module.__all__:  # every annotation resolves at run time, forward references included
        typing.get_type_hints(getattr(module, name))
    assert set(module.__all__) >= {"Apps", "ToolCaller", "WatchTowerTools", "KeywordsTools"}


def test_python_method_names_are_identifiers_and_deterministic(python_source: str) -> None:
    tree = ast.parse(python_source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    methods = [n.name for n in classes["KeywordsTools"].body if isinstance(n, ast.AsyncFunctionDef)]
    # in order of agent-facing name: Keywords__3DExport, Keywords__Unicode_Tool, Keywords____init__, ...
    assert methods == ["tool_3d_export", "unicode_tool", "init", "proto", "class_", "constructor", "delete", "from_",
                       "import_", "list_", "tool", "str_"]
    watch = [n.name for n in classes["WatchTowerTools"].body if isinstance(n, ast.AsyncFunctionDef)]
    assert watch[:3] == ["all_types", "click_element", "click_element_2"]
    assert generate_python(list(reversed(all_tools()))) == python_source


def test_python_docstrings_cannot_be_escaped(python_source: str) -> None:
    tree = ast.parse(python_source)
    # The only top-level statements are the docstring, imports, __all__, classes and TypedDict assignments.
    for node in tree.body:
        assert isinstance(node, (ast.Expr, ast.ImportFrom, ast.Assign, ast.ClassDef)), ast.dump(node)[:200]
        if isinstance(node, ast.Expr):
            assert node is tree.body[0]
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            assert isinstance(node.value.func, ast.Name) and node.value.func.id == "TypedDict"
    assert "\u202e" not in python_source and "\x00" not in python_source
    assert "evil();" in python_source  # kept, but only inside a docstring


# --- TypeScript --------------------------------------------------------------------------

TS_USAGE = '''
import type { Apps, ToolArguments, WatchTowerWeirdKeysArgs } from "./bindings";

declare const apps: Apps;

async function use(): Promise<void> {
  await apps.WatchTower.clickElement({ x: 1, y: 2 });
  await apps.WatchTower.clickElement_2();
  await apps.WatchTower.clickElement_3({ anything: 1 });
  await apps.WatchTower.clickElement_4({ x: 3 });
  // a computed key makes an own property; a plain `__proto__:` would set the prototype
  const weird: WatchTowerWeirdKeysArgs = { class: "c", ["__proto__"]: "p", "x-y": "z" };
  await apps.WatchTower.weirdKeys(weird);
  const result = await apps.WatchTower.allTypes({ s: "x", e: "red", nested: { inner: { deep: "d" } } });
  const ok: boolean = result.ok;
  await apps.WatchTower.recursive({ tree: { value: 1, children: [{ value: 2 }] } });
  await apps.Keywords.class_({ value: "v" });
  await apps.Keywords.constructor_();
  await apps.Keywords.proto();
  await apps["3D-Studio"].render({ samples: 4 });
  const args: ToolArguments["WatchTower__ClickElement"] = { x: 1, y: 2 };
  // @ts-expect-error: x must be a number
  await apps.WatchTower.clickElement({ x: "1", y: 2 });
  // @ts-expect-error: y is required
  await apps.WatchTower.clickElement({ x: 1 });
  // @ts-expect-error: not in the enum
  await apps.WatchTower.allTypes({ s: "x", e: "blue", nested: { inner: { deep: "d" } } });
  // @ts-expect-error: value must be an integer
  await apps.WatchTower.recursive({ tree: { value: "one" } });
  void ok; void args;
}
void use;
'''


@pytest.fixture(scope="module")
def typescript_source() -> str:
    return generate_typescript(all_tools())


def test_typescript_bindings_pass_tsc_strict(tmp_path: Path, typescript_source: str) -> None:
    tsc = find_tsc()
    (tmp_path / "bindings.d.ts").write_text(typescript_source, encoding="utf-8")
    (tmp_path / "usage.ts").write_text(TS_USAGE)
    result = run([tsc, "--noEmit", "--strict", "--target", "es2020", "--module", "es2020", "--moduleResolution", "node",
                  "bindings.d.ts", "usage.ts"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_typescript_names_and_comments(typescript_source: str) -> None:
    assert '"class": string;' in typescript_source
    assert '"__proto__": string;' in typescript_source
    assert '"new\\nline"?: string;' in typescript_source
    assert "constructor_(" in typescript_source and "delete_(" in typescript_source
    # every comment is closed where the generator closes it: outside comments and strings,
    # no "*/" and no text from an app survives
    code = strip_comments_and_strings(typescript_source)
    assert "*/" not in code and "evil();" not in code and "evil" not in code
    assert generate_typescript(list(reversed(all_tools()))) == typescript_source


def strip_comments_and_strings(source: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(source):
        if source.startswith("/*", i):
            end = source.find("*/", i + 2)
            assert end >= 0, "unclosed comment"
            i = end + 2
        elif source.startswith("//", i):
            end = source.find("\n", i)
            i = len(source) if end < 0 else end
        elif source[i] == '"':
            j = i + 1
            while source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            i = j + 1
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


# --- fuzzing and helpers ---------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)
schema_keys = st.sampled_from(["type", "properties", "items", "required", "enum", "const", "$ref", "anyOf", "oneOf",
                               "allOf", "additionalProperties", "description", "$defs", "nullable", "prefixItems"])
schemas = st.recursive(
    st.booleans() | st.builds(dict) | st.fixed_dictionaries({"type": st.sampled_from(["string", "object", "array", "x"])}),
    lambda children: st.dictionaries(
        schema_keys,
        children | json_values | st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
        | st.sampled_from(["#", "#/$defs/a", "#/properties/a", "string", "object", "array"]),
        max_size=5,
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.text(max_size=12), schemas, st.one_of(st.none(), schemas)), min_size=1, max_size=3))
def test_fuzzed_schemas_never_crash(items: list[tuple[str, Any, Any]]) -> None:
    tools = [tool("Fuzz", name or "t", schema if isinstance(schema, dict) else {"type": "object"},
                  output=out if isinstance(out, dict) else None, agent=f"Fuzz__t{i}")
             for i, (name, schema, out) in enumerate(items)]
    python = generate_python(tools)
    ast.parse(python)  # parsing only: nothing is executed
    typescript = generate_typescript(tools)
    assert typescript.count("{") == typescript.count("}") or "{" in json.dumps([t.spec.input_schema for t in tools])


@pytest.mark.parametrize(
    ("text", "pascal", "snake", "camel"),
    [
        ("ExportAsPDF", "ExportAsPDF", "export_as_pdf", "exportAsPdf"),
        ("file.open_recent", "FileOpenRecent", "file_open_recent", "fileOpenRecent"),
        ("3DExport", "T3DExport", "tool_3d_export", "tool3dExport"),
        ("__proto__", "Proto", "proto", "proto"),
        ("héllo wörld", "HelloWorld", "hello_world", "helloWorld"),
        ("日本", "T", "tool", "tool"),
        ("", "T", "tool", "tool"),
    ],
)
def test_identifier_cases(text: str, pascal: str, snake: str, camel: str) -> None:
    assert (pascal_case(text), snake_case(text), camel_case(text)) == (pascal, snake, camel)


def test_name_allocator_escapes_keywords_and_numbers_collisions() -> None:
    names = NameAllocator(reserved={"str"}, keywords=frozenset({"class"}))
    assert [names.allocate(n) for n in ["class", "class", "str", "a", "a", "a"]] == [
        "class_", "class_2", "str_", "a", "a_2", "a_3"
    ]


def test_clean_text_removes_control_and_bidi_characters() -> None:
    assert clean_text("a\u202eb\r\nc\x00d\u2028e\ud800\u200b") == "ab\ncd\ne"
    assert len(clean_text("x" * 10_000)) == 2000


def test_tools_from_admin_tolerates_bad_rows() -> None:
    rows: list[Any] = [
        {"name": "A__B", "app": "A", "label": "A", "tool": "B", "description": "d", "title": None,
         "inputSchema": {"type": "object"}, "outputSchema": None, "annotations": None},
        {"name": "C__D", "inputSchema": "junk", "description": 5},
        {"nope": 1},
        "junk",
    ]
    tools = tools_from_admin(rows)
    assert [(t.agent_name, t.app_label, t.tool_name) for t in tools] == [("A__B", "A", "B"), ("C__D", "C", "D")]
    assert tools[1].spec.input_schema == {"type": "object"} and tools[1].spec.description == ""


def test_generate_rejects_an_unknown_language() -> None:
    with pytest.raises(ValueError, match="unknown language"):
        generate("cobol", [])
    assert "class Apps" in generate("python", [])
    assert "export interface Apps" in generate("typescript", [])


def test_no_eval_or_exec_in_discovery_and_codegen() -> None:
    sources = [*(ROOT / "broker" / "codegen").glob("*.py"), *(ROOT / "broker" / "discovery").glob("*.py"),
               ROOT / "broker" / "cli" / "codegen_command.py"]
    for path in sources:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"eval", "exec", "compile", "__import__"}, f"{path}: {node.func.id}"
