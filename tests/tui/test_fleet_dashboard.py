"""The fleet dashboard (``gputop --prometheus``) driven by fleets built here (no Prometheus):
the header, a line per node at 80x24, sorting, the filter, a node's detail, the users' view,
hostile labels never read as markup, and a server that fails. docs/fleet.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.waiting import pilot_wait_for
from textual.widgets import DataTable, Static

from gputop.core.fleet.model import Fleet, FleetNode, build_fleet
from gputop.core.prometheus.client import PrometheusError, Sample
from gputop.core.remote.transport import SSH_CONFIG_ENV
from gputop.core.slurm.detect import slurm_commands_here
from gputop.tui.fleet.fleet_app import FleetApp, sorted_nodes
from gputop.tui.fleet.fleet_views import TextScreen
from gputop.tui.row_order import HeldOrder

NOW = 1_800_000_000.0
HOSTILE = "[@click=app.quit]evil[/]\x1b[2J"


def target(instance: str) -> dict[str, str]:
    return {"job": "dcgm", "instance": instance}


def cards(instance: str, host: str, used_mib: list[float], **extra: str) -> list[Sample]:
    samples = []
    for index, used in enumerate(used_mib):
        labels = {
            **target(instance),
            "gpu": str(index),
            "UUID": f"GPU-{host}-{index}",
            "Hostname": host,
        }
        for name, value in (
            ("DCGM_FI_DEV_FB_USED", used),
            ("DCGM_FI_DEV_FB_FREE", 80000.0 - used),
            ("DCGM_FI_DEV_GPU_UTIL", 90.0 if used else 0.0),
        ):
            samples.append(Sample({**labels, "__name__": name, **extra}, NOW, value))
    return samples


def fleet(count: int = 30) -> Fleet:
    up, scraped, scrapes, card_samples = [], [], [], []
    for n in range(count):
        instance = f"10.0.0.{n}:9400"
        host = HOSTILE if n == 3 else f"node-{n:02d}"
        rack = {"rack": f"r{n % 3}"} if n < 29 else {}
        up.append(Sample({**target(instance), **rack}, NOW, 0.0 if n == 5 else 1.0))
        scraped.append(Sample(target(instance), NOW, NOW - 2))
        scrapes.append(Sample(target(instance), NOW, 9.0))
        if n != 5:
            card_samples += cards(instance, host, [0.0] * (n % 4) + [30000.0] * (4 - n % 4))
    processes = [
        Sample(
            {
                **target("10.0.0.1:9400"),
                "__name__": "gputop_process_memory_used_bytes",
                "gpu": "1",
                "UUID": "GPU-node-01-1",
                "Hostname": "node-01",
                "pid": "4242",
                "user": "alice",
                "command": "python [b]train[/b].py",
            },
            NOW,
            30000.0 * 2**20,
        )
    ]
    users = [
        Sample(
            {
                **target("10.0.0.1:9400"),
                "__name__": "gputop_user_memory_used_bytes",
                "Hostname": "node-01",
                "user": "alice",
            },
            NOW,
            30000.0 * 2**20,
        ),
        Sample(
            {
                **target("10.0.0.1:9400"),
                "__name__": "gputop_last_sample_timestamp_seconds",
                "Hostname": "node-01",
            },
            NOW,
            NOW,
        ),
    ]
    answers = {
        "up": up,
        "scraped": scraped,
        "scrapes": scrapes,
        "cards": card_samples,
        "processes": processes,
        "nodes": users,
    }
    return build_fleet("http://prometheus:9090", NOW, answers, 7)


def app_of(source: Callable[[], Fleet], group_by: str | None = None) -> FleetApp:
    return FleetApp(source, "http://prometheus:9090", group_by)


def rows(app: FleetApp) -> list[list[str]]:
    table = app.query_one("#fleet-nodes", DataTable)
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


def header(app: FleetApp) -> str:
    return str(app.query_one("#fleet-header", Static).render())


async def test_the_header_and_a_line_per_node_free_first_at_80x24() -> None:
    app = app_of(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        assert header(app).startswith("30 nodes · 116 GPUs · ")
        assert " · 1 down · 0 stale" in header(app)
        shown = rows(app)
        assert len(shown) == 30
        assert [row[3] for row in shown[:7]] == ["3/4"] * 7  # free first
        assert shown[-1][1] == "down"
        # readable at 80x24: every column of a line fits
        table = app.query_one("#fleet-nodes", DataTable)
        assert table.virtual_size.width <= 80


async def test_sort_filter_and_a_nodes_detail() -> None:
    app = app_of(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.press("s")  # by name
        await pilot.pause()
        assert rows(app)[0][0].startswith("10.0.0.5")  # the down node, by its instance
        await pilot.press("slash", *"node-01")
        await pilot.pause()
        assert [row[0] for row in rows(app)] == ["node-01"]
        await pilot.press("enter", "enter")  # out of the filter, then open the node
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TextScreen)
        text = "".join(str(w.render()) for w in screen.query(Static))
        assert "GPU  1" in text and "4242" in text and "alice" in text
        assert "python [b]train[/b].py" in text  # as written: never markup
        await pilot.press("escape", "u")
        await pilot.pause()
        users = "".join(str(w.render()) for w in app.screen.query(Static))
        assert "alice" in users


async def test_a_hostile_host_name_is_shown_as_written_and_cleaned() -> None:
    app = app_of(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        names = [row[0] for row in rows(app)]
        row = names.index("[@click=app.quit]e")  # as written, cut to the column
        app.query_one("#fleet-nodes", DataTable).move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        text = "".join(str(w.render()) for w in app.screen.query(Static))
        assert "[@click=app.quit]evil[/]\\e[2J" in text and "\x1b" not in text
        assert app.is_running


async def test_a_failing_server_is_said_and_the_last_fleet_kept() -> None:
    calls = []

    def source() -> Fleet:
        calls.append(1)
        if len(calls) > 1:
            raise PrometheusError("Cannot reach Prometheus at http://prometheus:9090: refused.")
        return fleet(4)

    app = app_of(source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.press("r")
        await pilot_wait_for(pilot, lambda: app.error is not None, "the fleet", 10)
        await pilot.pause()
        assert "Cannot reach Prometheus" in header(app) and len(rows(app)) == 4


async def test_grouped_by_a_label_with_a_line_per_group() -> None:
    app = app_of(fleet, group_by="rack")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        shown = rows(app)
        titles = [row for row in shown if row[0].startswith("rack=")]
        assert [row[0] for row in titles] == ["rack=(none)", "rack=r0", "rack=r1", "rack=r2"]
        assert [row[1] for row in titles] == ["1 nodes", "10 nodes", "10 nodes", "9 nodes"]
        assert len(shown) == 30 + 4
        await pilot.press("enter")  # on a group's line: nothing opens
        await pilot.pause()
        assert not isinstance(app.screen, TextScreen)


async def test_launch_says_what_to_run_on_a_node_not_named_for_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that is no ssh destination (tests/real/test_fleet_launch_sshd.py launches on
    one) gets the command that would launch there; Slurm's where Slurm is here."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no hosts.toml, no ssh config
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(SSH_CONFIG_ENV, raising=False)
    app = app_of(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        names = [row[0] for row in rows(app)]
        app.query_one("#fleet-nodes", DataTable).move_cursor(row=names.index("node-02"))
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "advice", 10)
        text = "".join(str(w.render()) for w in app.screen.query(Static))
        assert "gputop run --hosts node-02 --auto 2 -- COMMAND" in text
        assert ("gputop run --slurm --gpus 2 -- COMMAND" in text) == slurm_commands_here()
        await pilot.press("escape")
        app.query_one("#fleet-nodes", DataTable).move_cursor(row=names.index("10.0.0.5:9400"))
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "advice", 10)
        text = "".join(str(w.render()) for w in app.screen.query(Static))
        assert "is down: nothing is launched there" in text


async def test_launch_reads_the_ssh_config_off_the_ui_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``l`` reads hosts.toml, the ssh config and what it includes (globs walked, files on
    NFS perhaps) in a worker thread: the dashboard draws and takes keys meanwhile."""
    import threading

    from gputop.tui.fleet import fleet_launch

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(SSH_CONFIG_ENV, raising=False)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host other\n")
    release, readers = threading.Event(), []
    real = fleet_launch.read_regular_file

    def slow(path: object, limit: int) -> object:
        readers.append(threading.current_thread())
        release.wait(10)
        return real(path, limit)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet_launch, "read_regular_file", slow)
    app = app_of(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        names = [row[0] for row in rows(app)]
        app.query_one("#fleet-nodes", DataTable).move_cursor(row=names.index("node-02"))
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: bool(readers), "the ssh config read", 10)
        await pilot.press("s")  # taken while the config is read
        await pilot.pause()
        assert app.sort != "free" and not isinstance(app.screen, TextScreen)
        release.set()
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "advice", 10)
    assert readers[0] is not threading.main_thread()


