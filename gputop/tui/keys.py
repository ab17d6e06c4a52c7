"""Every key of the dashboard, for the help screen (``?``); the README shows the everyday ones.

tests/unit/test_help_keys.py ties this list to the bindings both ways: every key bound on the
dashboard is here, and every key here is bound.
"""

from __future__ import annotations

KEY_HELP: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Cards",
        [
            ("←/→  j/k", "move the highlight across cards"),
            ("↑/↓", "move to the card above / below"),
            ("m", "on a MIG card: highlight its next MIG instance, then the whole card"),
            ("space", "add or remove the highlighted card or MIG instance from the selection"),
            ("a", "select every card"),
            ("escape", "clear the selection (then the highlighted card is the selection)"),
            ("H", "the highlighted card's history: use and holders (1 / 2 / 3: hour, day, week)"),
            ("e", "the highlighted card's health: verdict, counters, Xids and what to do"),
        ],
    ),
    (
        "Processes",
        [
            ("tab", "move between the cards, the processes, the jobs and the PyTorch view"),
            ("↑/↓ pgup/pgdn home/end", "in the processes: move the highlight (to first/last)"),
            ("←/→", "in the processes: scroll the command column sideways"),
            ("f", "show only the highlighted card's processes (again: all)"),
            ("/", "show only processes with some text (a user, a command, a pid)"),
            ("u", "show only your own processes (again: everyone's)"),
            ("s / S", "next sort column / reverse the order"),
            ("o", "re-sort now (otherwise a row passes another only by a clear margin)"),
            ("enter", "in the processes: its detail (cuda:N, ranks, its gputop or Slurm job)"),
            ("r", "in the processes: collapse a distributed job's ranks to one line, or expand"),
            ("t / T", "terminate (SIGTERM) / kill (SIGKILL) your own process, after a yes"),
            ("H", "in the processes: the highlighted process's history (memory, GPU time)"),
        ],
    ),
    (
        "Jobs",
        [
            ("l", "launch a command on the selected cards (detached, or in a tmux window)"),
            ("J", "show or hide the jobs gputop launched"),
            ("enter", "in the jobs: follow the highlighted job's log"),
            ("K", "in the jobs: stop the highlighted job (SIGTERM, then SIGKILL), after a yes"),
        ],
    ),
    (
        "Hosts (gputop --hosts)",
        [
            ("g / G", "jump to the next / previous host"),
            ("c", "collapse the highlighted host to its summary line, or expand it"),
            ("C", "collapse every host, or expand them all"),
            ("h", "show only the highlighted host's processes (again: every host)"),
            ("l K enter t T", "act on the highlighted card's or job's host, through ssh"),
            ("H", "a host's card: its history, asked of that host (its own gputop record)"),
        ],
    ),
    (
        "Views",
        [
            ("p", "show or hide the PyTorch view (cuda:N to physical cards)"),
            ("ctrl+p", "command palette: every action by name"),
            ("?", "this help"),
            ("ctrl+l", "redraw the whole screen (after another program wrote on it)"),
            ("ctrl+z", "suspend to the shell; fg resumes, the screen redrawn whole"),
            ("q", "quit (launched jobs keep running)"),
        ],
    ),
]
