"""GPU servers reached over SSH: transport, the agent's line protocol, hosts. See docs/lab.md."""
