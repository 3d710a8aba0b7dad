"""Issue 30 item 14: `@toolbridge/app` installs like a package (clients/typescript).

`npm pack` (which runs the package's `prepare` script: both builds) makes the tarball a user
would install; each test installs it into a fresh project in a temporary directory, as a user
would (dependencies from the npm cache, else the registry), and uses nothing from the clone:

- an ES module project (`import`), a CommonJS project (`require`: Electron main processes are
  often CommonJS) and a TypeScript project (`module`/`moduleResolution: nodenext`, `strict`,
  `skipLibCheck: false`, compiled by its own tsc against the published declarations);
- each connects an App to a real daemon (the `daemon` fixture: its home is `tmp_path/home`) and has one of its tools called by `toolbridge call`;
- the ES module project also throws a `ToolError` made by the CommonJS copy of the package, so
  the two copies a process may load (the dual-package hazard) still agree on what a ToolError is.

The tarball's own contents are checked too: the two builds with their declarations, no tests,
and a README whose links work inside the tarball. Installing takes ~10-30 s per project; the
tests run in CI with the rest of the suite (`-m "not slow"` leaves them out).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import trio

from broker.daemon.run import DaemonInfo
from mcp_testkit import end_process
from ts_testkit import TS_CLIENT, node, node_env, npm

pytestmark = pytest.mark.slow

ESM_APP = """
import { createRequire } from "node:module";
import { App, ToolError, text } from "@toolbridge/app";

// The CommonJS copy of the same package, as a CommonJS dependency of this app would load it.
const commonjs = createRequire(import.meta.url)("@toolbridge/app");
if (commonjs.App === App) throw new Error("expected two copies of the package (ESM and CommonJS)");
if (!(new commonjs.ToolError("x") instanceof ToolError)) throw new Error("ToolError differs between the copies");

const app = new App({ name: "PkgEsm", home: process.argv[2] });
app.tool("echo", {
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
}, async ({ text: value }) => text(`echo: ${value}`));
app.tool("refuse", {}, async () => {
  throw new commonjs.ToolError("refused by the CommonJS copy");
});
await app.connect({ timeoutMs: 20000 });
console.log("connected");
process.stdin.on("end", () => void app.close());
process.stdin.resume();
"""

CJS_APP = """
const { App, ToolError, CONNECT_TIMEOUT_MS } = require("@toolbridge/app");

async function main() {
  if (typeof ToolError !== "function" || typeof CONNECT_TIMEOUT_MS !== "number") throw new Error("exports are missing");
  const app = new App({ name: "PkgCjs", home: process.argv[2] });
  app.tool("echo", {
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  }, async ({ text }) => `echo: ${text}`);
  await app.connect({ timeoutMs: 20000 });
  console.log("connected");
  process.stdin.on("end", () => void app.close());
  process.stdin.resume();
}
main().catch((err) => {
  console.error(err);
  process.exit(1);
});
"""

TS_APP = """
import { App, ConnectTimeout, type Registered } from "@toolbridge/app";
import { z } from "zod";

