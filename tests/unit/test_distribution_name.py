"""The distribution's name is ours everywhere: ``gputop`` on the package index is another
project's, so nothing tells a user to install that name (README, Install)."""

from __future__ import annotations

import re
import sys

import pytest
from helpers import REPO

from gputop import DISTRIBUTION
from gputop.core.install_advice import install_advice
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import classify_failure

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 path
    import tomli as tomllib

ROOT = REPO
# "pip install gputop", "pipx install gputop", "uv tool install --user gputop": the bare name
# (gputop-dash and gputop_dash-*.whl are ours).
STRANGERS_NAME = re.compile(
    r"\b(?:pipx?|uv tool|uv pip)\s+install\s+(?:--?\S+\s+)*gputop(?![-_\w]|\.\w)"
)
DOCUMENTS = [
    "README.md",
    "CHANGELOG.md",
    *(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
]


def test_pyproject_declares_the_distribution_gputop_says_it_is() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    assert project["name"] == DISTRIBUTION == "gputop-dash"
    assert project["scripts"] == {"gputop": "gputop.cli.main:main"}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_no_document_says_to_install_the_name_gputop_from_the_index(document: str) -> None:
    text = (ROOT / document).read_text()
    if document == "CHANGELOG.md":  # the entry that says what changed quotes the old line
        text = text.replace("README's old `pipx install gputop`", "")

    assert STRANGERS_NAME.findall(text) == []


@pytest.mark.parametrize(
    "line",
    ["pipx install gputop", "pip install --user gputop", "uv tool install gputop."],
)
def test_the_check_catches_the_strangers_name(line: str) -> None:
    assert STRANGERS_NAME.search(line)


@pytest.mark.parametrize(
    "line",
    ["pipx install gputop-dash", "pipx install dist/gputop_dash-0.1.0.whl", "pipx install ."],
)
def test_the_check_lets_our_names_through(line: str) -> None:
    assert not STRANGERS_NAME.search(line)


def test_every_install_message_names_gputop_hosts_install() -> None:
    reduced = HostStatus("gpu1", LinkState.LIVE, Mode.REDUCED).describe()
    nothing = classify_failure("gpu1", "", 127).advice or ""

    for text in (reduced, nothing):
        assert install_advice("gpu1") in text
        assert not STRANGERS_NAME.search(text)


def test_the_install_command_quotes_an_odd_host_for_the_shell() -> None:
    assert install_advice("user@[::1]") == (
        "install gputop there from here: gputop hosts install 'user@[::1]'"
    )
