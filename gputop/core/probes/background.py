"""Driver probes for running processes' environments, asked without ever waiting for them.

The sampler maps each GPU process's own ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER``
(gputop.core.sampling.process_env). Where the driver can be asked, its enumeration is the
mapping (gputop.core.probes.driver_mapping); but a probe is a child process, and sampling
must not wait for one. Each new (value, order) is queued for one daemon thread; the answer
is used from the next refresh on, the rules' prediction until then. Once the driver library
is known to be missing, nothing more is asked.
"""

from __future__ import annotations

import queue
import threading

from gputop.core.probes.driver import DriverProbe, DriverProbeResult

Key = tuple[str | None, str | None]


class BackgroundDriverProbe:
    def __init__(self, probe: DriverProbe | None = None) -> None:
        self._probe = probe or DriverProbe()
        self._lock = threading.Lock()
        self._answers: dict[Key, DriverProbeResult] = {}
        self._asked: set[Key] = set()
        self._queue: queue.SimpleQueue[Key] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._no_driver = False

    def answer(
        self, cuda_visible_devices: str | None, cuda_device_order: str | None
    ) -> DriverProbeResult | None:
        """The driver's answer for this environment if it has come, else None (asked now)."""
        key = (cuda_visible_devices, cuda_device_order)
        with self._lock:
            found = self._answers.get(key)
            if found is not None or self._no_driver or key in self._asked:
                return found
            self._asked.add(key)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="process-driver-probe", daemon=True
                )
                self._thread.start()
        self._queue.put(key)
        return None

    def _work(self) -> None:
        while True:
            key = self._queue.get()
            result = self._probe.probe(*key)
            with self._lock:
                if result.status in ("ok", "no-device"):
                    self._answers[key] = result
                elif result.status == "no-libcuda":
                    self._no_driver = True  # a driver library does not appear while we run
                else:
                    self._asked.discard(key)  # asked again later (DriverProbe waits 60 s)
