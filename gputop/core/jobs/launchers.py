"""Multi-card launchers in a command: one process per pinned card, and a free rendezvous port.

``torchrun`` on four pinned cards starts one process, and a fixed port (29500) meets another
job's: for torchrun, ``torch.distributed.run|launch``, ``accelerate launch`` and
``deepspeed`` (also behind ``uv run``, ``env``...) the process count and a free port are
added to the argv. What each launcher does without them: docs/multi-card.md.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field

from gputop.core.jobs.command import CommandPlan
from gputop.core.numbers import MAX_COUNT, digits_within
from gputop.core.records import frozen, mutable

PortFinder = Callable[[], int]

TORCHRUN = "torchrun"
TORCH_RUN_MODULE = "python -m torch.distributed.run"
TORCH_LAUNCH_MODULE = "python -m torch.distributed.launch"
ACCELERATE = "accelerate launch"
DEEPSPEED = "deepspeed"

_TORCH_MODULES = {"torch.distributed.run": TORCH_RUN_MODULE}
_TORCH_MODULES["torch.distributed.launch"] = TORCH_LAUNCH_MODULE
_SCRIPT_SUFFIXES = (".py", ".sh", ".ipynb")

# Options that take no value, per launcher; every other ``--option`` takes the next word
# unless written ``--option=value`` (their argparse parsers, docs/multi-card.md).
_TORCH_FLAGS = frozenset(
    {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path",
     "--run_path", "--use-env", "--use_env", "--virtual-local-rank", "--virtual_local_rank"}
)  # fmt: skip
_ACCELERATE_FLAGS = frozenset(
    {"--cpu", "--multi_gpu", "--tpu", "--ipex", "--use_deepspeed", "--use_fsdp",
     "--use_megatron_lm", "--use_xpu", "-m", "--module", "--no_python", "-q", "--quiet",
     "--debug", "--same_network", "--enable_cpu_affinity", "--tpu_use_cluster",
     "--tpu_use_sudo"}
)  # fmt: skip
_DEEPSPEED_FLAGS = frozenset(
    {"--no_python", "--module", "--no_local_rank", "--no_ssh_check", "--force_multi",
     "--save_pid", "--enable_each_rank_log", "--autotuning", "--elastic_training",
     "--bind_cores_to_rank", "--ssh", "--no_ssh", "--quiet"}
)  # fmt: skip
_TORCH_RENDEZVOUS = (
    "--standalone", "--rdzv-endpoint", "--rdzv_endpoint", "--master-port", "--master_port",
)  # fmt: skip
_TORCH_RENDEZVOUS_ENV = ("PET_STANDALONE", "PET_RDZV_ENDPOINT", "PET_MASTER_PORT")
_ACCELERATE_MODES = (
    "--multi_gpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--cpu", "--tpu",
)  # fmt: skip


@frozen(slots=False)
class LauncherPlan:
    """What gputop will run for a launcher, and what a person must be told about it."""

    launcher: str
    argv: tuple[str, ...]
    """The argv to execute: the one typed, with ``added`` inserted after the launcher."""
    added: tuple[str, ...]
    processes_per_node: int | None
    """Processes the launcher will start here; None where gputop cannot know."""
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    pin_with_indices: bool = False
    """deepspeed reads CUDA_VISIBLE_DEVICES as integers: pin by index, not UUID."""


def free_port() -> int:
    """A TCP port free on this host now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def plan_launcher(
    plan: CommandPlan,
    cards: int,
    environ: Mapping[str, str] = os.environ,
    port_finder: PortFinder | None = free_port,
) -> LauncherPlan | None:
    """The launcher in ``plan`` and the argv that runs it on ``cards`` cards, or None.

    ``port_finder`` None (the dialog's preview) says a free port will be chosen at launch,
    without choosing one. A command run under a shell is never rewritten.
    """
    if plan.uses_shell or cards < 1:
        return None
    found = find_launcher(plan.argv)
    if found is None:
        return None
    launcher, start = found
    flags, build = _LAUNCHERS.get(launcher, (_TORCH_FLAGS, _torchrun))
    draft = _Draft(launcher, _launcher_options(plan.argv, start, flags), cards, port_finder)
    count = build(draft, environ)
    added = tuple(draft.added)
    return LauncherPlan(
        launcher, (*plan.argv[:start], *added, *plan.argv[start:]), added, count,
        tuple(draft.notes), tuple(draft.warnings), pin_with_indices=launcher == DEEPSPEED,
    )  # fmt: skip


