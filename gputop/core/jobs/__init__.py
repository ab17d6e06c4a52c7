"""Launching jobs pinned to chosen GPUs, and keeping track of them.

``launch`` checks and starts a job, ``supervisor`` runs it detached and records how it
ended, ``store`` keeps every job in a private SQLite file, ``stop`` ends a job's whole
process group, ``policy`` says when a card is free. Nothing here imports Textual.
"""
