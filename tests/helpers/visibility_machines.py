"""Machines for the CUDA visibility tests, built directly from the sample model."""

from __future__ import annotations

from gputop.core.model import Clocks, GpuSample, MigDevice
from gputop.core.visibility import Visibility

U = (
    "GPU-11111111-aaaa-bbbb-cccc-000000000000",
    "GPU-22222222-aaaa-bbbb-cccc-000000000001",
    "GPU-2222ffff-aaaa-bbbb-cccc-000000000002",
    "GPU-44444444-aaaa-bbbb-cccc-000000000003",
)
"""The research notes' four UUIDs: U1 and U2 share the prefix GPU-2222."""


def gpu(
    physical_index: int,
    uuid: str,
    name: str = "NVIDIA A100-SXM4-80GB",
    capability: tuple[int, int] = (8, 0),
    sms: int = 108,
    sm_clock_mhz: int = 1410,
    **fields: object,
) -> GpuSample:
    return GpuSample(
        physical_index=physical_index,
        uuid=uuid,
        name=name,
        pci_bus_id=f"00000000:{0x10 + physical_index * 0x10:02X}:00.0",
        compute_capability=capability,
        multiprocessor_count=sms,
        max_clocks=Clocks(sm_mhz=sm_clock_mhz, graphics_mhz=sm_clock_mhz),
        mig_mode_current=False,
        **fields,  # type: ignore[arg-type]
    )


def four_same() -> tuple[GpuSample, ...]:
    return tuple(gpu(i, uuid) for i, uuid in enumerate(U))


def mixed() -> tuple[GpuSample, ...]:
    """PCI order: RTX 3060, A100 40GB, T4, H100 PCIe; fastest first: H100, A100, 3060, T4."""
    tail = "-0000-0000-0000-000000000000"
    return (
        gpu(0, f"GPU-30600000{tail}", "NVIDIA GeForce RTX 3060", (8, 6), 28, 1837),
        gpu(1, f"GPU-a1000000{tail}", "NVIDIA A100-SXM4-40GB", (8, 0), 108, 1410),
        gpu(2, f"GPU-74000000{tail}", "Tesla T4", (7, 5), 40, 1590),
        gpu(3, f"GPU-41000000{tail}", "NVIDIA H100 PCIe", (9, 0), 114, 1755),
    )


MIG_A = "MIG-aaaaaaaa-1111-2222-3333-444444444444"
MIG_B = "MIG-bbbbbbbb-1111-2222-3333-444444444444"
MIG_C = "MIG-cccccccc-1111-2222-3333-444444444444"


def mig_box() -> tuple[GpuSample, ...]:
    """GPU 0 in MIG mode with three instances (GI 1, 2, 3), GPU 1 whole."""
    instances = tuple(
        MigDevice(
            mig_index=i,
            uuid=uuid,
            gpu_instance_id=i + 1,
            compute_instance_id=0,
            memory_total_bytes=None,
            memory_used_bytes=None,
            multiprocessor_count=14,
            name=f"NVIDIA A100-SXM4-80GB MIG {profile}",
        )
        for i, (uuid, profile) in enumerate(
            ((MIG_A, "3g.40gb"), (MIG_B, "2g.20gb"), (MIG_C, "1g.10gb"))
        )
    )
    mig_gpu = gpu(0, U[0])
    return (
        GpuSample(
            **{
                **{f: getattr(mig_gpu, f) for f in mig_gpu.__dataclass_fields__},
                "mig_mode_current": True,
                "mig_devices": instances,
            }
        ),
        gpu(1, U[1]),
    )


def codes(visibility: Visibility) -> tuple[str, ...]:
    """The codes of its warnings, in order."""
    return tuple(w.code for w in visibility.warnings)
