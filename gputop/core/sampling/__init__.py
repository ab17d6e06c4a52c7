"""Reading the machine: one immutable snapshot of every GPU and its processes per refresh.

``source`` opens the real driver or a simulated scenario, ``nvml_backend`` batches one
snapshot per call through ``nvml_fields`` (one failing field is "N/A", never an error),
``nvml_processes`` and ``nvml_running`` list the GPU processes, ``host_processes``,
``proc_counters`` and ``pid_namespace`` add what the host knows about their pids, and
``history`` keeps the recent readings the sparklines draw. Nothing here imports Textual.
"""