def plain_python_note(plan: CommandPlan, cards: int) -> str | None:
    """A python script on several cards without a launcher uses one of them."""
    if plan.uses_shell or cards < 2 or find_launcher(plan.argv) is not None:
        return None
    before_script = itertools.takewhile(lambda word: not _is_script(word), plan.argv)
    if not any(os.path.basename(word).startswith(("python", "pypy")) for word in before_script):
        return None
    return (
        f"The script sees {cards} devices (cuda:0 … cuda:{cards - 1}) and uses only cuda:0 "
        "unless it uses DataParallel or DDP; for one process per card run it with "
        f"torchrun --nproc-per-node={cards}."
    )


def find_launcher(argv: Sequence[str]) -> tuple[str, int] | None:
    """The launcher and the position of its first option, looking through wrappers.

    The search ends at the first script (``train.py``): a launcher's name after it is an
    argument of the script, not the program that runs.
    """
    for position, word in enumerate(argv):
        base = os.path.basename(word)
        if base in (TORCHRUN, DEEPSPEED):
            return base, position + 1
        if base == "accelerate" and tuple(argv[position + 1 : position + 2]) == ("launch",):
            return ACCELERATE, position + 2
        if word == "-m" and position > 0:
            module = argv[position + 1] if position + 1 < len(argv) else ""
            return (_TORCH_MODULES[module], position + 2) if module in _TORCH_MODULES else None
        if _is_script(word):
            return None
    return None


def _is_script(word: str) -> bool:
    return word.endswith(_SCRIPT_SUFFIXES) and not word.startswith("-")


def _launcher_options(argv: Sequence[str], start: int, flags: frozenset[str]) -> dict[str, str]:
    """The launcher's own options (before its script), by name: ``{"--nproc-per-node": "2"}``.

    A flag maps to ``""``. Scanning ends at the script or at ``--``.
    """
    options: dict[str, str] = {}
    words = iter(argv[start:])
    for word in words:
        if word in ("--", "-") or not word.startswith("-"):
            break
        name, equals, value = word.partition("=")
        options[name] = value if equals or name in flags else next(words, "")
    return options


def _given(options: Mapping[str, str], *names: str) -> str | None:
    return next((options[name] for name in names if name in options), None)


@mutable
class _Draft:
    """A launcher's plan being made: its options, and what gputop adds and says."""

    launcher: str
    options: Mapping[str, str]
    cards: int
    port_finder: PortFinder | None
    added: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def process_count(self, given: str | None, option: str) -> int | None:
        """The processes per node, and the note or warning about it."""
        cards = self.cards
        if given is None:
            self.added.append(f"{option}={cards}")
            self.notes.append(
                f"{option} was not given: gputop sets it to {cards}, one process per selected card."
            )
            return cards
        count = digits_within(given, 0, MAX_COUNT)
        selected = f"{cards} card{'s are' if cards > 1 else ' is'} selected"
        if count is None:
            self.warnings.append(
                f"{option}={given}: {self.launcher} decides the process count itself; {selected}."
            )
        elif count != cards:
            idle = f"{cards - count} card(s) stay idle" if count < cards else "ranks share cards"
            self.warnings.append(f"{option}={count} but {selected}: {idle}.")
        return count

    def port(self, option: str, why: str) -> None:
        """A free rendezvous port as ``option``, unless the command gives one."""
        if option in self.options:
            self.notes.append(f"The rendezvous port is given ({option}): gputop leaves it.")
            return
        port = self.port_finder() if self.port_finder is not None else None
        self.added.append(f"{option}={'PORT' if port is None else port}")
        given = "a free port, chosen at launch" if port is None else f"port {port}, free now"
        self.notes.append(f"{why}: gputop gives it {given}.")


