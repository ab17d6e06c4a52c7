"""Launchers recognised in a command's argv: the process count, the port, the notes.

These run on argv alone (no torch, accelerate or deepspeed needed): what each launcher
does when an option is absent was read in its own source (docs/multi-card.md).
"""

from __future__ import annotations

import pytest

from gputop.core.jobs.command import plan_command
from gputop.core.jobs.launchers import (
    ACCELERATE,
    DEEPSPEED,
    TORCH_LAUNCH_MODULE,
    TORCH_RUN_MODULE,
    TORCHRUN,
    LauncherPlan,
    find_launcher,
    plain_python_note,
    plan_launcher,
    rank_lines,
)


def planned(text: str, cards: int = 2, **environ: str) -> LauncherPlan | None:
    return plan_launcher(plan_command(text, {}), cards, environ, port_finder=lambda: 41234)


@pytest.mark.parametrize(
    ("text", "launcher"),
    [
        ("torchrun train.py", TORCHRUN),
        ("/opt/env/bin/torchrun --nnodes 1 train.py", TORCHRUN),
        ("python -m torch.distributed.run train.py", TORCH_RUN_MODULE),
        ("python3.11 -u -m torch.distributed.launch --use-env train.py", TORCH_LAUNCH_MODULE),
        ("accelerate launch train.py", ACCELERATE),
        ("deepspeed train.py --deepspeed_config ds.json", DEEPSPEED),
        ("uv run torchrun train.py", TORCHRUN),
        ("uv run --with torch python -m torch.distributed.run train.py", TORCH_RUN_MODULE),
        ("conda run -n ml accelerate launch train.py", ACCELERATE),
        ("env NCCL_DEBUG=INFO deepspeed train.py", DEEPSPEED),
    ],
)
def test_launchers_are_recognised_also_behind_wrappers(text: str, launcher: str) -> None:
    found = find_launcher(plan_command(text, {}).argv)
    assert found is not None and found[0] == launcher


@pytest.mark.parametrize(
    "text",
    ["python train.py torchrun", "python -m mypkg.train", "accelerate config", "./torchrun.sh"],
)
def test_a_launcher_name_that_is_not_the_program_is_not_a_launcher(text: str) -> None:
    assert find_launcher(plan_command(text, {}).argv) is None


def test_torchrun_without_a_process_count_gets_one_per_card_and_a_free_port() -> None:
    plan = planned("torchrun train.py --lr 3", cards=4)
    assert plan is not None
    assert plan.argv == (
        "torchrun", "--nproc_per_node=4", "--master_port=41234", "train.py", "--lr", "3",
    )  # fmt: skip
    assert plan.processes_per_node == 4
    assert any("sets it to 4" in note for note in plan.notes)
    assert any("port 41234" in note and "29500" in note for note in plan.notes)
    assert plan.warnings == ()


def test_a_process_count_that_differs_from_the_cards_is_warned_and_kept() -> None:
    plan = planned("torchrun --nproc-per-node 2 train.py", cards=4)
    assert plan is not None
    assert "--nproc-per-node" in plan.argv and "--nproc_per_node=4" not in plan.argv
    assert plan.processes_per_node == 2
    assert plan.warnings == ("--nproc_per_node=2 but 4 cards are selected: 2 card(s) stay idle.",)


def test_the_process_count_from_torchruns_environment_variable_counts_as_given() -> None:
    plan = planned("torchrun train.py", cards=2, PET_NPROC_PER_NODE="2")
    assert plan is not None and plan.added == ("--master_port=41234",)


@pytest.mark.parametrize(
    "given",
    ["--standalone", "--master-port 29600", "--master_port=29600", "--rdzv-endpoint h:1"],
)
def test_a_given_rendezvous_is_left_alone(given: str) -> None:
    plan = planned(f"torchrun --nproc-per-node=2 {given} train.py")
    assert plan is not None
    assert plan.added == ()


def test_a_multi_node_rendezvous_keeps_its_port() -> None:
    plan = planned("torchrun --nnodes=2 --nproc-per-node=2 train.py")
    assert plan is not None and plan.added == ()
    assert any("multi-node" in note for note in plan.notes)


def test_options_after_the_script_belong_to_the_script() -> None:
    plan = planned("torchrun train.py --nproc-per-node 8 --master-port 1")
    assert plan is not None
    assert plan.added == ("--nproc_per_node=2", "--master_port=41234")


def test_accelerate_gets_processes_multi_gpu_and_a_port() -> None:
    plan = planned("accelerate launch --mixed_precision bf16 train.py")
    assert plan is not None
    assert plan.argv == (
        "accelerate", "launch", "--num_processes=2", "--multi_gpu", "--main_process_port=41234",
        "--mixed_precision", "bf16", "train.py",
    )  # fmt: skip


def test_accelerates_gpu_ids_is_warned_as_replacing_the_pinning() -> None:
    plan = planned("accelerate launch --num_processes 2 --gpu_ids 0,1 train.py")
    assert plan is not None
    assert any("--gpu_ids" in warning for warning in plan.warnings)


def test_deepspeed_is_pinned_by_index_and_its_card_options_are_warned() -> None:
    plain = planned("deepspeed train.py")
    assert plain is not None and plain.pin_with_indices
    assert plain.processes_per_node == 2 and plain.added == ("--master_port=41234",)
    overriding = planned("deepspeed --num_gpus 2 train.py")
    assert overriding is not None
    assert any("pinning is lost" in warning for warning in overriding.warnings)


def test_the_preview_without_a_port_finder_says_a_port_is_chosen_at_launch() -> None:
    plan = plan_launcher(plan_command("torchrun t.py", {}), 2, {}, port_finder=None)
    assert plan is not None and "--master_port=PORT" in plan.added
    assert any("chosen at launch" in note for note in plan.notes)


def test_a_command_under_a_shell_is_never_rewritten() -> None:
    assert planned("torchrun train.py | tee log") is None


def test_rank_lines_map_each_local_rank_to_its_card_and_say_when_one_has_none() -> None:
    plan = planned("torchrun --nproc-per-node=3 t.py")
    assert plan is not None
    assert rank_lines(plan, ["GPU 3", "GPU 1"]) == [
        "torchrun starts 3 processes:",
        "  local rank 0 → cuda:0 → GPU 3",
        "  local rank 1 → cuda:1 → GPU 1",
        "  local rank 2 → no card of its own",
    ]


def test_plain_python_on_several_cards_is_told_it_uses_one() -> None:
    note = plain_python_note(plan_command("uv run python train.py", {}), 2)
    assert note is not None and "uses only cuda:0 unless it uses DataParallel or DDP" in note
    assert plain_python_note(plan_command("python train.py", {}), 1) is None
    assert plain_python_note(plan_command("torchrun train.py", {}), 2) is None
