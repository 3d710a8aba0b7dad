"""Issue 19 item 12: an OAuth-capable MCP client without the token sees toolbridge's message.

The clients are the official MCP SDKs' — PyPI ``mcp`` with its ``OAuthClientProvider``, and
npm ``@modelcontextprotocol/client`` (the Inspector's copy) with an ``authProvider`` — plugged in
as an OAuth-capable agent (Claude Code) has it. Any 401 starts that
provider's OAuth discovery and dynamic client registration, against a daemon that has neither,
and the user saw the registration's failure ("HTTP 404") instead of "send the token". The daemon
answers 403 without a challenge, which the client passes on as the JSON-RPC error it carries.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx2
import pytest
import trio
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from mcp_testkit import HTTPX_STREAM_WARNINGS, mcp_url, running_daemon

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]
PROBE = Path(__file__).with_name("oauth_probe.mjs")


class _MemoryStorage:
    """The provider's token storage: empty, as for a client that never logged in."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def _messages(exc: BaseException) -> list[str]:
    """The messages of ``exc`` and of everything grouped inside it."""
    if isinstance(exc, BaseExceptionGroup):
        return [m for inner in exc.exceptions for m in _messages(inner)]
    return [f"{type(exc).__name__}: {exc}"]


async def _redirect(url: str) -> None:
    raise AssertionError(f"the client was sent to an authorization page: {url}")


async def test_an_oauth_capable_client_without_the_token_shows_what_to_do(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info:
        url = mcp_url(info)
        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(redirect_uris=["http://127.0.0.1:1/callback"]),  # type: ignore[list-item]
            storage=_MemoryStorage(),
            redirect_handler=_redirect,
        )
        requested: list[str] = []

        async def record(request: httpx2.Request) -> None:
            requested.append(request.url.path)

        async with httpx2.AsyncClient(auth=provider, event_hooks={"request": [record]}, timeout=30) as http:
            with pytest.raises(Exception) as caught:
                async with Client(streamable_http_client(url, http_client=http)):
                    pass
        text = " | ".join(_messages(caught.value))
        assert "toolbridge token" in text and "Authorization: Bearer" in text, text
        # No OAuth discovery or registration was attempted: only the MCP endpoint was asked.
        assert requested and set(requested) == {"/mcp"}, requested


async def test_the_typescript_client_with_an_oauth_provider_shows_what_to_do(tmp_path: Path) -> None:
    """The same with the TypeScript SDK's client (npm), the library Claude Code is built on: on
    the old 401 it ran discovery and failed with "Dynamic Client Registration rejected (HTTP 404)",
    the very message users saw."""
    node = shutil.which("node")
    sdk = Path.home() / ".cache/toolbridge-inspector/node_modules/@modelcontextprotocol/client/dist/index.mjs"
    if node is None or not sdk.exists():
        pytest.fail(f"needs Node.js and the MCP Inspector's client library ({sdk}); `python3 dev.py test` installs them")
    async with running_daemon(tmp_path / "home") as info:
        with trio.fail_after(60):
            result = await trio.run_process([node, str(PROBE), str(sdk), mcp_url(info)], capture_stdout=True,
                                            capture_stderr=True, check=False)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    seen = json.loads(result.stdout)
    assert not seen["ok"]
    assert "toolbridge token" in seen["error"] and "Authorization: Bearer" in seen["error"], seen
    assert "Registration" not in seen["error"], seen
    assert not seen["registered"] and not seen["redirected"]
    assert set(seen["requests"]) == {"/mcp"}, seen["requests"]
