"""Tests of gputop's logic and commands on simulated GPUs, in this process or in gputop's own
subprocesses: no dashboard running, no outside component, no second user (docs/testing.md).
Their fixtures are the shared ones of tests/conftest.py."""
