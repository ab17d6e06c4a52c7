"""The launch dialog: a command for the selected cards, with exactly what it will get.

The preview is computed by the same core functions the launch uses (the command plan and
the pinning environment), so it can never promise something the launch would not do.
Launching runs in a worker thread: it writes the job store and starts the supervisor.
Where Slurm is here, a job can be submitted through ``sbatch`` instead (docs/slurm.md): it
asks Slurm for as many GPUs as cards are selected; Slurm chooses which, and the preview
says so.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.suggester import SuggestFromList
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, RadioButton, RadioSet, Static
from textual.worker import Worker, WorkerState

from gputop.core.errors import GputopError, UsageError
from gputop.core.free_cards import launch_warnings
from gputop.core.jobs.command import CommandPlan, default_name, missing_program, plan_command
from gputop.core.jobs.launch import LaunchRequest
from gputop.core.jobs.launchers import plain_python_note, plan_launcher, rank_lines
from gputop.core.jobs.model import Job, RunMode
from gputop.core.jobs.service import JobsService
from gputop.core.jobs.store import JobStore
from gputop.core.mig_targets import card_label, target_label
from gputop.core.model import Snapshot
from gputop.core.records import frozen
from gputop.core.safe_text import clean, clean_lines
from gputop.core.slurm.detect import slurm_commands_here
from gputop.core.slurm.record import submit_and_record
from gputop.core.slurm.submit import SlurmRequest
from gputop.core.visibility import pin_environment
from gputop.tui.textual_compat import InOrderInput
from gputop.tui.workers import ReportsWorkerFailures, failure_message

# Textual's ``RadioSet`` and ``Checkbox`` toggle on enter as on space. In the launch dialog
# enter launches from anywhere; these keep space (and the arrows of the radio set) for
# choosing. A subclass's binding for a key replaces its base class's for that key.
LAUNCH_ON_ENTER = Binding("enter", "screen.launch", "Launch", show=False)


class LaunchRadioSet(RadioSet):
    BINDINGS = [LAUNCH_ON_ENTER]


class LaunchCheckbox(Checkbox):
    BINDINGS = [LAUNCH_ON_ENTER]


@frozen(slots=False)
class LaunchContext:
    """What the dialog needs from the dashboard, fixed when it opens."""

    snapshot: Snapshot
    physical_indices: tuple[int | str, ...]
    """Whole GPUs by physical index, MIG instances by ``MIG-`` UUID, in cuda order."""
    user: str
    active_jobs: tuple[Job, ...]
    cwd: str
    environ: Mapping[str, str]
    jobs: JobsService
    """Where the launch is recorded (the dashboard's one jobs service)."""

    @property
    def in_tmux(self) -> bool:
        return bool(self.environ.get("TMUX"))


REMOTE_FILE_NOTE = (
    "where that host has a file of exactly this name in the directory, its gputop runs that "
    "file instead, never a shell"
)


class LaunchScreen(ReportsWorkerFailures, ModalScreen[Job | None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Cancel"),
        Binding("enter", "launch", "Launch", show=False),  # wherever enter means nothing else
        Binding("up", "history(-1)", "Earlier command", show=False),
        Binding("down", "history(1)", "Later command", show=False),
    ]
    FILES_HERE = True
    """The job's files are this machine's: a command that names one runs it (the preview
    says so; gputop/core/jobs/command.py). False for another host's dialog."""

    def __init__(self, context: LaunchContext) -> None:
        super().__init__()
        self.context = context
        self.history: tuple[str, ...] = ()
        """Earlier commands, oldest first: read from the store in a worker after mount."""
        self._history_position = 0
        self._draft = ""
        self._launching = False

    def heading(self, cards: str) -> Text:
        return Text(f"Launch on {cards}", style="bold")

    def compose(self) -> ComposeResult:
        gpus = self.context.snapshot.gpus
        cards = ", ".join(target_label(gpus, t) for t in self.context.physical_indices)
        with VerticalScroll(id="launch") as dialog:
            dialog.border_subtitle = "enter launches · escape cancels · ↑/↓ earlier commands"
            yield Static(self.heading(cards), id="launch-title")
            yield Label("Command")
            yield InOrderInput(
                placeholder="python train.py --config configs/base.yaml",
                id="command",
            )
            yield Label("Working directory")
            # An Input draws its value raw: a directory name is shown cleaned (see _cwd).
            yield InOrderInput(value=clean(self.context.cwd), id="cwd")
            yield Static(id="launch-error")
            with LaunchRadioSet(id="mode"):
                yield RadioButton("Detached: keeps running after you log out", value=True)
                yield RadioButton(
                    "In a new tmux window" if self.context.in_tmux else "tmux (not inside tmux)",
                    disabled=not self.context.in_tmux,
                )
            yield LaunchCheckbox("Wait until these cards are free", id="wait")
            yield from slurm_fields(self.context.environ)
            yield Static(id="preview")

    def on_mount(self) -> None:
        self.query_one("#command", Input).focus()
        if self.query("#slurm"):
            show_slurm_options(self, False)
        self._update_preview()
        self._load_history()

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def _load_history(self) -> None:
        """The job store is opened off the UI thread: it checks the file and may wait on a lock."""
        history = self.context.jobs.history()
        self.app.call_from_thread(self._set_history, history)

    def _set_history(self, history: tuple[str, ...]) -> None:
        self.history = history
        self._history_position = len(history)
        field = self.query_one("#command", Input)
        field.suggester = SuggestFromList(reversed(history), case_sensitive=True)

    # -- preview -------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show_error(None)
        self._update_preview()

    def _update_preview(self) -> None:
        self.query_one("#preview", Static).update(self.render_preview())

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.checkbox.id == "slurm":
            show_slurm_options(self, event.value)
            self._update_preview()

    def render_preview(self) -> RenderableType:
        context = self.context
        snapshot = context.snapshot
        parts: list[RenderableType] = []
        command = self.query_one("#command", Input).value
        slurm = self._slurm_request(command)
        if slurm is not None:
            return slurm_preview(slurm, command, context.environ)
        if command.strip():
            try:
                cwd = self._cwd() or context.cwd
                plan = plan_command(command, context.environ, cwd, self.FILES_HERE)
            except GputopError as error:
                parts.append(Text(f"✗ {clean(str(error))}", style="red"))
            else:
                parts.extend(self._command_preview(plan))
        try:
            pinning = pin_environment(
                snapshot.gpus, context.physical_indices, driver_version=snapshot.driver_version
            )
        except GputopError as error:
            parts.append(Text(f"✗ {clean(str(error))}", style="bold red"))
        else:
            env = Text()
            for key, value in pinning.env.items():
                env.append(f"{key}=", style="dim")
                env.append(f"{clean(value)}\n")
            env.append(
                "  ".join(
                    f"cuda:{d.logical_index} → "
                    + target_label(snapshot.gpus, d.mig_uuid or d.physical_index)
                    for d in pinning.devices
                ),
                style="cyan",
            )
            parts.append(env)
            parts.extend(Text(f"⚠ {warning}", style="yellow") for warning in pinning.warnings)
        warnings = launch_warnings(
            snapshot, context.physical_indices, context.user, context.active_jobs
        )
        parts.extend(Text(f"⚠ {clean(warning)}", style="yellow") for warning in warnings)
        return Group(*parts)

    def _command_preview(self, plan: CommandPlan) -> list[RenderableType]:
        """What runs, with what gputop adds to a multi-card launcher (one process per card,
        a free port) and each local rank's card; the same functions launch_job uses."""
        snapshot = self.context.snapshot
        cards = list(self.context.physical_indices)
        launcher = plan_launcher(plan, len(cards), self.context.environ, port_finder=None)
        shown = shlex.join(launcher.argv) if launcher is not None else plan.display
        parts: list[RenderableType] = [*plan_lines(plan, shown)]
        if plan.note is None and plan.uses_shell and not self.FILES_HERE:
            parts.append(Text(f"ℹ {REMOTE_FILE_NOTE}", style="dim"))
        cwd = self._cwd() or self.context.cwd
        missing = missing_program(plan.argv, plan.uses_shell, cwd, self.context.environ)
        if missing is not None and self.FILES_HERE:  # another host's are that host's to find
            parts.append(Text(f"⚠ {clean(missing)}", style="yellow"))
        if launcher is not None:
            labels = [card_label(snapshot.gpus, card) for card in cards]
            parts.append(Text(clean_lines("\n".join(rank_lines(launcher, labels))), style="cyan"))
            parts.extend(Text(f"ℹ {clean(note)}", style="dim") for note in launcher.notes)
            parts.extend(
                Text(f"⚠ {clean(warning)}", style="yellow") for warning in launcher.warnings
            )
        note = plain_python_note(plan, len(cards))
        if note is not None:
            parts.append(Text(f"ℹ {clean(note)}", style="dim"))
        return parts

    # -- history ---------------------------------------------------------------------------

    def action_history(self, step: int) -> None:
        field = self.query_one("#command", Input)
        if self.focused is not field or not self.history:
            return
        history = self.history
        if self._history_position == len(history):
            self._draft = field.value
        position = min(max(self._history_position + step, 0), len(history))
        self._history_position = position
        field.value = history[position] if position < len(history) else self._draft
        field.cursor_position = len(field.value)

    # -- launching -------------------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_launch()

    def action_launch(self) -> None:
        if self._launching:
            return
        command = self.query_one("#command", Input).value
        if not command.strip():
            self._show_error("Type the command to run first.")
            return
        slurm = self._slurm_request(command)
        if slurm is not None:
            self._launching = True
            self._submit(slurm, command)
            return
        tmux = self.query_one("#mode", RadioSet).pressed_index == 1
        request = LaunchRequest(
            command=command,
            physical_indices=self.context.physical_indices,
            cwd=self._cwd(),
            mode=RunMode.TMUX if tmux else RunMode.DETACHED,
            wait=self.query_one("#wait", Checkbox).value,
        )
        self._launching = True
        self._launch(request)

    def _slurm_request(self, command: str) -> SlurmRequest | None:
        """The sbatch request, where "Submit through Slurm" is ticked (docs/slurm.md)."""
        return slurm_request_from(
            self,
            command,
            environ=self.context.environ,
            cwd=self._cwd() or self.context.cwd,
            gpus=len(self.context.physical_indices),
        )

    def _cwd(self) -> str | None:
        """The directory typed, or the real default when the field still shows it cleaned."""
        typed = self.query_one("#cwd", Input).value
        if typed == clean(self.context.cwd):
            return self.context.cwd
        return os.path.expanduser(typed.strip()) or None

    @work(thread=True, exclusive=True, group="launch", exit_on_error=False)
    def _launch(self, request: LaunchRequest) -> None:
        try:
            job = self.context.jobs.launch(request, self.context.snapshot, self.context.environ)
        except GputopError as error:
            self.app.call_from_thread(self._failed, str(error))
        except OSError as error:  # e.g. the supervisor's interpreter vanished
            self.app.call_from_thread(self._failed, f"Could not start the job: {error}")
        else:
            self.app.call_from_thread(self.dismiss, job)

    @work(thread=True, exclusive=True, group="launch", exit_on_error=False)
    def _submit(self, request: SlurmRequest | None, command: str) -> None:
        """Through sbatch (docs/slurm.md): Slurm's own message where it refuses."""
        store: JobStore | None = None
        try:
            if request is None or not request.argv:
                raise UsageError("Type the command to run first.")
            store = JobStore.open(self.context.jobs.state_dir, repair=True)
            job = submit_and_record(store, request, command.strip(), self.context.environ)
        except GputopError as error:
            self.app.call_from_thread(self._failed, str(error))
        else:
            self.app.call_from_thread(self.dismiss, job)
        finally:
            if store is not None:
                store.close()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A launch that raised something unforeseen: the dialog says so and stays usable."""
        if event.worker.group == "launch" and event.state is WorkerState.ERROR:
            self._failed(failure_message(event.worker))

    def _failed(self, message: str) -> None:
        self._launching = False
        self._show_error(message)

    def _show_error(self, message: str | None) -> None:
        error = self.query_one("#launch-error", Static)
        error.display = message is not None
        error.update(Text(f"✗ {clean_lines(message)}", style="bold red") if message else "")


# -- the Slurm part (docs/slurm.md) ----------------------------------------------------------

_OPTIONS = ("#slurm-partition-label", "#slurm-partition", "#slurm-time-label", "#slurm-time")


def slurm_fields(environ: Mapping[str, str]) -> Iterator[Widget]:
    """The checkbox and options; nothing where Slurm's commands are not here."""
    if not slurm_commands_here(environ):
        return
    yield LaunchCheckbox("Submit through Slurm (sbatch): Slurm chooses the cards", id="slurm")
    yield Label("Slurm partition (empty: the default)", id="slurm-partition-label")
    yield InOrderInput(placeholder="debug", id="slurm-partition")
    yield Label("Slurm time limit (empty: the partition's)", id="slurm-time-label")
    yield InOrderInput(placeholder="1:00:00", id="slurm-time")


def show_slurm_options(screen: Screen[Any], shown: bool) -> None:
    for selector in _OPTIONS:
        screen.query_one(selector).display = shown


def slurm_request_from(
    screen: Screen[Any], command: str, *, environ: Mapping[str, str], cwd: str, gpus: int
) -> SlurmRequest | None:
    """The sbatch request the dialog would make; ``None`` where Slurm is not chosen.

    An empty or unparseable command gives a request with no argv: the preview says what is
    wrong, the launch refuses it.
    """
    if not any(box.value for box in screen.query("#slurm").results(Checkbox)):
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


def plan_lines(plan: CommandPlan, shown: str) -> list[Text]:
    """What runs (``shown``: the command line as run), and the plan's note if it has one."""
    how = "Runs under a shell: " if plan.uses_shell else "Runs: "
    lines = [Text.assemble((how, "dim"), (clean(shown), "bold"))]
    if plan.note is not None:  # a file's name that looks like a command line
        lines.append(Text(f"ℹ {clean(plan.note)}", style="cyan"))
    return lines


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
            parts.extend(plan_lines(plan, plan.display))
    parts.append(Text.assemble(("Submits through sbatch: ", "dim"), (request.asks_text, "bold")))
    parts.append(
        Text(
            "Slurm chooses the physical cards (your selection sets how many); the job's row "
            "shows which it got once it runs.",
            style="cyan",
        )
    )
    return Group(*parts)
