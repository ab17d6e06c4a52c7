"""The Textual dashboard: renders snapshots from the core and turns keys into calls on it."""
