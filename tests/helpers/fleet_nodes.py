"""Many simulated GPU nodes in one process, one port per node, for a real Prometheus to
scrape (tests/real/test_fleet_prometheus.py, tests/bench/fleet_bench.py; docs/fleet.md).

``python tests/helpers/fleet_nodes.py SPEC.json`` reads a list of nodes, serves each on its
own loopback port and prints one line, ``PORTS [..]``, the ports in the spec's order. A node:

- ``kind``: ``dcgm`` (dcgm-exporter's text format, its metric and label names), ``gputop``
  (those and ``gputop exporter``'s own series: processes, users, claims, last sample), or
  ``silent`` (accepts connections and never answers: a target that times out);
- ``hostname``, ``gpus``: a list of cards, each ``{"used_mib", "total_mib", "util", "temp",
  "power", "sm_active", "xid", "health", "pod", "claim", "processes": [{"pid", "user",
  "command", "mib", "sm"}], "raw": {"METRIC": "text of the value"}}`` (every key optional;
  ``xid``: the last Xid, ``DCGM_FI_DEV_XID_ERRORS``, 0 for none, as both exporters give it;
  ``health``: gputop's ``gputop_gpu_health``, 0 ok, 1 warning, 2 critical; a failing card's
  other health series, ``DCGM_FI_DEV_ROW_REMAP_PENDING`` say, go in ``raw``);
- ``sample_age_s``: how old gputop's last sample says it is (a stuck sampler);
- ``labels_extra``: more labels on every card series (hostile values, say).

Label values are written escaped as the text format says (``\\``, ``"``, newline); anything
else (escape sequences, bidirectional overrides) goes through as it is, as a careless
exporter would send it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DRIVER = "550.54.15"


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, object]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _line(name: str, labels: dict[str, object], value: object) -> str:
    return f"{name}{_labels(labels)} {value}\n"


def card_labels(node: dict[str, Any], index: int, card: dict[str, Any]) -> dict[str, object]:
    labels: dict[str, object] = {
        "gpu": index,
        "UUID": card.get("uuid", f"GPU-{node['hostname']}-{index:04d}"),
        "pci_bus_id": f"00000000:{index + 7:02X}:00.0",
        "device": f"nvidia{index}",
        "modelName": card.get("model", "NVIDIA H100 80GB HBM3"),
        "Hostname": node["hostname"],
        "DCGM_FI_DRIVER_VERSION": DRIVER,
        "container": card.get("container", ""),
        "namespace": card.get("namespace", ""),
        "pod": card.get("pod", ""),
    }
    labels.update(node.get("labels_extra", {}))
    return labels


def render(node: dict[str, Any]) -> str:
    """The node's page, but for gputop's last-sample line (added at each scrape)."""
    out: list[str] = []
    for index, card in enumerate(node.get("gpus", [])):
        labels = card_labels(node, index, card)
        total = card.get("total_mib", 81559)
        used = card.get("used_mib", 0)
        values = {
            "DCGM_FI_DEV_FB_USED": used,
            "DCGM_FI_DEV_FB_FREE": total - used,
            "DCGM_FI_DEV_GPU_UTIL": card.get("util", 0),
            "DCGM_FI_DEV_GPU_TEMP": card.get("temp", 35),
            "DCGM_FI_DEV_POWER_USAGE": card.get("power", 70.5),
            "DCGM_FI_PROF_SM_ACTIVE": card.get("sm_active", card.get("util", 0) / 100),
            "DCGM_FI_DEV_XID_ERRORS": card.get("xid", 0),
        }
        values.update(card.get("raw", {}))
        for name, value in values.items():
            out.append(_line(name, labels, value))
        if node["kind"] != "gputop":
            continue
        plain = {k: v for k, v in labels.items() if k not in ("container", "namespace", "pod")}
        processes = card.get("processes", [])
        out.append(_line("gputop_gpu_processes", plain, len(processes)))
        out.append(_line("gputop_gpu_lost", plain, 0))
        out.append(_line("gputop_gpu_health", plain, card.get("health", 0)))
        if card.get("claim"):
            out.append(_line("gputop_gpu_claimed", {**plain, "user": card["claim"]}, 1))
        for process in processes:
            pl = {
                **plain,
                "pid": process.get("pid", 1000),
                "user": process.get("user", ""),
                "command": process.get("command", "python train.py"),
                "gputop_job": process.get("gputop_job", ""),
                "slurm_job": process.get("slurm_job", ""),
            }
            out.append(_line("gputop_process_memory_used_bytes", pl, process.get("mib", 0) << 20))
            out.append(_line("gputop_process_sm_util_percent", pl, process.get("sm", 0)))
    if node["kind"] == "gputop":
        users: dict[str, list[float]] = {}
        for card in node.get("gpus", []):
            seen = set()
            for process in card.get("processes", []):
                figures = users.setdefault(process.get("user", ""), [0.0, 0.0, 0.0, 0.0])
                figures[0] += process.get("mib", 0) << 20
                figures[1] += (process.get("mib", 0) << 20) if process.get("sm", 0) < 5 else 0
                figures[2] += 1
                if process.get("user", "") not in seen:
                    figures[3] += 1
                    seen.add(process.get("user", ""))
        for user, (mem, idle, count, gpus) in users.items():
            labels = {"Hostname": node["hostname"], "user": user}
            out.append(_line("gputop_user_memory_used_bytes", labels, mem))
            out.append(_line("gputop_user_idle_held_memory_bytes", labels, idle))
            out.append(_line("gputop_user_processes", labels, count))
            out.append(_line("gputop_user_gpus", labels, gpus))
    return "".join(out)


class Handler(BaseHTTPRequestHandler):
    server: NodeServer

    def do_GET(self) -> None:
        node = self.server.node
        body = self.server.page
        if node["kind"] == "gputop":
            at = time.time() - node.get("sample_age_s", 0.0)
            body += _line(
                "gputop_last_sample_timestamp_seconds", {"Hostname": node["hostname"]}, at
            )
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):  # a scrape that timed out hung up
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class NodeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, node: dict[str, Any]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.node = node
        self.page = render(node)


def _never_answer(listening: socket.socket) -> None:
    """Take every connection and read it until its client gives up, answering nothing. A
    connection never accepted would stay in the backlog after its client closed: 64 of
    Prometheus's scrapes filled it, and a client's connect then timed out, a host that is
    down rather than one that does not answer."""
    while True:
        connection, _ = listening.accept()
        threading.Thread(target=_drain, args=(connection,), daemon=True).start()


def _drain(connection: socket.socket) -> None:
    with connection:
        while connection.recv(65536):
            pass


def main(path: str) -> None:
    with open(path, encoding="utf-8") as spec:
        nodes = json.load(spec)
    ports: list[int] = []
    keep: list[socket.socket] = []
    for node in nodes:
        if node["kind"] == "silent":  # accepts, reads, never answers: every scrape times out
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(64)
            keep.append(sock)
            threading.Thread(target=_never_answer, args=(sock,), daemon=True).start()
            ports.append(sock.getsockname()[1])
            continue
        server = NodeServer(node)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        ports.append(server.server_address[1])
    print("PORTS " + json.dumps(ports), flush=True)
    sys.stdin.read()  # until the test closes our standard input


if __name__ == "__main__":
    main(sys.argv[1])
