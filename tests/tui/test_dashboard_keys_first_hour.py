"""What a new user's first hour with the keys finds (issue 40): ctrl+c's hint, where the
focus is after a launch and after a panel goes away, and that it shows."""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app

BIG = (160, 48)
SMALL = (80, 24)


def notifications(app: object) -> list[str]:
    return [str(n.message) for n in app._notifications]  # type: ignore[attr-defined]


async def test_ctrl_c_says_in_plain_words_that_q_quits() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        (said,) = notifications(app)
        assert said == "Press q to quit (launched jobs keep running)."
        assert "[" not in said and "ctrl+q" not in said
