"""gputop: a terminal dashboard for NVIDIA GPUs.

The distribution is named ``gputop-dash`` on the package index (``gputop`` there is another
project's); the import package and the command stay ``gputop``. See README, Install.
"""

__version__ = "0.1.0"
DISTRIBUTION = "gputop-dash"