async def test_the_first_frame_comes_with_the_first_answers_then_the_cards() -> None:
    """``read_fleet``'s ``early``: the nodes, states and cards before the cards' figures."""
    import threading

    from gputop.core.fleet.model import build_fleet as build

    full = fleet()
    release = threading.Event()

    def progressive(early: Callable[[Fleet], None]) -> Fleet:
        answers = {"up": [Sample(target(f"10.0.0.{n}:9400"), NOW, 1.0) for n in range(3)]}
        answers["scraped"] = [Sample(target(f"10.0.0.{n}:9400"), NOW, NOW) for n in range(3)]
        answers["card_labels"] = [
            s
            for n in range(3)
            for s in cards(f"10.0.0.{n}:9400", f"node-{n:02d}", [0.0] * 4)
            if s.labels["__name__"] == "DCGM_FI_DEV_FB_USED"
        ]
        early(build("http://prometheus:9090", NOW, answers, 5, partial=True))
        release.wait(10)
        return full

    app = FleetApp(fleet, "http://prometheus:9090", progressive=progressive)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the first answers", 10)
        await pilot.pause()
        assert header(app).startswith("3 nodes · 12 GPUs · reading the cards… · 0 down")
        assert {row[4] for row in rows(app)} == {"····"} and {row[3] for row in rows(app)} == {
            "?/4"
        }
        release.set()
        await pilot_wait_for(pilot, lambda: app.fleet is full, "the whole fleet", 10)
        await pilot.pause()
        assert header(app).startswith("30 nodes · 116 GPUs · 42 free")


