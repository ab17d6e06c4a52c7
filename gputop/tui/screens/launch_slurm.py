"""The launch dialog's Slurm part (docs/slurm.md): where Slurm is here, a job can be
submitted through ``sbatch`` instead. It asks Slurm for as many GPUs as cards are
selected; Slurm chooses which, and the preview says so."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label

from gputop.core.errors import GputopError
from gputop.core.jobs.command import default_name, plan_command
from gputop.core.safe_text import clean
from gputop.core.slurm.detect import slurm_commands_here
from gputop.core.slurm.submit import SlurmRequest
from gputop.tui.screens.launch_toggles import LaunchCheckbox

_OPTIONS = ("#slurm-partition-label", "#slurm-partition", "#slurm-time-label", "#slurm-time")


def slurm_fields(environ: Mapping[str, str]) -> Iterator[Widget]:
    """The checkbox and options; nothing where Slurm's commands are not here."""
    if not slurm_commands_here(environ):
        return
    yield LaunchCheckbox("Submit through Slurm (sbatch): Slurm chooses the cards", id="slurm")
    yield Label("Slurm partition (empty: the default)", id="slurm-partition-label")
    yield Input(placeholder="debug", id="slurm-partition")
    yield Label("Slurm time limit (empty: the partition's)", id="slurm-time-label")
    yield Input(placeholder="1:00:00", id="slurm-time")


def show_slurm_options(screen: Screen[Any], shown: bool) -> None:
    for selector in _OPTIONS:
        screen.query_one(selector).display = shown


def slurm_chosen(screen: Screen[Any]) -> bool:
    boxes = screen.query("#slurm").results(Checkbox)
    return any(box.value for box in boxes)


def slurm_request_from(
    screen: Screen[Any], command: str, *, environ: Mapping[str, str], cwd: str, gpus: int
) -> SlurmRequest | None:
    """The sbatch request the dialog would make; ``None`` where Slurm is not chosen.

    An empty or unparseable command gives a request with no argv: the preview says what is
    wrong, the launch refuses it.
    """
    if not slurm_chosen(screen):
        return None
    try:
        plan = plan_command(command, environ, cwd or None) if command.strip() else None
    except GputopError:
        plan = None
    return SlurmRequest(
        argv=plan.argv if plan is not None else (),
        name=default_name(plan) if plan is not None else "job",
        cwd=cwd or os.getcwd(),
        partition=screen.query_one("#slurm-partition", Input).value.strip() or None,
        gpus=max(1, gpus),
        time_limit=screen.query_one("#slurm-time", Input).value.strip() or None,
    )


def slurm_preview(
    request: SlurmRequest, command: str, environ: Mapping[str, str]
) -> RenderableType:
    parts: list[RenderableType] = []
    if command.strip():
        try:
            plan = plan_command(command, environ, request.cwd)
        except GputopError as error:
            parts.append(Text(f"✗ {clean(str(error))}", style="red"))
        else:
            how = "Runs under a shell: " if plan.uses_shell else "Runs: "
            parts.append(Text.assemble((how, "dim"), (clean(plan.display), "bold")))
            if plan.note is not None:  # a file's name that looks like a command line
                parts.append(Text(f"ℹ {clean(plan.note)}", style="cyan"))
    parts.append(Text.assemble(("Submits through sbatch: ", "dim"), (request.asks_text, "bold")))
    parts.append(
        Text(
            "Slurm chooses the physical cards (your selection sets how many); the job's row "
            "shows which it got once it runs.",
            style="cyan",
        )
    )
    return Group(*parts)
