"""`gputop pick`: a CUDA_VISIBLE_DEVICES value for scripts, or exit 1 saying why not."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers.jobs import asked_job
from helpers.scenarios import minimal_gpu

from gputop.cli import pick_command
from gputop.cli.main import main
from gputop.core.errors import GputopError
from gputop.core.visibility import resolve_visibility

WriteScenario = Callable[..., str]

V100_2 = "GPU-f892c819-e030-1568-a2c9-521972500816"
V100_3 = "GPU-80af15aa-d49f-aed3-cd11-01700346d7d9"
MIXED_H100 = "GPU-323243e0-994c-5111-85c0-835ba77f1ca3"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("LOGNAME", "tester")  # what getpass.getuser() answers
    for name in ("GPUTOP_FAKE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)


def run_pick(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["pick", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def idle_gpu(position: int, **overrides: Any) -> dict[str, Any]:
    """An idle A100 at PCI slot ``position``, free by the default policy."""
    fields: dict[str, Any] = {
        "uuid": f"GPU-{position}1111111-aaaa-bbbb-cccc-000000000000",
        "pci_bus_id": f"00000000:{position + 1:02X}:00.0",
        "utilization_gpu": 0,
        "memory_used_mib": 0,
    }
    fields.update(overrides)
    return minimal_gpu(**fields)


@dataclass
class FakeJob:
    id: int
    physical_indices: tuple[int, ...]
    uuids: tuple[str, ...] = ()


@dataclass
class FakeStore:
    jobs: list[FakeJob]
    notices: list[str] = field(default_factory=list)
    closed: bool = False

    def active_jobs(self) -> list[FakeJob]:
        return self.jobs

    def close(self) -> None:
        self.closed = True


# --- output --------------------------------------------------------------------------------


def test_pick_prints_full_uuids_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_pick(capsys, "--fake", "v100x4", "-n", "2")
    assert code == 0
    assert out == f"{V100_2},{V100_3}\n"
    assert err == ""


def test_one_card_is_picked_when_no_count_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_pick(capsys, "--fake", "v100x4")
    assert out == f"{V100_2}\n"


def test_format_index_prints_physical_indices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_pick(capsys, "--fake", "v100x4", "-n", "2", "--format", "index")
    assert (code, out) == (0, "2,3\n")
    assert err == ""  # four identical cards: CUDA's order is nvidia-smi's


def test_json_gives_indices_uuids_and_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_pick(capsys, "--fake", "v100x4", "-n", "2", "--json")
    assert json.loads(out) == {
        "physical_indices": [2, 3],
        "uuids": [V100_2, V100_3],
        "cuda_visible_devices": f"{V100_2},{V100_3}",
    }


def test_json_value_follows_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_pick(capsys, "--fake", "v100x4", "--json", "--format", "index")
    assert json.loads(out)["cuda_visible_devices"] == "2"


def test_the_gputop_fake_variable_works_like_the_option(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "mixed")
    _, out, _ = run_pick(capsys)
    assert out == f"{MIXED_H100}\n"


def test_the_uuid_value_selects_the_picked_card_under_cuda_default_order(
    capsys: pytest.CaptureFixture[str], fake_backend: Callable[..., Any]
) -> None:
    _, out, _ = run_pick(capsys, "--fake", "mixed")
    gpus = fake_backend("mixed").sample().gpus
    seen = resolve_visibility(gpus, "550.127.05", out.strip(), None)
    assert [device.physical_index for device in seen.devices] == [3]


# --- the CUDA_DEVICE_ORDER warning for indices ---------------------------------------------


def test_indices_on_a_mixed_box_warn_to_export_pci_bus_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_pick(capsys, "--fake", "mixed", "--format", "index")
    assert (code, out) == (0, "3\n")
    assert "CUDA_DEVICE_ORDER is unset" in err
    assert "would read 3 as GPU 2 (Tesla T4)" in err  # fastest first: 3 is the T4
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in err


def test_indices_warn_when_fastest_first_is_set_explicitly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    _, _, err = run_pick(capsys, "--fake", "mixed", "--format", "index")
    assert "CUDA_DEVICE_ORDER is 'FASTEST_FIRST'" in err


def test_indices_do_not_warn_once_pci_bus_id_is_exported(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    _, out, err = run_pick(capsys, "--fake", "mixed", "--format", "index")
    assert (out, err) == ("3\n", "")


def test_uuids_on_a_mixed_box_need_no_warning(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, err = run_pick(capsys, "--fake", "mixed")
    assert (out, err) == (f"{MIXED_H100}\n", "")


# --- not enough free cards -----------------------------------------------------------------


def test_not_enough_exits_1_with_the_reasons_on_stderr_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_pick(capsys, "--fake", "dgx-h100")
    assert code == 1
    assert out == ""
    assert err.startswith("gputop: Asked for 1 free GPU, but none is free.")
    assert "GPU 0: 12 processes of bob, 8 of carol, 3 of dave, 1 of alice, 1 of frank" in err


def test_not_enough_on_mixed_names_the_one_free_card(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_pick(capsys, "--fake", "mixed", "-n", "2")
    assert (code, out) == (1, "")
    assert "only 1 is free (GPU 3)" in err
    assert "GPU 2: 1 process of ben; utilisation 47 % (max 10 %)" in err


def test_faulty_cards_are_refused_for_lost_and_unknown_owners(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_pick(capsys, "--fake", "faulty")
    assert code == 1
    assert "GPU 0: 1 process of root; processes not listed by NVML (owners unknown)" in err
    assert "2 processes of unknown owner" in err
    assert "GPU 2: lost" in err


def test_asking_for_more_cards_than_the_machine_has(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_pick(capsys, "--fake", "v100x4", "-n", "5")
    assert code == 1
    assert "this machine has only 4 GPUs, 2 of them free (GPUs 2, 3)" in err


# --- options -------------------------------------------------------------------------------


def test_max_util_lets_busier_cards_count_as_free(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_pick(
        capsys, "--fake", "v100x4", "-n", "3", "--max-util", "50", "--format", "index"
    )
    assert out == "1,2,3\n"


def test_min_free_mib_refuses_cards_with_less_free_memory(
    capsys: pytest.CaptureFixture[str], scenario_file: WriteScenario
) -> None:
    path = scenario_file([idle_gpu(0, memory_total_mib=4096, memory_used_mib=1024)])
    assert run_pick(capsys, "--fake", path, "--format", "index")[1] == "0\n"
    code, out, err = run_pick(capsys, "--fake", path, "--min-free-mib", "4096")
    assert (code, out) == (1, "")
    assert "GPU 0: only 3.0 GiB free (needs 4.0 GiB)" in err


@pytest.mark.parametrize(
    ("option", "value", "complaint"),
    [
        ("-n", "0", "0 is out of range: give 1 or more"),
        ("--max-util", "101", "101 is out of range: give from 0 to 100"),
        ("--min-free-mib", "-1", "-1 is out of range: give 0 or more"),
        ("-n", "two", "'two' is not a whole number"),
    ],
)
def test_bad_numbers_are_usage_errors(
    capsys: pytest.CaptureFixture[str], option: str, value: str, complaint: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["pick", "--fake", "v100x4", option, value])
    assert exited.value.code == 2
    assert complaint in capsys.readouterr().err


# --- users, owners and jobs on scenario files ----------------------------------------------


def test_a_card_with_another_users_process_is_skipped(
    capsys: pytest.CaptureFixture[str], scenario_file: WriteScenario
) -> None:
    bob = {"pid": 4900001, "used_memory_mib": 100, "type": "C", "user": "bob", "cmd": ["x"]}
    path = scenario_file([idle_gpu(0, processes=[bob]), idle_gpu(1, memory_used_mib=2048)])
    assert run_pick(capsys, "--fake", path, "--format", "index")[1] == "1\n"


def test_the_users_own_process_does_not_hide_a_card(
    capsys: pytest.CaptureFixture[str], scenario_file: WriteScenario
) -> None:
    mine = {"pid": 4900001, "used_memory_mib": 100, "type": "C", "user": "tester", "cmd": ["x"]}
    path = scenario_file([idle_gpu(0, processes=[mine]), idle_gpu(1, memory_used_mib=2048)])
    assert run_pick(capsys, "--fake", path, "--format", "index")[1] == "0\n"


def test_a_process_of_unknown_owner_hides_a_card(
    capsys: pytest.CaptureFixture[str], scenario_file: WriteScenario
) -> None:
    foreign = {"pid": 4900001, "used_memory_mib": 100, "type": "C"}  # no such pid here
    path = scenario_file([idle_gpu(0, processes=[foreign])])
    code, _, err = run_pick(capsys, "--fake", path)
    assert code == 1
    assert "GPU 0: 1 process of unknown owner" in err


def test_cards_of_active_gputop_jobs_are_not_picked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FakeStore([FakeJob(7, (2,))])
    monkeypatch.setattr(pick_command, "open_job_store", lambda: store)
    _, out, _ = run_pick(capsys, "--fake", "v100x4", "--format", "index")
    assert out == "3\n"
    assert store.closed


def test_not_enough_names_the_job_that_holds_a_card(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pick_command, "open_job_store", lambda: FakeStore([FakeJob(7, (2, 3))]))
    code, _, err = run_pick(capsys, "--fake", "v100x4")
    assert code == 1
    assert "GPU 2: in use by gputop job 7" in err


def test_a_store_that_cannot_be_opened_is_a_warning_not_a_failure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse() -> None:
        raise GputopError("Cannot open /nowhere/jobs.sqlite3: permission denied")

    monkeypatch.setattr(pick_command, "open_job_store", refuse)
    code, out, err = run_pick(capsys, "--fake", "v100x4", "--format", "index")
    assert (code, out) == (0, "2\n")
    assert err.startswith("gputop: warning: cannot read gputop's jobs (Cannot open /nowhere")


def test_store_notices_are_shown_on_stderr(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FakeStore([], notices=["The job store was corrupt; moved aside to X."])
    monkeypatch.setattr(pick_command, "open_job_store", lambda: store)
    _, out, err = run_pick(capsys, "--fake", "v100x4", "--format", "index")
    assert out == "2\n"
    assert "gputop: warning: The job store was corrupt; moved aside to X." in err


def test_an_unusable_state_directory_only_warns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("gputop.core.jobs.store")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(blocker))
    code, out, err = run_pick(capsys, "--fake", "v100x4", "--format", "index")
    assert (code, out) == (0, "2\n")
    assert "gputop: warning: cannot read gputop's jobs" in err


def record_job(
    state_dir: Path,
    physical_indices: tuple[int, ...],
    ended: bool = False,
    uuids: tuple[str, ...] = (),
) -> int:
    """A job in the real store, supervised (as far as liveness checks go) by this process."""
    store_module = pytest.importorskip("gputop.core.jobs.store")
    store = store_module.JobStore.open(state_dir)
    try:
        job = store.create_job(
            asked_job(cwd=str(state_dir), physical_indices=physical_indices, uuids=uuids)
        )
        rows = pytest.importorskip("gputop.core.jobs.store_rows")
        seen = rows.ProcessSeen(os.getpid(), psutil.Process().create_time(), None)
        store.record(job.id, rows.supervisor_seen(seen))
        if ended:
            store.record(job.id, rows.ended(exit_code=0))
        return int(job.id)
    finally:
        store.close()


def test_cards_of_running_jobs_in_the_real_store_are_not_picked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record_job(tmp_path / "state", (2,))
    code, out, err = run_pick(capsys, "--fake", "v100x4", "--format", "index")
    assert (code, out, err) == (0, "3\n", "")


def test_cards_of_ended_jobs_are_free_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record_job(tmp_path / "state", (2,), ended=True)
    _, out, _ = run_pick(capsys, "--fake", "v100x4", "--format", "index")
    assert out == "2\n"


# --- MIG instances (issue 28) ---------------------------------------------------------------

MIG_2G = "MIG-4fd95d93-9b6c-cbc0-9143-9fb3322c58bd"
"""--fake mig: GPU 0's 2g.20gb instance, 13 MiB used, nobody on it: free."""


