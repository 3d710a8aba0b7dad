// The package is `"type": "module"`, so Node would read dist/cjs/*.js as ES modules: this
// marker makes that folder CommonJS (for `require("@toolbridge/app")` and its .d.ts files).
import { mkdirSync, writeFileSync } from "node:fs";

const folder = new URL("../dist/cjs/", import.meta.url);
mkdirSync(folder, { recursive: true });
writeFileSync(new URL("package.json", folder), JSON.stringify({ type: "commonjs" }) + "\n");
