"""The UI-free core of gputop: sampling, simulated GPUs, CUDA visibility, jobs.

Nothing under this package imports Textual or torch (an import-linter contract and a
test enforce it), so the CLI, the dashboard and the tests all share one engine.
"""