def _torchrun(draft: _Draft, environ: Mapping[str, str]) -> int | None:
    options = draft.options
    given = _given(options, "--nproc-per-node", "--nproc_per_node")
    if given is None:
        given = environ.get("PET_NPROC_PER_NODE")
    count = draft.process_count(given, "--nproc_per_node")
    rendezvous = [name for name in _TORCH_RENDEZVOUS if name in options]
    rendezvous += [name for name in _TORCH_RENDEZVOUS_ENV if environ.get(name)]
    nodes = _given(options, "--nnodes") or environ.get("PET_NNODES") or "1"
    if rendezvous:
        draft.notes.append(f"The rendezvous is given ({rendezvous[0]}): gputop leaves it.")
    elif nodes.split(":")[-1] not in ("", "1"):
        draft.notes.append(f"--nnodes={nodes}: a multi-node rendezvous; gputop leaves its port.")
    else:
        why = (
            "Without --master-port, torchrun 2.13 picks a free port itself on one node but "
            "older releases rendezvous on the fixed port 29500"
        )
        draft.port("--master_port", why)
    return count


def _accelerate(draft: _Draft, environ: Mapping[str, str]) -> int | None:
    options = draft.options
    given = _given(options, "--num_processes", "--num-processes")
    count = draft.process_count(given, "--num_processes")
    if given is None and draft.cards > 1 and not any(mode in options for mode in _ACCELERATE_MODES):
        draft.added.append("--multi_gpu")
    if "--gpu_ids" in options:
        draft.warnings.append(
            "--gpu_ids makes accelerate set CUDA_VISIBLE_DEVICES itself, replacing gputop's "
            "pinning: leave it out."
        )
    why = "Without --main_process_port (or one in its config file), accelerate uses 29500"
    draft.port("--main_process_port", why)
    draft.notes.append(
        "accelerate's config file (accelerate config) may set more; options given here win."
    )
    return count


def _deepspeed(draft: _Draft, environ: Mapping[str, str]) -> int | None:
    options, cards = draft.options, draft.cards
    overriding = [
        name
        for name in ("--include", "-i", "--exclude", "-e", "--num_gpus", "--num_accelerators")
        if name in options
    ]
    if (digits_within(options.get("--num_nodes"), 0, MAX_COUNT) or 0) > 1:
        overriding.append("--num_nodes")
    count: int | None = cards
    if overriding:
        count = digits_within(_given(options, "--num_gpus", "--num_accelerators"), 0, MAX_COUNT)
        draft.warnings.append(
            f"With {overriding[0]}, deepspeed ignores CUDA_VISIBLE_DEVICES and picks cards "
            "of the whole machine: gputop's pinning is lost. Leave it out; deepspeed then "
            f"starts one process per selected card ({cards})."
        )
    else:
        draft.notes.append(
            f"deepspeed starts one process per visible card: {cards}. It reads "
            "CUDA_VISIBLE_DEVICES as integers, so gputop pins by index."
        )
    draft.port("--master_port", "Without --master_port, deepspeed uses 29500")
    return count


_LAUNCHERS = {
    ACCELERATE: (_ACCELERATE_FLAGS, _accelerate),
    DEEPSPEED: (_DEEPSPEED_FLAGS, _deepspeed),
}
"""Each launcher's flags without a value, and what gputop adds for it (else torchrun's)."""


def rank_lines(launcher: LauncherPlan, card_labels: Sequence[str]) -> list[str]:
    """``local rank 0 → cuda:0 → GPU 3 …`` for each process; ``card_labels[N]`` is cuda:N.
    Local rank N uses cuda:N by the usual convention (``torch.cuda.set_device(LOCAL_RANK)``)."""
    if launcher.processes_per_node is None:
        return [f"{launcher.launcher} decides how many processes it starts."]
    count = launcher.processes_per_node
    lines = [f"{launcher.launcher} starts {count} process{'' if count == 1 else 'es'}:"]
    for rank in range(count):
        where = f"cuda:{rank} → {card_labels[rank]}" if rank < len(card_labels) else None
        lines.append(f"  local rank {rank} → {where or 'no card of its own'}")
    return lines
