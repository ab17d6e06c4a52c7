"""History on disk: ``gputop record`` writes samples into an SQLite store, ``gputop report``
reads who used the cards and who held them idle. docs/history.md has the schema, the
retention and the units."""
