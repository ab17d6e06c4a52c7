"""``pick --prometheus`` naming the cards it picks (found by attacking it): it printed each
free card's ``UUID`` label as the ``CUDA_VISIBLE_DEVICES`` entry, whatever the target said
it was. A target whose free card's ``UUID`` is ``0`` (or ``1,2``) sent the job to card 0
(cards 1 and 2) of the host it names, cards judged by nothing; a card with neither a UUID
nor an index it can be read by was printed ``None``. A UUID label is used only where it is
one entry naming a card by UUID (``GPU-``/``MIG-``, letters, digits, ``-`` and ``/``), else
the card's index; a card with neither is not picked. docs/fleet.md."""

from __future__ import annotations

import json

import pytest

from gputop.cli import fleet_cli
from gputop.cli.main import main
from gputop.core.fleet.model import Fleet, build_fleet
from gputop.core.prometheus.client import Sample

NOW = 1_800_000_000.0
REAL = "GPU-6d2a1f6e-8c4b-4d1e-9a3f-2b7c9e0d1a42"
IDLE = {"DCGM_FI_DEV_FB_USED": 0.0, "DCGM_FI_DEV_FB_FREE": 80000.0, "DCGM_FI_DEV_GPU_UTIL": 0.0}


def one_card(uuid: str | None, gpu: str) -> Fleet:
    target = {"job": "dcgm", "instance": "gpu1:9400"}
    labels = {**target, "gpu": gpu, "Hostname": "gpu1"} | ({"UUID": uuid} if uuid else {})
    cards = [Sample({**labels, "__name__": name}, NOW, v) for name, v in IDLE.items()]
    answers = {
        "up": [Sample(target, NOW, 1.0)],
        "scraped": [Sample(target, NOW, NOW - 1)],
        "scrapes": [Sample(target, NOW, 9.0)],
        "cards": cards,
    }
    return build_fleet("http://p", NOW, answers, 7)


@pytest.mark.parametrize(
    ("uuid", "gpu", "named"),
    [
        (REAL, "3", REAL),
        ("MIG-GPU-6d2a1f6e/1/0", "3", "MIG-GPU-6d2a1f6e/1/0"),
        ("0", "7", "7"),
        ("GPU-a,0", "7", "7"),
        ("GPU-a 1", "7", "7"),
        ("GPU-a\n1", "7", "7"),
    ],
)
def test_a_card_is_named_by_its_uuid_only_where_it_is_one(
    uuid: str,
    gpu: str,
    named: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(fleet_cli, "read_fleet", lambda *args, **kwargs: one_card(uuid, gpu))
    assert main(["pick", "--prometheus", "http://p:9090"]) == 0
    assert capsys.readouterr().out == f"gpu1 {named}\n"
    assert main(["pick", "--prometheus", "http://p:9090", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cuda_visible_devices"] == named


def test_a_card_that_cannot_be_named_is_not_picked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unnamed = one_card(None, "9" * 400)  # no UUID, an index no card has
    assert unnamed.nodes[0].free_gpus  # free by its figures
    monkeypatch.setattr(fleet_cli, "read_fleet", lambda *args, **kwargs: unnamed)
    assert main(["pick", "--prometheus", "http://p:9090"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "None" not in err
