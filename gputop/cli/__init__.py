"""The ``gputop`` command line: subcommands that use the core directly."""
