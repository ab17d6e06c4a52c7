"""A real two-process DDP job for the launcher tests: a gloo group that all-reduces.

``python ddp_probe.py OUT_DIR``, started by torchrun: each rank joins the process group,
all-reduces ``rank + 1`` and writes ``OUT_DIR/rank<RANK>.json`` with the sum, the world
size and the CUDA and rendezvous variables it was given. CPU torch is enough (gloo).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

WATCHED = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "RANK", "LOCAL_RANK", "WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
)  # fmt: skip


def main() -> int:
    out_dir = sys.argv[1]
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    report = {
        "rank": rank,
        "world_size": dist.get_world_size(),
        "sum": value.item(),
        "env": {name: os.environ.get(name) for name in WATCHED},
    }
    dist.destroy_process_group()
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(report, file)
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