def sick_fleet() -> Fleet:
    """One node of 4 idle cards: GPU 1 with a row remap pending (warning), GPU 2 whose last
    Xid is 79 (critical): the health series the cards' query brings."""
    instance = "10.0.0.9:9400"
    labels = {**target(instance), "Hostname": "node-sick"}
    health = [
        Sample({**labels, "__name__": name, "gpu": gpu, "UUID": f"GPU-node-sick-{gpu}"}, NOW, v)
        for name, gpu, v in (
            ("DCGM_FI_DEV_ROW_REMAP_PENDING", "1", 1.0),
            ("DCGM_FI_DEV_XID_ERRORS", "2", 79.0),
        )
    ]
    answers = {
        "up": [Sample(target(instance), NOW, 1.0)],
        "scraped": [Sample(target(instance), NOW, NOW - 2)],
        "scrapes": [Sample(target(instance), NOW, 9.0)],
        "cards": cards(instance, "node-sick", [0.0] * 4) + health,
    }
    return build_fleet("http://prometheus:9090", NOW, answers, 8)


async def test_an_unhealthy_card_is_marked_on_the_node_s_line_and_in_its_detail() -> None:
    app = app_of(sick_fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        (row,) = rows(app)
        assert row[3] == "3/4" and row[4] == "Fw!F"  # the critical card is not free
        assert row[6].startswith("✖ GPU 2 Xid 79")  # the worst card's badge, first
        legend = str(app.query_one("#fleet-legend", Static).render())
        assert "! critical or lost" in legend and "w warning" in legend
        await pilot.press("enter")
        await pilot.pause()
        text = "".join(str(w.render()) for w in app.screen.query(Static))
        assert "✖ Xid 79 fell off the bus" in text and "⚠ row remap pending: reset" in text
        assert "critical: Xid 79 fell off the bus: " in text and "reboot" in text
        assert "warning: row remap pending: reset the GPU when it is idle" in text


async def test_question_mark_shows_the_fleets_keys_and_closes_again() -> None:
    from helpers.dashboard import plain_text
    from helpers.hostile import screen_text

    from gputop.tui.fleet.fleet_app import FLEET_KEY_HELP
    from gputop.tui.screens.help import HelpScreen

    app = app_of(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.press("question_mark")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help", 10)
        text = "".join(plain_text(w) for w in app.screen.query(Static))
        listed = {key for _, rows in FLEET_KEY_HELP for keys, _ in rows for key in keys.split()}
        shown_as = {"slash": "/", "question_mark": "?"}
        for binding in FleetApp.BINDINGS:  # every key the fleet binds is in its help
            if binding.system:  # ctrl+c, Textual's own key, the fleet's hint
                continue
            assert shown_as.get(binding.key, binding.key) in listed, binding.key
        assert "the users across the fleet" in text and "read the fleet again now" in text
        assert "escape, q or ? closes this" in screen_text(app)  # on its border
        await pilot.press("question_mark")
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "closed", 10)
        assert app.is_running


def utilised(utils: dict[str, float]) -> Fleet:
    """A node a name, each with one card at the given utilisation."""
    up, scraped, scrapes, card_samples = [], [], [], []
    for host, util in utils.items():
        instance = f"{host}:9400"
        up.append(Sample(target(instance), NOW, 1.0))
        scraped.append(Sample(target(instance), NOW, NOW - 2))
        scrapes.append(Sample(target(instance), NOW, 9.0))
        labels = {**target(instance), "gpu": "0", "UUID": f"GPU-{host}-0", "Hostname": host}
        for name, value in (
            ("DCGM_FI_DEV_FB_USED", 30000.0),
            ("DCGM_FI_DEV_FB_FREE", 50000.0),
            ("DCGM_FI_DEV_GPU_UTIL", util),
        ):
            card_samples.append(Sample({**labels, "__name__": name}, NOW, value))
    answers = {"up": up, "scraped": scraped, "scrapes": scrapes, "cards": card_samples}
    return build_fleet("http://prometheus:9090", NOW, answers, 7)


def test_by_utilisation_a_node_moves_only_when_clearly_past_another() -> None:
    held = HeldOrder()

    def hosts(utils: dict[str, float]) -> list[str]:
        return [node.host for node in sorted_nodes(utilised(utils).nodes, "utilisation", held)]

    assert hosts({"a": 50, "b": 60, "c": 40}) == ["b", "a", "c"]
    # a few points every scrape: the order holds, where a plain sort would swap a and b
    assert hosts({"a": 62, "b": 58, "c": 45}) == ["b", "a", "c"]
    assert hosts({"a": 55, "b": 61, "c": 49}) == ["b", "a", "c"]
    # clearly past (more than 10 points): moves at once
    assert hosts({"a": 75, "b": 61, "c": 49}) == ["a", "b", "c"]
    # never above one clearly larger, and a plain sort again when asked (o, s)
    held.resort()
    assert hosts({"a": 60, "b": 62, "c": 61}) == ["b", "c", "a"]


async def test_o_sorts_the_fleet_again_exactly() -> None:
    values = iter([{"a": 50, "b": 60}, {"a": 64, "b": 60}, {"a": 64, "b": 60}])
    app = app_of(lambda: utilised(next(values)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        app.sort = "utilisation"
        app.redraw()
        await pilot.pause()
        assert [row[0] for row in rows(app)] == ["b", "a"]
        await pilot.press("r")  # a: 64, b: 60, within the margin: held

        def read_again() -> bool:
            nodes = {node.host: node for node in app.fleet.nodes} if app.fleet else {}
            return "a" in nodes and [g.utilization_gpu for g in nodes["a"].gpus.values()] == [64]

        await pilot_wait_for(pilot, read_again, "the fleet read again", 10)
        await pilot.pause()
        assert [row[0] for row in rows(app)] == ["b", "a"]
        await pilot.press("o")
        await pilot.pause()
        assert [row[0] for row in rows(app)] == ["a", "b"]


async def test_a_refresh_rewrites_only_what_changed_in_the_same_lines() -> None:
    """The same nodes in the same order: the table keeps its rows and only the changed cells
    are written (a rebuild measured and rendered all of them again every refresh)."""
    values = iter([{"a": 50, "b": 60}, {"a": 50, "b": 90}])
    app = app_of(lambda: utilised(next(values)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        table = app.query_one("#fleet-nodes", DataTable)
        before = dict(table.rows)
        first = app.fleet
        await pilot.press("r")
        await pilot_wait_for(pilot, lambda: app.fleet is not first, "the fleet read again", 10)
        await pilot.pause()
        assert [row[4] for row in rows(app)] == ["5", "9"]  # b's card: busy, 90 %
        assert all(table.rows[key] is row for key, row in before.items())


async def test_a_refresh_that_says_the_same_writes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A line that says what it said keeps its very cells, and the header is not written
    again (each write lays the screen out and paints it again); a line that changed is made
    and written anew, and a header that changed is written."""
    values = iter([{"a": 50, "b": 60}, {"a": 50, "b": 60}, {"a": 50, "b": 90}])
    app = app_of(lambda: utilised(next(values)))
    written: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        table = app.query_one("#fleet-nodes", DataTable)
        head = app.query_one("#fleet-header", Static)
        original = head.update
        monkeypatch.setattr(
            head, "update", lambda line: (written.append(str(line)), original(line))
        )
        cells = [table.get_row_at(i) for i in range(table.row_count)]
        for _ in range(2):
            first = app.fleet
            await pilot.press("r")
            await pilot_wait_for(pilot, lambda f=first: app.fleet is not f, "read again", 10)
            await pilot.pause()
        now = [table.get_row_at(i) for i in range(table.row_count)]
        assert all(a is b for a, b in zip(now[0], cells[0], strict=True))  # a's: the same
        assert now[1][4] is not cells[1][4] and now[1][0] is cells[1][0]  # b's card changed
        assert written == []  # the header says the same: 2 nodes, 2 GPUs, none free
        app.sort = "name"
        app.redraw()
        assert len(written) == 1 and "sort name" in written[0]


async def test_only_the_gputop_command_settles_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the local dashboard (tests/tui/test_start_up.py): a fleet refresh makes about
    100,000 objects, which Python's default collector walked some 50 times a refresh."""
    from helpers.dashboard import stays_true

    from gputop.cli import dashboard as cli_dashboard
    from gputop.cli.main import build_parser
    from gputop.tui.fleet import fleet_app

    settled: list[str] = []
    monkeypatch.setattr(fleet_app, "SETTLE_AFTER_S", 0.05)
    monkeypatch.setattr(fleet_app, "settle_collector", lambda: settled.append("settled"))
    for tune in (False, True):
        app = FleetApp(fleet, "http://prometheus:9090", tune_collector=tune)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot_wait_for(pilot, lambda a=app: a.fleet is not None, "the fleet", 10)
            if tune:
                await pilot_wait_for(pilot, lambda: settled, "the collector settled")
            else:
                assert await stays_true(pilot, lambda: not settled, 0.3)
    assert settled == ["settled"]
    made: list[dict[str, object]] = []

    class Recorded:
        fatal_error = None
        return_code = 0

        def __init__(self, *given: object, **options: object) -> None:
            made.append(options)

        def run(self) -> None:
            return None

    monkeypatch.setattr(fleet_app, "FleetApp", Recorded)
    monkeypatch.setattr(cli_dashboard, "require_terminal", lambda: None)
    assert cli_dashboard.run(build_parser().parse_args(["--prometheus", "http://p:9090"])) == 0
    assert made and made[0]["tune_collector"] is True
    # The first read was begun before the app (before Textual loads): the app follows it.
    from gputop.core.fleet.read import FirstRead

    assert isinstance(getattr(made[0]["progressive"], "__self__", None), FirstRead)
    assert made[0]["node_figures"] is not None and made[0]["user_counts"] is not None


def lean_fleet() -> Fleet:
    """``fleet()`` as the dashboard reads it: without the cards' temperature and power."""
    whole = fleet()
    whole.every_figure = False
    return whole


async def test_a_nodes_temperature_and_power_are_read_when_it_is_opened() -> None:
    """The dashboard's refresh does not read them (its table does not show them): opening
    a node reads its cards' (one query), shows ``…`` meanwhile, then the figures, range
    checked; a failed read is said on the node's screen."""
    import threading

    asked: list[tuple[str, str]] = []
    release = threading.Event()

    def figures(node: FleetNode) -> list[Sample]:
        asked.append((node.job, node.instance))
        release.wait(10)
        if node.instance == "10.0.0.2:9400":
            raise PrometheusError("Prometheus at http://prometheus:9090 answered HTTP 503.")
        labels = {**target(node.instance), "gpu": "1", "UUID": f"GPU-{node.host}-1"}
        process = {**labels, "pid": "777", "user": "bob", "command": "python eval.py"}
        return [
            Sample({**process, "__name__": "gputop_process_sm_util_percent"}, NOW, 55.0),
            Sample({**labels, "__name__": "DCGM_FI_DEV_GPU_TEMP"}, NOW, 61.0),
            Sample({**labels, "__name__": "DCGM_FI_DEV_POWER_USAGE"}, NOW, 1e9),  # too large
            Sample({**labels, "__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0"}, NOW, 1.0),
            Sample({**target("10.0.0.7:9400"), "__name__": "DCGM_FI_DEV_GPU_TEMP"}, NOW, 5.0),
        ]

    app = FleetApp(lean_fleet, "http://prometheus:9090", node_figures=figures)

    def detail() -> str:
        return "".join(str(w.render()) for w in app.screen.query(Static))

    async with app.run_test(size=(100, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.press("s")  # by name: 10.0.0.5 (down), node-00, node-01, node-02, ...
        await pilot.press("slash", *"node-01", "enter", "enter")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "its screen", 10)
        assert "…" in detail() and asked == [("dcgm", "10.0.0.1:9400")]
        release.set()
        await pilot_wait_for(pilot, lambda: "61C" in detail(), "the temperature", 10)
        lines = detail().splitlines()
        (gpu1,) = [line for line in lines if line.startswith("GPU  1")]
        assert "61C" in gpu1 and "?" in gpu1 and "…" not in detail()  # 1 GW: unknown
        node = next(n for n in app.fleet.nodes if n.instance == "10.0.0.1:9400")  # type: ignore[union-attr]
        assert [g.temperature_c for g in node.sorted_gpus()] == [None, 61.0, None, None]
        assert "777" in detail() and "python eval.py" in detail()
        assert "4242" not in detail()  # the processes read now replace those read before
        assert node.gpus["GPU-node-01-0"].memory_used_bytes == 0  # not a figure it asked for
        await pilot.press("escape", "escape", "slash", *"node-02", "enter", "enter")
        await pilot_wait_for(pilot, lambda: "HTTP 503" in detail(), "the failure", 10)
        assert "temperature and power: Prometheus at http://prometheus:9090" in detail()


async def test_the_users_counts_are_read_when_their_view_opens_never_by_a_refresh() -> None:
    """The table shows only the users' memory: a refresh does not read their idle memory
    and GPU counts; ``u`` reads them once for the fleet it shows (``…`` meanwhile, range
    checked, a hostile name cleaned), again for a newer fleet; a failed read is said."""
    import threading

    from gputop.core.fleet.model import fill_user_counts
    from gputop.core.units import human_bytes

    asked: list[int] = []
    release = threading.Event()

    def lean() -> Fleet:
        whole = lean_fleet()
        whole.user_counts = False
        return whole

    def counts() -> list[Sample]:
        asked.append(len(asked))
        release.wait(10)
        if len(asked) > 1:
            raise PrometheusError("Prometheus at http://prometheus:9090 answered HTTP 503.")
        node = {**target("10.0.0.1:9400"), "Hostname": "node-01"}
        return [
            Sample({**node, "__name__": "gputop_user_gpus", "user": "alice"}, NOW, 2.0),
            Sample(
                {**node, "__name__": "gputop_user_idle_held_memory_bytes", "user": "alice"},
                NOW,
                3.0 * 2**30,
            ),
            Sample({**node, "__name__": "gputop_user_gpus", "user": HOSTILE}, NOW, 1.0),
            Sample({**node, "__name__": "gputop_user_gpus", "user": "bob"}, NOW, 1e300),
        ]

    app = FleetApp(lean, "http://prometheus:9090", user_counts=counts)

    def view() -> str:
        return "".join(str(w.render()) for w in app.screen.query(Static))

    async with app.run_test(size=(100, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        for _ in range(2):
            first = app.fleet
            await pilot.press("r")
            await pilot_wait_for(pilot, lambda f=first: app.fleet is not f, "a refresh", 10)
        assert asked == []
        assert [row[6] for row in rows(app) if row[0] == "node-01"] == ["alice"]  # by memory
        await pilot.press("u")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "the view", 10)
        (alice,) = [line for line in view().splitlines() if line.startswith("alice")]
        assert alice.split()[-3:] == ["…", "…", "1"] and asked == [0]
        release.set()
        await pilot_wait_for(pilot, lambda: "…" not in view(), "the counts", 10)
        (alice,) = [line for line in view().splitlines() if line.startswith("alice")]
        assert alice.split()[-3:] == [human_bytes(3 * 2**30), "2", "1"]
        (evil,) = [line for line in view().splitlines() if line.startswith("[@click")]
        assert evil.split()[-2:] == ["1", "1"]  # as written, never markup
        assert all(line.isprintable() for line in view().splitlines())
        assert "bob" not in view()  # 1e300 GPUs: unknown, so nothing of bob
        shown = app.fleet
        await pilot.press("escape", "u")  # the same fleet: not read again
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "the view", 10)
        assert "…" not in view() and asked == [0]
        await pilot.press("escape", "r")
        await pilot_wait_for(pilot, lambda: app.fleet is not shown, "a refresh", 10)
        assert asked == [0]
        await pilot.press("u")
        await pilot_wait_for(pilot, lambda: "HTTP 503" in view(), "the failure", 10)
        assert "idle memory and GPUs: Prometheus at http://prometheus:9090" in view()
        (alice,) = [line for line in view().splitlines() if line.startswith("alice")]
        assert alice.split()[-3:] == ["?", "?", "1"] and asked == [0, 1]
    whole = fleet()  # the full read's fleet, counts read: fill changes nothing of it
    users = whole.users
    fill_user_counts(whole, [])
    assert whole.users == users


def said(app: FleetApp) -> list[str]:
    return [str(n.message) for n in app._notifications]  # type: ignore[attr-defined]


async def test_ctrl_c_on_a_fleet_screen_says_to_close_it_first() -> None:
    """The fleet's node and user screens close on q: "Press q to quit" there closed the
    screen, and quit nothing."""
    app = app_of(fleet)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.press("u")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "the users")
        await pilot.press("ctrl+c")
        await pilot_wait_for(pilot, lambda: said(app), "a hint")
        assert said(app) == ["Press escape to close this screen, then q to quit."]
        await pilot.press("escape")
        await pilot_wait_for(pilot, lambda: len(app.screen_stack) == 1, "closed")
        await pilot.press("q")
        await pilot_wait_for(pilot, lambda: not app.is_running, "the fleet to quit")
