"""Network faults for tests that run real processes: a TCP proxy that can be killed, frozen and restored, and a
listener that accepts connections and never answers.

    proxy = TCPProxy(("127.0.0.1", 5432)).start()   # forwards 127.0.0.1:proxy.port to PostgreSQL
    proxy.freeze()    # connections stay open, bytes stop moving, new connections are accepted and stall
    proxy.kill()      # the listener and every connection close; new connections are refused
    proxy.restore()   # back to forwarding (listening again on the same port after a kill)
"""

import selectors
import socket
import threading
import time

from tests.live import free_port


class TCPProxy:
    """Forwards 127.0.0.1:`port` to `target` in a background thread, one selector for every connection."""

    def __init__(self, target: tuple[str, int], port: int | None = None):
        self.target = target
        self.port = port or free_port()
        self.frozen = threading.Event()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # Control, from the test.

    def start(self) -> "TCPProxy":
        self._listen()
        self._thread = threading.Thread(target=self._run, name=f"tcp-proxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def freeze(self) -> None:
        """Stop moving bytes either way; the peers see healthy TCP connections that never answer."""
        self.frozen.set()

    def kill(self) -> None:
        """Close the listener and every connection, as a crashed server would; new connections are refused."""
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            for sock in list(self._pairs):
                self._close(sock)

    def restore(self) -> None:
        """Forward again: unfreeze, and listen again if killed. Connections made while frozen resume."""
        with self._lock:
            if self._listener is None:
                self._listen()
        self.frozen.clear()

    def stop(self) -> None:
        self._stop.set()
        self.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def connection_count(self) -> int:
        with self._lock:
            return len(self._pairs) // 2

    # The forwarding loop.

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener

    def _close(self, sock: socket.socket) -> None:
        peer = self._pairs.pop(sock, None)
        sock.close()
        if peer is not None:
            self._pairs.pop(peer, None)
            peer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                watched = [self._listener] if self._listener is not None else []
                if not self.frozen.is_set():
                    watched += list(self._pairs)
                selector = selectors.DefaultSelector()
                for sock in watched:
                    selector.register(sock, selectors.EVENT_READ)
            try:
                ready = selector.select(timeout=0.05) if watched else []
            except (OSError, ValueError):  # a socket was closed by kill() between listing and waiting
                ready = []
            selector.close()
            if not watched:
                time.sleep(0.05)
            with self._lock:
                for key, _ in ready:
                    sock = key.fileobj
                    if sock is self._listener:
                        self._accept()
                    elif sock in self._pairs and not self.frozen.is_set():
                        self._forward(sock)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
        self._pairs[client] = upstream
        self._pairs[upstream] = client

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock)
            return
        peer = self._pairs[sock]
        try:
            peer.setblocking(True)
            peer.sendall(data)
            peer.setblocking(False)
        except OSError:
            self._close(sock)


class SilentListener:
    """Accepts TCP connections on 127.0.0.1:`port` and never reads or writes: a hung server."""

    def __init__(self):
        self.port = free_port()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(128)
        self._accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._run, name=f"silent-{self.port}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._accepted.append(sock)

    def close(self) -> None:
        self._listener.close()
        for sock in self._accepted:
            sock.close()


def closed_port() -> int:
    """A port nothing listens on: connections to it are refused at once."""
    return free_port()
