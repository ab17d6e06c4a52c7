"""The real-GPU suite (``make gpu-check``, docs/real-gpu.md).

Everything here runs only where an NVIDIA driver answers; elsewhere the suite is skipped at
collection with one reason. ``compare.py`` and ``cuda_probe.py`` know nothing of gputop: they
are the independent side of every comparison, and the normal suite tests them against
recorded ``nvidia-smi`` outputs (tests/unit/test_gpu_compare.py) and the C libcuda imitation
(tests/real/test_gpu_probe.py).
"""
