"""A TCP proxy on 127.0.0.1 in front of a test server, that a test can cut and restore, or freeze and thaw: the
server behind it (moto, say) keeps its state while its clients see the network go down (or go silent) and come
back."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator


class Proxy:
    """Forwards every connection to 127.0.0.1:`upstream`. cut(): every open connection is reset and new
    ones are refused (the port stops listening), as when a host goes down; restore(): it listens again on
    the same port."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._open = True
        self._frozen = False  # a partition: nothing gets through, nothing is closed
        self._held: list[socket.socket] = []
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _listen(self, port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return listener

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client = listener.accept()[0]
            except OSError:  # the listener was closed: cut
                return
            if self._frozen:
                self._held.append(client)  # accepted by the kernel, never answered
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            with self._lock:
                live = self._open  # False: cut while this one was being connected
                if live:
                    self._conns |= {client, server}
            if not live:
                self._drop(client, server)
                continue
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                if not self._frozen:  # else dropped, as packets into a partition
                    dst.sendall(data)
        self._drop(src, dst)

    def _drop(self, *socks: socket.socket) -> None:
        for sock in socks:
            with self._lock:
                self._conns.discard(sock)
            with contextlib.suppress(OSError):
                # Linger 0: close with a reset, as a peer that vanished, not a polite end of stream.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()

    def cut(self) -> None:
        self._listener.close()
        with self._lock:
            self._open = False
            conns = list(self._conns)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked in recv
        self._drop(*conns)

    def freeze(self) -> None:
        """A partition instead of a cut: open connections stay open but nothing gets through either way, and new
        ones are accepted and never answered (a host whose packets are dropped)."""
        self._frozen = True

    def thaw(self) -> None:
        self._frozen = False

    def restore(self) -> None:
        with self._lock:
            self._open = True
        self._listener = self._listen(self.port)

    def close(self) -> None:
        self.cut()
        for sock in self._held:
            sock.close()


@contextlib.contextmanager
def proxy(upstream: int) -> Iterator[Proxy]:
    p = Proxy(upstream)
    try:
        yield p
    finally:
        p.close()
