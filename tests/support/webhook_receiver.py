"""A webhook receiver for tests, run as a subprocess.

    python -m tests.support.webhook_receiver --log posts.jsonl [--host 127.0.0.2] [--fail-first N] [--secret S]

Binds port 0, prints ``{"port": P}`` and logs every POST as a JSON line:
time, path, the headers the crawler signs with, the raw body, the status it
answered, and whether the signature verifies with ``--secret``. The first
``--fail-first`` posts are answered 503.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import time

from aiohttp import web


def verify(secret: bytes, body: bytes, header: str) -> bool:
    algorithm, _, digest = (header or "").partition("=")
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return algorithm == "sha256" and hmac.compare_digest(digest, expected)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--secret", default="")
    args = ap.parse_args()
    log = open(args.log, "a", buffering=1)  # noqa: SIM115
    seen = {"posts": 0}

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen["posts"] += 1
        status = 503 if seen["posts"] <= args.fail_first else 200
        signature = request.headers.get("X-Firecrawl-Signature", "")
        log.write(json.dumps({"t": time.time(), "path": request.path_qs, "status": status, "signature": signature,
                              "event_id": request.headers.get("X-Crawler-Event-Id"),
                              "valid": verify(args.secret.encode(), body, signature),
                              "body": body.decode("utf-8", "replace")}) + "\n")
        return web.Response(status=status, text="ok" if status == 200 else "busy")

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, args.host, 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(json.dumps({"port": port}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
