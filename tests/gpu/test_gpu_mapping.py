"""``gputop map --json`` against the devices a CUDA process really gets, for every
CUDA_VISIBLE_DEVICES form this machine allows and both CUDA_DEVICE_ORDER values."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import compare
from gpu.conftest import PROBE, gputop_json, known_uuids, smi_list

ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "form" in metafunc.fixturenames:
        forms = compare.visible_device_forms(smi_list())
        ids = [label.replace(",", "").replace(" ", "-") for label, _ in forms]
        metafunc.parametrize("form", forms, ids=ids)
        metafunc.parametrize("order", ORDERS)


def test_map_matches_cuda_enumeration(result, gputop, env, form, order) -> None:
    label, visible = form
    extra = {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": order}
    cuda_env = {**env, **{k: v for k, v in extra.items() if v is not None}}
    seen = json.loads(
        subprocess.run(
            [sys.executable, str(PROBE), "enumerate"],
            capture_output=True,
            text=True,
            env=cuda_env,
            timeout=60,
            check=True,
        ).stdout
    )
    assert seen["status"] in ("ok", "no-device"), seen
    cuda_uuids = compare.name_cuda_uuids(seen["uuids"], known_uuids(smi_list()))
    document = gputop_json(gputop, "map", "--json", "--no-torch", extra=extra)
    result.numbers.update(
        {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": order, "driver": seen["status"]}
    )
    result.comparisons.append(
        compare.mapping_comparison(f"{label} ({visible!r}), {order}", document, cuda_uuids)
    )
    assert not result.failed, [c.to_json() for c in result.failed]
