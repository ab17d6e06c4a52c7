"""The flood behind the exporter's server (docs/exporter.md, "Serving under a flood").

Three servers of the same page (the collector over the ``demo`` scenario), each run as a
service runs it (``RLIMIT_NOFILE`` 1,024), each flooded the same way from this process on
loopback: IDLE idle connections and HALF half-finished requests (paced, each connect waited
for, up to CONNECT_LIMIT_S), held for HOLD seconds while a scrape (5 s timeout) is tried
every half second; then every half-finished request completed at once, and the time until
a scrape answers again.

- ``gputop``: the exporter's own server (gputop/core/exporter/http_server.py);
- ``threaded``: prometheus_client's ``start_http_server`` (a thread per connection), the
  server before it;
- ``waitress``: waitress 3 serving prometheus_client's WSGI app, 2 threads,
  ``connection_limit`` 256 and ``channel_timeout`` 5 s. waitress is not a dependency:
  install it apart (``pip install --target DIR waitress``) and give ``--waitress-path DIR``.

    python tests/bench/exporter_flood_bench.py [--waitress-path DIR] [--hold S] [SERVER ...]

A benchmark, not a test: its name keeps pytest from collecting it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
DESCRIPTORS = 1024
IDLE, HALF = 1100, 1000
HOLD_S = 20.0
CONNECT_LIMIT_S = 30.0
BATCH, PACE_S = 4, 0.005
SCRAPE_TIMEOUT_S = 5.0
RECOVERY_LIMIT_S = 120.0
HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def serve(kind: str) -> None:
    """The child: serve the demo scenario's page with ``kind``, print the port, wait."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))
    from prometheus_client import CollectorRegistry, make_wsgi_app, start_http_server

    from gputop.core.exporter.collector import SnapshotCollector, sample_once
    from gputop.core.exporter.listen import ListenAddress
    from gputop.core.exporter.server import serve as gputop_serve
    from gputop.core.sampling.source import open_backend

    collector = SnapshotCollector()
    sample_once(open_backend("demo").sample, collector)
    if kind == "gputop":
        with gputop_serve(collector, ListenAddress("127.0.0.1", 0)) as port:
            print(port, flush=True)
            sys.stdin.read()
        return
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if kind == "threaded":
        server, _ = start_http_server(0, "127.0.0.1", registry)
        print(server.server_port, flush=True)
        sys.stdin.read()
        return
    import waitress.server

    server = waitress.server.create_server(
        make_wsgi_app(registry),
        host="127.0.0.1",
        port=0,
        threads=2,
        connection_limit=256,
        channel_timeout=5,
        cleanup_interval=1,
    )
    print(server.effective_port, flush=True)
    server.run()


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _scrape(port: int) -> float | None:
    started = time.monotonic()
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            response.read()
    except OSError:
        return None
    return time.monotonic() - started


def flood(kind: str, waitress_path: str | None, hold_s: float) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [waitress_path, str(REPO)]))}
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stdin is not None
    port = int(child.stdout.readline())
    server = psutil.Process(child.pid)
    selector = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    half: list[socket.socket] = []
    half_set: set[socket.socket] = set()
    started, established = time.monotonic(), 0

    def settle(timeout: float) -> None:
        nonlocal established
        for key, _ in selector.select(timeout=timeout):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            selector.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                established += 1
                if sock in half_set:
                    with contextlib.suppress(OSError):
                        sock.send(HALF_REQUEST)

    try:
        # Paced, BATCH at a time, so that the server's listen queue takes each in: a flood
        # all at once leaves most connects waiting in the kernel, never reaching the server.
        for number in range(IDLE + HALF):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            socks.append(sock)
            selector.register(sock, selectors.EVENT_WRITE)
            if number >= IDLE:
                half.append(sock)
                half_set.add(sock)
            if number % BATCH == BATCH - 1:
                settle(PACE_S)
        # Held means established: wait for every connect to end (or CONNECT_LIMIT_S)
        while selector.get_map() and time.monotonic() - started < CONNECT_LIMIT_S:
            settle(0.5)
        connecting_s = time.monotonic() - started
        cpu, since = _cpu(server), time.monotonic()
        took: list[float | None] = []
        threads = descriptors = 0
        while time.monotonic() - since < hold_s:
            took.append(_scrape(port))
            threads = max(threads, server.num_threads())
            descriptors = max(descriptors, server.num_fds())
            time.sleep(0.5)
        share = (_cpu(server) - cpu) / (time.monotonic() - since)
        for sock in half:
            with contextlib.suppress(OSError):
                sock.send(b"1\r\n\r\n")
        released, cpu = time.monotonic(), _cpu(server)
        while _scrape(port) is None and time.monotonic() - released < RECOVERY_LIMIT_S:
            pass
        recovery = time.monotonic() - released
        recovery_cpu = _cpu(server) - cpu
    finally:
        for sock in socks:
            sock.close()
        child.stdin.close()
        child.kill()
        child.wait()
    answered = [t for t in took if t is not None]
    return {
        "server": kind,
        "established": established,
        "connecting_s": round(connecting_s, 1),
        "scrapes": len(took),
        "answered": len(answered),
        "median_s": round(statistics.median(answered), 3) if answered else None,
        "max_s": round(max(answered), 3) if answered else None,
        "threads_max": threads,
        "descriptors_max": descriptors,
        "timeline": "".join("." if t is not None else "x" for t in took),
        "cpu_share_held": round(share, 3),
        "recovery_s": round(recovery, 2),
        "recovery_cpu_s": round(recovery_cpu, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve")
    parser.add_argument("--waitress-path")
    parser.add_argument("--hold", type=float, default=HOLD_S)
    parser.add_argument("servers", nargs="*", default=["gputop", "threaded", "waitress"])
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, IDLE + HALF + 256), hard))
    for kind in args.servers:
        print(flood(kind, args.waitress_path, args.hold), flush=True)


if __name__ == "__main__":
    main()
