"""Small text renderings shared by the widgets: bars, sparklines, threshold colours.

Styles are named theme variables' plain equivalents so Rich can downgrade them to 256 or 16
colours in tmux and older terminals.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Span, Text

SPARK_CHARS = " ▁▂▃▄▅▆▇█"
BAR_FULL = "█"
BAR_EMPTY = "░"


def level_style(percent: float | None, warn: float = 70, alert: float = 90) -> str:
    if percent is None:
        return "dim"
    if percent >= alert:
        return "bold red"
    if percent >= warn:
        return "yellow"
    return "green"


_LEVEL_ORDER = {"dim": -1, "green": 0, "yellow": 1, "bold red": 2}


def sticky_level_style(
    percent: float | None,
    previous: str | None,
    warn: float = 70,
    alert: float = 90,
    margin: float = 5,
) -> str:
    """``level_style`` with hysteresis: a level rises at once, and falls only once the value
    is ``margin`` below the threshold it crossed.

    A busy GPU jitters around 90 %; without this its bar would flip between yellow and red
    every second, which is noise to a person and a whole bar resent to the terminal.
    """
    now = level_style(percent, warn, alert)
    if percent is None or previous is None or previous not in _LEVEL_ORDER:
        return now
    if _LEVEL_ORDER[now] >= _LEVEL_ORDER[previous]:
        return now
    threshold = alert if previous == "bold red" else warn
    return now if percent < threshold - margin else previous


def temperature_style(celsius: int | None) -> str:
    """NVIDIA data-centre boards slow down from about 85 °C; 75 °C is worth a look."""
    if celsius is None:
        return "dim"
    if celsius >= 85:
        return "bold red"
    if celsius >= 75:
        return "yellow"
    return "green"


def bar(percent: float | None, width: int, style: str | None = None) -> Text:
    """``████░░░░`` filled to ``percent``; all dim when unknown."""
    if width <= 0:
        return Text()
    if percent is None:
        return Text(BAR_EMPTY * width, style="dim")
    filled = round(max(0.0, min(100.0, percent)) / 100 * width)
    text = Text(BAR_FULL * filled, style=style or level_style(percent))
    text.append(BAR_EMPTY * (width - filled), style="dim")
    return text


def _spark_char(value: float) -> str:
    level = round(max(0, min(100, value)) / 100 * (len(SPARK_CHARS) - 1))
    return SPARK_CHARS[max(level, 1)]


_SPARK_OF: dict[float | None, str] = {None: " "} | {p: _spark_char(p) for p in range(101)}
"""A gap's character and every whole percent's block: a card's sparkline is then a look-up
per point (anything else, a fraction or a value outside 0-100, is worked out)."""


def sparkline(series: Sequence[int | None], width: int, style: str = "cyan") -> Text:
    """The last ``width`` readings, oldest left; gaps (unknown) as spaces."""
    if width <= 0:
        return Text()
    recent = series[-width:] if isinstance(series, tuple | list) else list(series)[-width:]
    known = _SPARK_OF
    line = "".join([known.get(value) or _spark_char(value) for value in recent])  # type: ignore[arg-type]
    return Text(line.rjust(width), style=style)


def percent_of(part: int | None, whole: int | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


Part = str | Text | tuple[str, str]
"""A piece of a line: plain text, a ``Text``, or (text, style)."""


def assembled(*parts: Part, tab_size: int | None = 8) -> Text:
    """``Text.assemble(*parts)`` of gputop's own text (figures, bars, labels, and text that
    went through the sanitiser already), with no control codes for ``Text.append`` to strip
    part by part: the same text and spans, made in one pass (a card's lines and the status
    line are made again at every refresh).
    """
    texts: list[str] = []
    spans: list[Span] = []
    at = 0
    for part in parts:
        if isinstance(part, Text):
            text = part.plain
            if text:
                if part.style:
                    spans.append(Span(at, at + len(text), part.style))
                spans.extend(Span(start + at, end + at, style) for start, end, style in part.spans)
        else:
            text, style = (part, "") if isinstance(part, str) else part
            if text and style:
                spans.append(Span(at, at + len(text), style))
        texts.append(text)
        at += len(text)
    return Text("".join(texts), spans=spans, tab_size=tab_size)