const app = new App({ name: "PkgTs", home: process.argv[2]!, toJSONSchema: z.toJSONSchema });
app.tool("echo", { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => {
  const typed: string = text;                 // z.infer of the schema: text is a string
  return `echo: ${typed}`;
});
app.resourceTemplate("notes://pages/{name}", {}, async ({ name }) => `# ${name}`);
app.prompt("review", { arguments: [{ name: "path" }] }, ({ path }) => `Review ${path ?? "everything"}.`);
// @ts-expect-error: the template has no variable `title`
app.resourceTemplate("notes://books/{name}", {}, async ({ title }) => String(title));
const registration: Registered = await app.connect({ timeoutMs: 20000, signal: AbortSignal.timeout(30000) });
if (!(registration.appLabel.length > 0) || ConnectTimeout.name !== "ConnectTimeout") throw new Error("unexpected");
console.log("connected");
process.stdin.on("end", () => void app.close());
process.stdin.resume();
"""

# The same package through `require` in TypeScript: the "require" condition's declarations.
TS_CJS_CHECK = """
import toolbridge = require("@toolbridge/app");

const app: toolbridge.App = new toolbridge.App({ name: "PkgCts" });
console.log(typeof app.connect, toolbridge.ToolError.name);
"""

TS_CONFIG = {
    "compilerOptions": {
        "target": "ES2022", "module": "nodenext", "moduleResolution": "nodenext", "strict": True,
        "skipLibCheck": False, "types": ["node"], "outDir": "out", "rootDir": ".",
    },
    "files": ["app.ts", "check.cts"],
}


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`npm pack` of clients/typescript (its `prepare` script builds the ESM and CommonJS output)."""
    out = tmp_path_factory.mktemp("pack")
    result = subprocess.run([npm(), "pack", "--pack-destination", str(out), "--loglevel=error"], cwd=TS_CLIENT,
                            capture_output=True, text=True, timeout=600, env=node_env())
    assert result.returncode == 0, f"npm pack failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    (packed,) = out.glob("toolbridge-app-*.tgz")
    return packed


def _members(tarball: Path) -> set[str]:
    with tarfile.open(tarball) as archive:
        return {name.removeprefix("package/") for name in archive.getnames()}


def test_the_tarball_holds_both_builds_and_no_tests(tarball: Path) -> None:
    members = _members(tarball)
    for build in ("dist/src", "dist/cjs"):
        assert {f"{build}/index.js", f"{build}/index.d.ts", f"{build}/app.js", f"{build}/app.d.ts"} <= members
    assert {"dist/cjs/package.json", "package.json", "README.md", "src/index.ts"} <= members
    assert not [m for m in members if m.startswith(("dist/tests", "dist/fixtures", "tests/", "node_modules"))]
    with tarfile.open(tarball) as archive:
        manifest = json.loads(archive.extractfile("package/package.json").read())  # type: ignore[union-attr]
        marker = json.loads(archive.extractfile("package/dist/cjs/package.json").read())  # type: ignore[union-attr]
    assert marker == {"type": "commonjs"}
    assert "@types/node" in manifest["dependencies"], "App extends node's EventEmitter in the declarations"
    assert set(manifest["exports"]["."]) == {"import", "require"}
    assert "prepare" in manifest["scripts"]


def test_the_readme_links_work_inside_the_tarball(tarball: Path) -> None:
    """Relative links must name files the tarball holds (the repository is not there)."""
    members = _members(tarball)
    with tarfile.open(tarball) as archive:
        readme = archive.extractfile("package/README.md").read().decode()  # type: ignore[union-attr]
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    relative = [link.split("#")[0] for link in links if not re.match(r"^[a-z]+:|^#", link)]
    broken = [link for link in relative if link.startswith("..") or link.removeprefix("./") not in members]
    assert broken == [], f"README links that do not resolve inside the package: {broken}"


async def _run(*argv: str | Path, cwd: Path, timeout: float = 300) -> str:
    with trio.fail_after(timeout):
        result = await trio.run_process([str(a) for a in argv], cwd=cwd, capture_stdout=True, capture_stderr=True,
                                        check=False, env=node_env())
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{output[-6000:]}"
    return output


async def _project(tmp_path: Path, kind: str, tarball: Path, *extra: str) -> Path:
    project = tmp_path / kind
    project.mkdir()
    manifest = {"name": f"try-{kind}", "version": "1.0.0", "private": True,
                "type": "commonjs" if kind == "cjs" else "module"}
    (project / "package.json").write_text(json.dumps(manifest))
    await _run(npm(), "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball, *extra,
               cwd=project)
    return project


async def _call(home: Path, tool: str, *args: str, codes: tuple[int, ...] = (0,)) -> str:
    with trio.fail_after(60):
        result = await trio.run_process([sys.executable, "-m", "broker", "call", tool, "--home", str(home),
                                         "--quiet", *args], capture_stdout=True, capture_stderr=True, check=False,
                                        env=node_env())
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode in codes, (tool, result.returncode, output)
    return output


async def _serve_app(project: Path, script: str, home: Path, calls: list[tuple[str, list[str], str]]) -> None:
    """Run the app on the daemon of ``home``, wait for its "connected", make the calls (tool, expected text), then end its
    stdin, on which the app closes itself (goodbye) and exits."""
    app = await trio.lowlevel.open_process([node(), script, str(home)], cwd=project, env=node_env(),
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert app.stdin is not None and app.stdout is not None and app.stderr is not None
    try:
        seen = b""
        with trio.fail_after(60):
            while b"connected\n" not in seen:
                chunk = await app.stdout.receive_some(4096)
                if not chunk:
                    errors = await app.stderr.receive_some(65536)
                    pytest.fail(f"the app exited before it connected:\n{seen.decode()}\n{errors.decode()}")
                seen += chunk
        for tool, args, expected in calls:
            answer = await _call(home, tool, *args, codes=(0, 1))
            assert expected in answer, answer
        await app.stdin.aclose()
        await end_process(app, terminate=False)
        assert app.returncode == 0
    finally:
        await end_process(app)


async def test_an_es_module_project_imports_the_package_and_serves_a_call(
        tarball: Path, daemon: DaemonInfo, tmp_path: Path) -> None:
    project = await _project(tmp_path, "esm", tarball)
    (project / "app.mjs").write_text(ESM_APP)
    await _serve_app(project, "app.mjs", tmp_path / "home", [
        ("PkgEsm__echo", ["--arg", "text=hi"], "echo: hi"),
        ("PkgEsm__refuse", [], "refused by the CommonJS copy"),
    ])


async def test_a_commonjs_project_requires_the_package_and_serves_a_call(
        tarball: Path, daemon: DaemonInfo, tmp_path: Path) -> None:
    project = await _project(tmp_path, "cjs", tarball)
    (project / "app.js").write_text(CJS_APP)
    await _serve_app(project, "app.js", tmp_path / "home", [("PkgCjs__echo", ["--arg", "text=hi"], "echo: hi")])


async def test_a_typescript_nodenext_project_compiles_strictly_and_serves_a_call(
        tarball: Path, daemon: DaemonInfo, tmp_path: Path) -> None:
    lock = json.loads((TS_CLIENT / "package-lock.json").read_text())["packages"]
    versions = {name: lock[f"node_modules/{name}"]["version"] for name in ("typescript", "zod")}
    project = await _project(tmp_path, "ts", tarball, *(f"{name}@{version}" for name, version in versions.items()))
    (project / "app.ts").write_text(TS_APP)
    (project / "check.cts").write_text(TS_CJS_CHECK)
    (project / "tsconfig.json").write_text(json.dumps(TS_CONFIG))
    await _run(node(), project / "node_modules" / "typescript" / "bin" / "tsc", "-p", "tsconfig.json", cwd=project)
    assert "function ToolError" in await _run(node(), "out/check.cjs", cwd=project)
    await _serve_app(project, "out/app.js", tmp_path / "home", [("PkgTs__echo", ["--arg", "text=hi"], "echo: hi")])
