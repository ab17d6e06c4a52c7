"""The ssh config's ``Include`` globs, followed for ``l`` in the fleet dashboard
(gputop/tui/fleet/fleet_launch.py), within bounds: files read, directory entries looked at,
bytes, levels of nesting; each file once (an Include loop). Where a bound stopped the
reading, the advice says so. A real temporary HOME and thousands of real files; the bound is
asserted by counting what was opened and looked at, never by timing it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

import gputop.tui.fleet.fleet_launch as fleet_launch
from gputop.core.fleet.model import FleetGpu, FleetNode
from gputop.tui.fleet.fleet_launch import (
    MAX_CONFIG_FILES,
    MAX_INCLUDE_ENTRIES,
    launch_screen,
    read_ssh_config,
    ssh_destination,
)


class Counted:
    """The files opened and the directory entries looked at while the config is read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[str] = []
        self.entries = 0
        read, scandir = fleet_launch.read_regular_file, os.scandir

        def counted_read(path: Any, limit: int) -> Any:
            self.opened.append(str(path))
            return read(path, limit)

        def counted_scandir(path: Any = ".") -> Any:
            return _Entries(scandir(path), self)

        monkeypatch.setattr(fleet_launch, "read_regular_file", counted_read)
        monkeypatch.setattr(os, "scandir", counted_scandir)


class _Entries:
    def __init__(self, entries: Any, counted: Counted) -> None:
        self._entries, self._counted = entries, counted

    def __enter__(self) -> _Entries:
        return self

    def __exit__(self, *exc: object) -> None:
        self._entries.close()

    def close(self) -> None:
        self._entries.close()

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        for entry in self._entries:
            self._counted.entries += 1
            yield entry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def environ(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home)}


def flood(directory: Path, count: int, text: str = "Host h{i}\n") -> None:
    directory.mkdir(parents=True)
    for i in range(count):
        (directory / f"{i:05}.conf").write_text(text.format(i=i))


def test_an_include_matching_5000_files_reads_a_bounded_number_and_says_so(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flood(home / ".ssh" / "d", 5000)
    (home / ".ssh" / "config").write_text("Host gpu1\nInclude d/*\n")
    counted = Counted(monkeypatch)

    read = read_ssh_config(environ(home))

    assert len(counted.opened) <= MAX_CONFIG_FILES
    assert counted.entries <= MAX_INCLUDE_ENTRIES
    assert "gpu1" in read.patterns and len(read.patterns) <= 1 + MAX_CONFIG_FILES
    assert read.cut and "Include" in read.cut


def test_a_glob_over_the_whole_tree_looks_at_a_bounded_number_of_entries(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Include /*/*/*/*`` (here under the temporary HOME, 20 * 20 * 20 directories and a
    name matched nowhere): it walked every directory of every level."""
    tree = home / "tree"
    for a in range(20):
        for b in range(20):
            for c in range(20):
                (tree / f"{a}" / f"{b}" / f"{c}").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(f"Host gpu1\nInclude {tree}/*/*/*/none\n")
    counted = Counted(monkeypatch)

    read = read_ssh_config(environ(home))

    assert counted.entries <= MAX_INCLUDE_ENTRIES
    assert read.patterns == ["gpu1"] and read.cut


def test_thousands_of_include_lines_look_at_a_bounded_number_of_entries(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flood(home / ".ssh" / "d", 100)
    (home / ".ssh" / "config").write_text("Include d/*\n" * 5000 + "Host last\n")
    counted = Counted(monkeypatch)

    read = read_ssh_config(environ(home))

    assert counted.entries <= MAX_INCLUDE_ENTRIES
    assert len(counted.opened) <= MAX_CONFIG_FILES
    assert "last" in read.patterns and read.cut  # the config's own lines are all read


def test_includes_nested_past_the_depth_and_in_a_loop_stop(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh = home / ".ssh"
    (ssh / "config").write_text("Include n0\nInclude config\n")
    for level in range(10):
        (ssh / f"n{level}").write_text(f"Host deep{level}\nInclude n{level + 1}\nInclude config\n")
    counted = Counted(monkeypatch)

    read = read_ssh_config(environ(home))

    assert len(counted.opened) == len(set(counted.opened)) <= 1 + fleet_launch.MAX_INCLUDE_DEPTH
    assert "deep0" in read.patterns and "deep9" not in read.patterns
    assert read.cut and "levels" in read.cut


def test_a_config_within_the_bounds_is_read_whole_with_no_note(home: Path) -> None:
    flood(home / ".ssh" / "d", 10)
    (home / ".ssh" / "config").write_text("Include d/*.conf ~/.ssh/more\nHost gpu1\n")
    (home / ".ssh" / "more").write_text("Host more1\n")
    (home / ".ssh" / "d" / ".hidden.conf").write_text("Host hidden\n")  # glob(3) skips it

    read = read_ssh_config(environ(home))

    assert read.patterns == [*(f"h{i}" for i in range(10)), "more1", "gpu1"]
    assert read.cut == ""
    assert ssh_destination("h9", environ(home)) and not ssh_destination("hidden", environ(home))


def test_the_advice_says_the_config_was_read_in_part(home: Path) -> None:
    flood(home / ".ssh" / "d", 5000)
    (home / ".ssh" / "config").write_text("Include d/*\n")
    gpu = FleetGpu("0", index=0, uuid="GPU-1234abcd", free=True)
    node = FleetNode("gpu-x", "gputop", 1.0, hostnames={"gpu-x": 1}, gpus={"0": gpu})

    shown = launch_screen(node, 0.0, {**environ(home), "PATH": ""})

    assert isinstance(shown, Text)
    assert "nor a Host of your ssh config" in shown.plain
    assert "Your ssh config was read only in part: its Include lines were followed up to" in (
        shown.plain
    )


@pytest.mark.parametrize("item", ["d/*\0x", "a\0b", "/\0*/x", "~/.ssh/d/[", "~nobody-here/x"])
def test_an_include_no_path_can_be_names_nothing(home: Path, item: str) -> None:
    (home / ".ssh" / "d").mkdir()
    (home / ".ssh" / "config").write_text(f"Include {item}\nHost gpu1\n")
    read = read_ssh_config(environ(home))
    assert (read.patterns, read.cut) == (["gpu1"], "")
