"""Tests of the dashboard: Textual's Pilot, approved SVG snapshots (``__snapshots__/``, one
folder per test file, regenerated with ``--snapshot-update``), or the dashboard on a pty
(docs/testing.md). Their fixtures are the shared ones of tests/conftest.py; the helpers are
helpers.dashboard, helpers.lab_dashboard, helpers.pty_run and helpers.pty_terminal."""