def test_pick_picks_a_free_mig_instance_when_no_whole_card_is_free(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_pick(capsys, "--fake", "mig")
    assert (code, out, err) == (0, f"{MIG_2G}\n", "")
    code, out, _ = run_pick(capsys, "--fake", "mig", "--json")
    document = json.loads(out)
    assert document == {
        "physical_indices": [0],
        "uuids": [MIG_2G],
        "cuda_visible_devices": MIG_2G,
    }
    code, out, err = run_pick(capsys, "--fake", "mig", "--format", "index")
    assert (code, out, err) == (0, f"{MIG_2G}\n", "")  # an instance has no index


def test_a_mig_instance_held_by_a_gputop_job_is_not_picked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record_job(tmp_path / "state", (0,), uuids=(MIG_2G,))
    code, out, err = run_pick(capsys, "--fake", "mig")
    assert code == 1 and out == ""
    assert "none is free" in err


def test_a_mig_instance_with_too_little_free_memory_is_not_picked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_pick(capsys, "--fake", "mig", "--min-free-mib", "30000")
    assert code == 1 and out == ""


def test_two_cards_are_never_made_of_mig_instances(capsys: pytest.CaptureFixture[str]) -> None:
    """CUDA uses only the first MIG instance a process is given."""
    code, out, err = run_pick(capsys, "--fake", "mig", "-n", "2")
    assert code == 1 and out == "" and "Asked for 2 free GPUs" in err


def test_run_auto_picks_the_free_mig_instance(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["run", "--fake", "mig", "--auto", "1", "--json", "--", "true"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0 and document["uuids"] == [MIG_2G]
    assert document["env"]["CUDA_VISIBLE_DEVICES"] == MIG_2G
