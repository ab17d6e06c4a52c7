"""The launch dialog's choices: enter launches from them, as the dialog's hint says.

Textual's ``RadioSet`` and ``Checkbox`` toggle on enter as on space. In the launch dialog
enter launches from anywhere; these keep space (and the arrows of the radio set) for
choosing. A subclass's binding for a key replaces its base class's for that key.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Checkbox, RadioSet

LAUNCH_ON_ENTER = Binding("enter", "screen.launch", "Launch", show=False)


class LaunchRadioSet(RadioSet):
    BINDINGS = [LAUNCH_ON_ENTER]


class LaunchCheckbox(Checkbox):
    BINDINGS = [LAUNCH_ON_ENTER]
