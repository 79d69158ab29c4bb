"""Who may talk to `funes ui`, and who may change the memory through it.

The server listens on 127.0.0.1 only, yet a web page the user has open elsewhere can still make
their browser send requests to it (cross-site requests, DNS rebinding). Three checks, in one
ASGI middleware so no route can forget them:

- the client's address must be loopback (a proxy or a port forward would not be);
- the `Host` header must name this server (127.0.0.1, localhost or [::1] at its port): a
  rebound DNS name carries the attacker's host and is refused before any page is read;
- a request that changes the memory (any method but GET/HEAD) must carry this run's token
  (a random secret, only ever written into this server's own pages, which another origin
  cannot read) and, when the browser sends one, an `Origin` of this server;
  `Sec-Fetch-Site: cross-site` is refused too.

Every answer also forbids framing (clickjacking of the confirmation pages) and caching.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD"})
#: The largest form a mutation may send (a token and a few fields).
MAX_FORM = 16 << 10

SECURITY_HEADERS = (
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make Origin "null"
    (b"cache-control", b"no-store"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def is_loopback(host: str | None) -> bool:
    """Whether a client address is this machine's."""
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def allowed_hosts(port: int) -> frozenset[str]:
    """The `Host` values that name this server."""
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"})


def allowed_origins(port: int) -> frozenset[str]:
    """The `Origin` values of this server's own pages."""
    return frozenset(f"http://{h}" for h in allowed_hosts(port))


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name not in out:  # a repeated header counts once, as its first value
            out[name] = value.decode("latin-1")
    return out


async def _refuse(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The ASGI middleware that applies the checks above to every request."""

    def __init__(self, app: ASGIApp, *, port: int, token: str) -> None:
        self.app = app
        self.port = port
        self.token = token
        self.hosts = allowed_hosts(port)
        self.origins = allowed_origins(port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what the checks refuse; pass the rest on, with the security headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        if not is_loopback(client[0] if client else None):
            await _refuse(send, 403, "funes ui answers this machine only")
            return
        headers = _headers(scope)
        if headers.get("host", "").lower() not in self.hosts:
            await _refuse(send, 421, "funes ui: unknown Host; open the address funes ui printed")
            return
        if scope["method"] not in SAFE_METHODS:
            refusal = self._cross_site(headers)
            if refusal is None:
                receive, refusal = await self._check_token(receive)
            if refusal is not None:
                await _refuse(send, 403, refusal)
                return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_secured)

    def _cross_site(self, headers: dict[str, str]) -> str | None:
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            return "funes ui: refused a change asked by another site (Origin)"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return "funes ui: refused a change asked by another site (Sec-Fetch-Site)"
        return None

    async def _check_token(self, receive: Receive) -> tuple[Receive, str | None]:
        """Read the form body, check its token, and hand the body on to the route."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return receive, "funes ui: the request was cut off"
            body = message.get("body", b"")
            size += len(body)
            if size > MAX_FORM:
                return receive, "funes ui: form too large"
            chunks.append(body)
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        try:
            form = parse_qs(raw.decode("utf-8"), max_num_fields=32)
        except (UnicodeDecodeError, ValueError):
            form = {}
        given = (form.get("token") or [""])[0]
        if not hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8")):
            return receive, ("funes ui: missing or wrong run token; reload the page from the "
                             "address funes ui printed")
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        return replay, None
