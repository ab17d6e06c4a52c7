"""The fleet read from a real Prometheus (Debian's ``/usr/bin/prometheus``), started once for
this file, scraping many simulated nodes (one process, one port per node: dcgm-exporter's
format on some, gputop exporter's series on others, hostile label values on one), two real
``gputop exporter --fake demo`` processes (one fresh, one whose clock is frozen: a stuck
sampler), a target that never answers and a port nobody listens on. A second Prometheus
stands behind basic auth (a bcrypt hash in ``--web.config.file``). The queries of one
refresh are counted by Prometheus's own ``prometheus_http_requests_total``. docs/fleet.md.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers.fleet import (
    fleet_prometheus,
    instant_queries_answered,
    self_signed,
    simulated_nodes,
)
from helpers.prometheus import Prometheus, running_exporter
from helpers.waiting import wait_for

MIB = 1 << 20
HOSTILE_HOST = "evil\x1b]0;pwned\x07\x1b[2Jhost"
HOSTILE_POD = "pod\u202egnp.exe"
BUSY = {"used_mib": 40000, "util": 97}
NODES: list[dict[str, Any]] = [
    {
        "kind": "dcgm",
        "hostname": "dcgm-1",
        "gpus": [
            {},
            {},
            {"used_mib": 300, "util": 3},
            BUSY,
            BUSY,
            {"pod": "train-7", "namespace": "ml", "container": "main"},
            {"raw": {"DCGM_FI_DEV_FB_USED": "NaN", "DCGM_FI_DEV_GPU_TEMP": "+Inf"}},
            {"raw": {"DCGM_FI_DEV_GPU_UTIL": "-5", "DCGM_FI_DEV_POWER_USAGE": "1e300"}},
        ],
    },
    {"kind": "dcgm", "hostname": "dcgm-2", "gpus": [{}, {}, {}, {}]},
    {
        "kind": "dcgm",
        "hostname": HOSTILE_HOST,
        "labels_extra": {"rack": "r1\x1b[31m"},
        "gpus": [{"pod": HOSTILE_POD, "model": "H100\nforged line"}, {}],
    },
    {
        "kind": "gputop",
        "hostname": "gpu-a",
        "gpus": [
            {
                "used_mib": 30000,
                "util": 80,
                "processes": [{"pid": 11, "user": "sim-ann", "mib": 30000, "sm": 80}],
            },
            {"claim": "sim-bo"},
            {},
            {
                "used_mib": 20000,
                "util": 0,
                "processes": [{"pid": 12, "user": "sim-cid", "mib": 20000, "sm": 0}],
            },
            {"health": 2},  # idle, and critical by its node's gputop
        ],
    },
    {"kind": "gputop", "hostname": "gpu-stuck", "sample_age_s": 900, "gpus": [{}, {}]},
    {"kind": "silent", "hostname": "silent"},
    {  # idle cards, three of them failing (docs/health.md, the verdict)
        "kind": "dcgm",
        "hostname": "dcgm-sick",
        "gpus": [
            {"xid": 79},  # fell off the bus: critical
            {"raw": {"DCGM_FI_DEV_ROW_REMAP_PENDING": 1}},  # a warning: still free
            {"raw": {"DCGM_FI_DEV_ROW_REMAP_FAILURE": 1, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 4}},
            {},
            {},
        ],
    },
]
FREE = {"dcgm-1": 3, "dcgm-2": 4, HOSTILE_HOST: 1, "gpu-a": 1, "gpu-stuck": 0, "dcgm-sick": 3}


@dataclass
class Fleet:
    prometheus: Prometheus
    targets: list[str]
    closed: str
    fresh_exporter: str
    frozen_exporter: str
    guarded: Prometheus
    """Behind basic auth (ops, s3cret), scraping the first two nodes."""
    tls: Prometheus
    """Serving https with ``certificate``, scraping the second node."""
    certificate: Path


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    directory = tmp_path_factory.mktemp("fleet")
    exporter_args = ("--fake", "demo", "--listen", "127.0.0.1:0", "--interval", "1")
    with (
        simulated_nodes(directory, NODES) as targets,
        running_exporter(*exporter_args, frozen_at_s=None) as fresh,
        running_exporter(*exporter_args, frozen_at_s=30.0) as frozen,
    ):
        closed = f"127.0.0.1:{unused_port()}"
        exporters = [
            exporter.url.removeprefix("http://").removesuffix("/metrics")
            for exporter in (fresh, frozen)
        ]
        every = [*targets, closed, *exporters]
        cert, key = self_signed(directory)
        # the three started together: a Prometheus scrapes its targets first about 5 s after
        # it starts (its scrape manager's reload), the three waits in one
        with (
            fleet_prometheus(directory / "prometheus", every) as prometheus,
            fleet_prometheus(
                directory / "guarded", targets[:2], basic_auth=("ops", "s3cret")
            ) as guarded,
            fleet_prometheus(directory / "tls", targets[1:2], tls=(cert, key)) as tls,
        ):
            wait_for(
                lambda: _scraped_enough(prometheus, len(every)),
                "every target scraped a few times",
                90,
            )
            yield Fleet(prometheus, targets, closed, exporters[0], exporters[1], guarded, tls, cert)


def _scraped_enough(prometheus: Prometheus, count: int) -> bool:
    scrapes = prometheus.query('count_over_time(up{job="nodes"}[2m])')
    sampled = prometheus.query("gputop_last_sample_timestamp_seconds")
    return (
        len(scrapes) == count
        and all(float(s["value"][1]) >= 4 for s in scrapes)
        and (len(sampled) >= 3)
    )


def gputop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def snapshot_json(fleet: Fleet, *more: str) -> dict[str, Any]:
    done = gputop("snapshot", "--prometheus", fleet.prometheus.url, "--json", *more)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def by_instance(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["instance"]: node for node in document["nodes"]}


def test_every_node_with_its_state_free_cards_and_the_issues_schema(fleet: Fleet) -> None:
    document = snapshot_json(fleet)
    assert set(document) >= {"schema", "source", "url", "time", "summary", "nodes", "users"}
    assert document["source"] == "prometheus" and document["url"] == fleet.prometheus.url
    nodes = by_instance(document)
    assert set(nodes) == {*fleet.targets, fleet.closed, fleet.fresh_exporter, fleet.frozen_exporter}
    states = {instance: node["state"] for instance, node in nodes.items()}
    assert states[fleet.targets[5]] == "down" and states[fleet.closed] == "down"
    assert nodes[fleet.closed]["last_seen"] is None  # never up
    assert states[fleet.targets[4]] == "stale"  # gputop's last sample 15 minutes old
    assert states[fleet.frozen_exporter] == "stale"  # a sampler stuck at 1970
    assert states[fleet.fresh_exporter] == "up"
    for instance in fleet.targets[:4]:
        assert states[instance] == "up"
    free = {node["host"]: sum(gpu["free"] for gpu in node["gpus"]) for node in nodes.values()}
    for host, count in FREE.items():
        assert free[host] == count, host
    summary = document["summary"]
    assert summary["nodes"] == len(nodes) and summary["down"] == 2 and summary["stale"] == 2
    assert summary["gpus"] == sum(len(node["gpus"]) for node in nodes.values())
    assert summary["free_gpus"] == sum(free.values())
    gpu_keys = {
        "index",
        "uuid",
        "name",
        "memory_total_bytes",
        "memory_used_bytes",
        "utilization_gpu",
        "temperature_c",
        "power_w",
        "activity",
        "health",
        "claim",
        "processes",
        "pod",
        "namespace",
        "container",
        "free",
    }
    node_keys = {"host", "instance", "state", "last_seen", "labels", "gpus"}
    for node in nodes.values():
        assert node_keys <= set(node)
        for gpu in node["gpus"]:
            assert gpu_keys <= set(gpu)


def test_numbers_are_checked_and_absent_is_null_never_zero(fleet: Fleet) -> None:
    nodes = by_instance(snapshot_json(fleet))
    dcgm = nodes[fleet.targets[0]]["gpus"]
    assert [gpu["index"] for gpu in dcgm] == list(range(8))
    assert dcgm[0]["memory_total_bytes"] == 81559 * MIB and dcgm[0]["memory_used_bytes"] == 0
    assert dcgm[0]["processes"] is None and dcgm[0]["claim"] is None  # dcgm: not known
    assert dcgm[5]["pod"] == "train-7" and dcgm[5]["namespace"] == "ml" and not dcgm[5]["free"]
    assert dcgm[6]["memory_used_bytes"] is None and dcgm[6]["temperature_c"] is None
    assert not dcgm[6]["free"]  # memory unknown: never offered
    assert dcgm[7]["utilization_gpu"] is None and dcgm[7]["power_w"] is None
    assert dcgm[3]["activity"]["sm_active_percent"] == pytest.approx(97.0)
    gputop_node = nodes[fleet.targets[3]]["gpus"]
    assert gputop_node[0]["processes"][0]["user"] == "sim-ann"
    assert gputop_node[0]["processes"][0]["used_memory_bytes"] == 30000 * MIB
    assert gputop_node[1]["claim"] == {"user": "sim-bo", "until": None}
    assert gputop_node[2]["processes"] == [] and gputop_node[2]["free"]


def test_users_across_the_fleet(fleet: Fleet) -> None:
    users = {user["user"]: user for user in snapshot_json(fleet)["users"]}
    assert users["sim-ann"]["memory_used_bytes"] == 30000 * MIB
    assert users["sim-ann"]["idle_held_memory_bytes"] == 0
    assert users["sim-cid"]["idle_held_memory_bytes"] == 20000 * MIB
    assert users["sim-cid"]["gpus"] == 1 and users["sim-cid"]["nodes"] == 1
    assert users["alice"]["nodes"] == 1  # the real exporters' simulated alice, once: the
    # stuck one is stale, and what a stale node says is not who holds what now


def test_a_refresh_asks_a_few_queries_whatever_the_node_count(fleet: Fleet) -> None:
    """Counted by Prometheus itself: every node in 8 queries, and the same 8 for one."""
    before = instant_queries_answered(fleet.prometheus)
    snapshot_json(fleet)
    every = instant_queries_answered(fleet.prometheus) - before
    before = instant_queries_answered(fleet.prometheus)
    narrowed = snapshot_json(fleet, "--match", f'{{instance="{fleet.targets[1]}"}}')
    one = instant_queries_answered(fleet.prometheus) - before
    assert [node["host"] for node in narrowed["nodes"]] == ["dcgm-2"]
    assert every == one == 8


def test_the_table_cleans_every_label_and_says_the_totals(fleet: Fleet) -> None:
    done = gputop("snapshot", "--prometheus", fleet.prometheus.url, "--group-by", "cluster")
    assert done.returncode == 0, done.stderr
    summary = snapshot_json(fleet)["summary"]
    out = done.stdout
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "evil\\e]0;pwned" in out
    lines = out.splitlines()
    nodes, gpus, free = summary["nodes"], summary["gpus"], summary["free_gpus"]
    assert nodes == 10 and free >= sum(FREE.values())
    assert lines[0] == f"{nodes} nodes · {gpus} GPUs · {free} free · 2 down · 2 stale"
    assert f"cluster=a: {nodes} nodes, {free} free" in lines
    assert len(lines) == 2 + 1 + nodes + 1  # header, titles, the group, a line a node, legend


def test_pick_names_one_node_and_its_free_cards(fleet: Fleet) -> None:
    done = gputop("pick", "--prometheus", fleet.prometheus.url, "-n", "3", "--json")
    assert done.returncode == 0, done.stderr
    picked = json.loads(done.stdout)
    assert picked["host"] == "dcgm-1"  # the fullest node that fits
    assert picked["uuids"] == ["GPU-dcgm-1-0000", "GPU-dcgm-1-0001", "GPU-dcgm-1-0002"]
    plain = gputop("pick", "--prometheus", fleet.prometheus.url, "-n", "4")
    assert plain.returncode == 0 and plain.stdout.startswith("dcgm-2 GPU-dcgm-2-0000,")
    none = gputop("pick", "--prometheus", fleet.prometheus.url, "-n", "5")
    assert none.returncode == 1 and none.stdout == ""
    assert "No node has 5 free GPUs: the most on one node is 4 (dcgm-2)" in none.stderr
    assert "2 down and 2 stale nodes not counted" in none.stderr


def test_a_failing_card_is_marked_by_the_core_s_verdict_and_never_picked(fleet: Fleet) -> None:
    """dcgm-exporter's health series on dcgm-sick, gputop's verdict on gpu-a's GPU 4: read in
    the same 8 queries (test_a_refresh_asks_a_few_queries_whatever_the_node_count)."""
    nodes = {node["host"]: node for node in snapshot_json(fleet)["nodes"]}
    sick = nodes["dcgm-sick"]["gpus"]
    assert [gpu["health"]["verdict"] for gpu in sick] == [
        "critical",
        "warning",
        "critical",
        "ok",
        "ok",
    ]
    assert [gpu["free"] for gpu in sick] == [False, True, False, True, True]
    assert sick[0]["health"]["last_xid"] == 79 and not sick[0]["health"]["healthy"]
    assert sick[0]["health"]["reasons"][0]["reason"] == "Xid 79 fell off the bus"
    assert [r["reason"] for r in sick[2]["health"]["reasons"]] == [
        "row remapping failed",
        "4 uncorrectable ECC errors this boot",
    ]
    assert sick[1]["health"]["row_remap_pending"] is True and sick[3]["health"]["healthy"]
    judged = nodes["gpu-a"]["gpus"][4]
    assert judged["health"]["verdict"] == "critical" and not judged["free"]
    assert judged["health"]["reasons"][0]["reason"] == "critical by gputop on its node"
    assert nodes["gpu-a"]["gpus"][2]["health"]["verdict"] == "ok"
    table = gputop("snapshot", "--prometheus", fleet.prometheus.url)
    (line,) = [each for each in table.stdout.splitlines() if each.startswith("dcgm-sick ")]
    assert "3/5  [!w!FF]" in line and "✖ GPU 0 Xid 79 fell off the bus, +2 GPUs" in line
    instance = fleet.targets[6]
    only = ("--prometheus", fleet.prometheus.url, "--match", f'{{instance="{instance}"}}')
    picked = gputop("pick", *only, "-n", "3", "--json")
    assert picked.returncode == 0, picked.stderr
    assert json.loads(picked.stdout)["indices"] == [1, 3, 4]
    assert gputop("pick", *only, "-n", "4").returncode == 1  # 5 idle cards, 3 free


def test_the_default_url_comes_from_the_environment(fleet: Fleet) -> None:
    done = gputop(
        "pick", "--prometheus", "-n", "1", env={"GPUTOP_PROMETHEUS": fleet.prometheus.url}
    )
    assert done.returncode == 0, done.stderr
    unset = gputop("pick", "--prometheus", env={"GPUTOP_PROMETHEUS": ""})
    assert unset.returncode == 2 and "GPUTOP_PROMETHEUS" in unset.stderr


def test_a_server_that_is_not_prometheus_and_one_that_never_answers(fleet: Fleet) -> None:
    node_page = gputop("snapshot", "--prometheus", f"http://{fleet.targets[0]}", "--json")
    assert node_page.returncode == 1
    assert "did not answer as Prometheus's API does" in node_page.stderr
    silent = gputop("snapshot", "--prometheus", f"http://{fleet.targets[5]}", "--timeout", "2")
    assert silent.returncode == 1
    assert "did not answer within --timeout 2 s (for the whole refresh)" in silent.stderr
    assert "Traceback" not in node_page.stderr + silent.stderr


def test_basic_auth_from_a_private_file(fleet: Fleet, tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    auth.write_text("ops:s3cret\n", encoding="utf-8")
    auth.chmod(0o600)
    url = fleet.guarded.url

    def seen() -> bool:
        done = gputop(
            "snapshot", "--prometheus", url, "--prometheus-auth-file", str(auth), "--json"
        )
        return done.returncode == 0 and len(json.loads(done.stdout)["nodes"]) == 2

    wait_for(seen, "both nodes through basic auth", 60)
    refused = gputop("snapshot", "--prometheus", url)
    assert refused.returncode == 1 and "asks to sign in (HTTP 401)" in refused.stderr
    auth.chmod(0o644)
    readable = gputop("snapshot", "--prometheus", url, "--prometheus-auth-file", str(auth))
    assert readable.returncode == 2 and "other users can read or change it" in readable.stderr
    with_password = url.replace("http://", "http://ops:s3cret@")
    done = gputop("snapshot", "--prometheus", with_password, "--json")
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout and json.loads(done.stdout)["url"] == url
    wrong = gputop("snapshot", "--prometheus", url.replace("http://", "http://ops:zz9pw@"))
    assert wrong.returncode == 1 and "zz9pw" not in wrong.stderr


def test_tls_with_a_ca_of_ones_own(fleet: Fleet, tmp_path: Path) -> None:
    cert, server = fleet.certificate, fleet.tls
    args = ("snapshot", "--prometheus", server.url, "--json")

    def seen() -> bool:
        done = gputop(*args, "--prometheus-ca", str(cert))
        return done.returncode == 0 and len(json.loads(done.stdout)["nodes"]) == 1

    wait_for(seen, "the node over TLS", 60)
    unknown = gputop(*args)
    assert unknown.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in unknown.stderr
    not_ca = gputop(*args, "--prometheus-ca", str(tmp_path))
    assert not_ca.returncode == 2 and "--prometheus-ca" in not_ca.stderr
    plain = gputop(
        "snapshot",
        "--prometheus",
        server.url.replace("https:", "http:"),
        "--prometheus-ca",
        str(cert),
    )
    assert plain.returncode == 2 and "https://" in plain.stderr


class _Trickle(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        try:
            self.wfile.write(b'{"status":"success","data":{"resultType":"vector","result":[')
            self.wfile.flush()
            threading.Event().wait(30)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_one_deadline_for_the_whole_refresh() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = gputop("pick", "--prometheus", url, "--timeout", "1.5")
        assert done.returncode == 1
        assert "did not answer within --timeout 1.5 s (for the whole refresh)" in done.stderr
    finally:
        server.shutdown()
        server.server_close()


def test_the_first_answers_come_first_then_the_whole_fleet(fleet: Fleet) -> None:
    """``read_fleet``'s ``early`` (the dashboard's first frame): the nodes, their states and
    cards from the quick answers, no card free yet; then the whole fleet, in the same 8."""
    from gputop.core.fleet.read import read_fleet
    from gputop.core.prometheus.auth import server_for

    early = []
    before = instant_queries_answered(fleet.prometheus)
    whole = read_fleet(server_for(fleet.prometheus.url), early=early.append)
    assert instant_queries_answered(fleet.prometheus) - before == 8 == whole.queries
    (first,) = early
    assert first.partial and not whole.partial
    assert first.free_count == 0 < whole.free_count
    states = {node.instance: node.state for node in whole.nodes}
    assert {node.instance: node.state for node in first.nodes} == states
    assert first.gpu_count == whole.gpu_count


def test_the_dashboard_reads_a_nodes_temperature_and_power_when_it_is_opened(
    fleet: Fleet,
) -> None:
    """The dashboard's refresh leaves out the cards' temperature, power and activity and
    the processes (its table shows none of them); opening a node reads them for it (two
    queries), as the full read has them, range-checked (dcgm-1's +Inf temperature and
    1e300 W stay unknown)."""
    from gputop.core.fleet.fleet_text import holders, memory
    from gputop.core.fleet.model import Fleet as FleetModel
    from gputop.core.fleet.model import fill_figures
    from gputop.core.fleet.read import read_fleet, read_node_figures
    from gputop.core.prometheus.auth import server_for

    server = server_for(fleet.prometheus.url)

    def shown(fleet: FleetModel) -> dict[str, tuple[str, str, str, str]]:
        return {n.instance: (n.host, n.state, memory(n), holders(n)) for n in fleet.nodes}

    def same_scrapes() -> tuple[FleetModel, FleetModel] | None:
        """A full read and a lean one of the same scrapes (a live node's memory moves, and
        a read's answers may straddle a scrape): between two full reads that agree."""
        whole, lean = read_fleet(server), read_fleet(server, every_figure=False)
        scraped = [(n.instance, n.scraped_at) for n in whole.nodes]
        if scraped != [(n.instance, n.scraped_at) for n in lean.nodes]:
            return None
        return (whole, lean) if shown(read_fleet(server)) == shown(whole) else None

    whole, lean = wait_for(same_scrapes, "two reads of the same scrapes")
    assert not lean.every_figure and whole.every_figure
    assert [n.instance for n in lean.nodes] == [n.instance for n in whole.nodes]
    assert lean.free_count == whole.free_count
    wanted = {n.instance: n for n in whole.nodes}
    assert shown(lean) == shown(whole)
    for node in lean.nodes:  # what the table and a node's screen show of each card
        for key, gpu in node.gpus.items():
            full = wanted[node.instance].gpus[key]
            assert (gpu.index, gpu.uuid, gpu.name, gpu.pod, gpu.free, gpu.verdict) == (
                full.index,
                full.uuid,
                full.name,
                full.pod,
                full.free,
                full.verdict,
            )
    for node in lean.nodes:
        assert all(g.temperature_c is None and g.activity is None for g in node.gpus.values())
    node = next(n for n in lean.nodes if n.host == "dcgm-1")
    before = instant_queries_answered(fleet.prometheus)
    fill_figures(node, read_node_figures(server, node))
    assert instant_queries_answered(fleet.prometheus) - before == 2
    full = wanted[node.instance]
    for key, gpu in node.gpus.items():
        assert (gpu.temperature_c, gpu.power_w, gpu.activity) == (
            full.gpus[key].temperature_c,
            full.gpus[key].power_w,
            full.gpus[key].activity,
        )
    temps = [g.temperature_c for g in node.sorted_gpus()]
    assert temps[6] is None and temps[0] is not None and node.sorted_gpus()[7].power_w is None
    # gputop's exporter's node: its processes too, as the full read has them
    busy = next(n for n in lean.nodes if any(wanted[n.instance].gpus[k].processes for k in n.gpus))
    assert all(not g.processes for g in busy.gpus.values())
    fill_figures(busy, read_node_figures(server, busy))
    for key, gpu in busy.gpus.items():
        assert sorted(gpu.processes or [], key=repr) == sorted(
            wanted[busy.instance].gpus[key].processes or [], key=repr
        )
    assert any(gpu.processes for gpu in busy.gpus.values())


def test_the_dashboards_users_view_reads_the_users_counts_when_it_opens(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's refresh reads only the users' memory (its table shows no more): none
    of the queries it sends asks for ``gputop_user_gpus`` or the idle memory; the users'
    view reads them in one query (counted by Prometheus), and the users are then the full
    read's (of the same scrapes)."""
    from gputop.core.fleet import read as read_module
    from gputop.core.fleet.model import Fleet as FleetModel
    from gputop.core.fleet.model import fill_user_counts
    from gputop.core.fleet.read import read_fleet, read_user_counts
    from gputop.core.prometheus.auth import server_for

    server = server_for(fleet.prometheus.url)
    asked: list[str] = []
    original = read_module.query

    def logged(where: Any, promql: str, *args: Any, **options: Any) -> Any:
        asked.append(promql)
        return original(where, promql, *args, **options)

    with monkeypatch.context() as patch:
        patch.setattr(read_module, "query", logged)
        lean = read_fleet(server, every_figure=False)
    assert len(asked) == lean.queries == 7
    assert not any("gputop_user_gpus" in q or "user_idle" in q for q in asked)
    assert any("gputop_user_memory_used_bytes" in q for q in asked)
    assert not lean.user_counts and all(u.gpus == 0 for u in lean.users)
    assert lean.users and all(u.idle_held_memory_bytes is None for u in lean.users)

    def same_scrapes() -> tuple[FleetModel, FleetModel] | None:
        """The full read, and the dashboard's with the counts read, between two full reads
        that agree (a live exporter's figures move)."""
        whole, lean = read_fleet(server), read_fleet(server, every_figure=False)
        before = instant_queries_answered(fleet.prometheus)
        fill_user_counts(lean, read_user_counts(server))
        assert instant_queries_answered(fleet.prometheus) - before == 1
        return (whole, lean) if read_fleet(server).users == whole.users else None

    whole, filled = wait_for(same_scrapes, "two full reads that agree")
    assert filled.user_counts and filled.users == whole.users
    assert any(u.gpus for u in filled.users) and any(u.idle_held_memory_bytes for u in filled.users)


@pytest.mark.parametrize(
    "value",
    ['a"b', "back\\slash", "new\nline\ttab", "\x1b]0;x\x07", "\x7f\u2028é😀", "\\u0041", ""],
)
def test_a_label_value_is_quoted_as_prometheus_reads_it(fleet: Fleet, value: str) -> None:
    """``promql_string``, read back by Prometheus's own parser: the same text."""
    from gputop.core.fleet.queries import promql_string
    from gputop.core.prometheus.client import query

    quoted = promql_string(value)
    assert quoted is not None
    (sample,) = query(fleet.prometheus.url, f'label_replace(vector(1), "v", {quoted}, "", "")')
    assert sample.labels.get("v", "") == value
