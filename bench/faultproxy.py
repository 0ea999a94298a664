"""A fault-injecting TCP proxy on loopback, in a thread of its own: for
each host address, it listens on ``(host, port)`` and passes bytes to
``(host, target_port)``, unless told otherwise:

- ``slow(seconds)``: every chunk, both ways, waits ``seconds`` first (a
  slow network);
- ``cut()``: every open connection is reset, and new ones too, until
  ``mend()`` (a network cut);
- ``hang(host)``: connections to ``host`` are taken and never answered,
  until ``mend()`` ends the hang for new connections (a web server that
  hangs; the ones it took stay unanswered until the client gives up).

Used by ``bench/chaos.py`` between the workers and bench.webgen's server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

__all__ = ["FaultProxy"]


class FaultProxy:
    def __init__(self, hosts: Sequence[str], target_port: int) -> None:
        self.hosts, self.target_port = list(hosts), target_port
        self.port = 0
        self.delay = 0.0
        self.cutting = False
        self.hung: set[str] = set()
        self._open: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="faultproxy")

    # -- control (from any thread) ---------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the fault proxy did not start")
        return self

    def slow(self, seconds: float) -> None:
        self.delay = seconds

    def cut(self) -> None:
        self.cutting = True
        self._loop.call_soon_threadsafe(self._reset_all)

    def hang(self, host: str) -> None:
        self.hung.add(host)

    def mend(self) -> None:
        self.delay, self.cutting = 0.0, False
        self.hung.clear()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # -- the proxy ---------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()

    async def _listen(self) -> None:
        first = await asyncio.start_server(self._serve, self.hosts[0], 0, backlog=1024)
        self.port = first.sockets[0].getsockname()[1]
        for host in self.hosts[1:]:
            await asyncio.start_server(self._serve, host, self.port, backlog=1024)

    def _reset_all(self) -> None:
        for writer in list(self._open):
            writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host = writer.get_extra_info("sockname")[0]
        if self.cutting:
            writer.transport.abort()
            return
        self._open.add(writer)
        try:
            if host in self.hung:
                try:
                    while await reader.read(65536):  # taken, never answered: until the client gives up
                        pass
                except OSError:  # the client reset it
                    pass
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(host, self.target_port)
            except OSError:
                return
            self._open.add(up_writer)
            try:
                await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
            finally:
                self._open.discard(up_writer)
                up_writer.transport.abort()
        finally:
            self._open.discard(writer)
            if self.cutting:
                writer.transport.abort()
            else:
                writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self.delay:
                    await asyncio.sleep(self.delay)
                if self.cutting:
                    return
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            return
