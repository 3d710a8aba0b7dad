// The TypeScript MCP client (npm @modelcontextprotocol/client, which the MCP Inspector brings) with an
// OAuth provider, as Claude Code has it: connects without a token and prints what happened as JSON.
// usage: node oauth_probe.mjs <path of the client's dist/index.mjs> <MCP url>  (test_mcp_http_oauth_clients.py)
import { pathToFileURL } from "node:url";
const [, , sdkPath, url] = process.argv;
const { Client, StreamableHTTPClientTransport } = await import(pathToFileURL(sdkPath).href);
const seen = { registered: false, redirected: false, requests: [] };
const authProvider = {
  get redirectUrl() { return "http://127.0.0.1:1/callback"; },
  get clientMetadata() { return { redirect_uris: ["http://127.0.0.1:1/callback"], client_name: "probe" }; },
  clientInformation() { return undefined; },
  saveClientInformation() { seen.registered = true; },
  tokens() { return undefined; },
  saveTokens() {},
  redirectToAuthorization() { seen.redirected = true; },
  saveCodeVerifier() {},
  codeVerifier() { return "x"; },
};
const recordingFetch = (input, init) => { seen.requests.push(new URL(String(input)).pathname); return fetch(input, init); };
const client = new Client({ name: "probe", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, fetch: recordingFetch });
try {
  await client.connect(transport);
  console.log(JSON.stringify({ ok: true, ...seen }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: `${error?.name}: ${error?.message}`, ...seen }));
}
process.exit(0);
