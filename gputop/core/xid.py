"""The Xid catalogue: what each code the NVIDIA driver reports means and what to do about it.

In gputop's own words, from NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors) and
how DCGM, the Kubernetes device plugin and gpud classify the codes; docs/health.md lists the
sources and where they disagree. ``severity`` decides a card's verdict (gputop/core/health.py):
``critical`` where NVIDIA's first action is a reset, a reboot or support, ``warning`` where it
is to restart the application or nothing (the card itself is usually fine).
"""

from __future__ import annotations

from typing import Literal

from gputop.core.records import frozen

Severity = Literal["warning", "critical"]

UNKNOWN_XID = 999
"""What NVML's event data says for an Xid the driver could not name (nvml.h)."""

RESTART_APP = "restart the application"
RESET_GPU = "reset the GPU"
REBOOT = "reboot the node"
SUPPORT = "contact NVIDIA support if it happens again"
REPLACE = "replace the board if it happens again"


@frozen
class XidInfo:
    code: int
    short: str
    """A few words for a badge: ``fell off the bus``."""
    meaning: str
    action: str
    severity: Severity


CATALOGUE: dict[int, XidInfo] = {
    info.code: info
    for info in (
        XidInfo(
            13,
            "graphics engine exception",
            "A program on the GPU did something illegal (a bad address, an illegal instruction, "
            "an out-of-range access); almost always the program's fault, not the card's.",
            f"{RESTART_APP}; check its code (run it under compute-sanitizer)",
            "warning",
        ),
        XidInfo(
            31,
            "memory page fault",
            "A program touched GPU memory it does not own (an illegal address); usually the "
            "program's fault, rarely the driver's.",
            f"{RESTART_APP}; check its code",
            "warning",
        ),
        XidInfo(
            32,
            "corrupted command stream",
            "The stream of commands to the GPU arrived corrupted (PBDMA error); a program's bug, "
            "or data damaged on its way over PCIe.",
            f"{RESTART_APP}; if it happens again, check the PCIe link and the board",
            "warning",
        ),
        XidInfo(
            38,
            "driver firmware error",
            "A watchdog in the driver's firmware fired (FECS timeout).",
            f"{RESET_GPU}; update the driver; {SUPPORT}",
            "warning",
        ),
        XidInfo(
            43,
            "GPU stopped processing",
            "The GPU stopped a program's work after a fault in that program; the card goes on.",
            RESTART_APP,
            "warning",
        ),
        XidInfo(
            45,
            "work cleaned up",
            "The driver ended a program's work: the program was killed, or an earlier error "
            "forced it; follow that other Xid if there is one.",
            "nothing on its own; follow any other Xid reported with it",
            "warning",
        ),
        XidInfo(
            48,
            "uncorrectable ECC error",
            "A double-bit (uncorrectable) error in GPU memory: data a program read may be wrong.",
            f"rerun the jobs that ran on it; {RESET_GPU} so the memory is repaired; {REPLACE}",
            "critical",
        ),
        XidInfo(
            61,
            "micro-controller breakpoint",
            "An internal micro-controller of the GPU stopped at a breakpoint or warning.",
            f"{RESET_GPU}; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            62,
            "micro-controller halted",
            "An internal micro-controller of the GPU halted (DCGM groups it with thermal trouble).",
            f"{RESET_GPU}; check cooling and power; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            63,
            "memory repair recorded",
            "The driver recorded a page retirement or a row remap after memory errors; it takes "
            "effect at the next reset.",
            f"{RESET_GPU} when it is idle",
            "warning",
        ),
        XidInfo(
            64,
            "memory repair failed",
            "The driver could not record a page retirement or row remap (no room left, or an "
            "InfoROM error).",
            f"{RESET_GPU}, then watch it; {REPLACE}",
            "critical",
        ),
        XidInfo(
            68,
            "video decoder exception",
            "The video decoder (NVDEC) hit an error, usually from the program's input.",
            f"{RESTART_APP}; {SUPPORT}",
            "warning",
        ),
        XidInfo(
            69,
            "graphics class error",
            "The graphics engine was given an invalid request (class error).",
            f"{RESTART_APP}; check the application and CUDA versions",
            "warning",
        ),
        XidInfo(
            74,
            "NVLink error",
            "An NVLink link reported an error (CRC, replay, or a link going down).",
            f"{RESET_GPU}; check the NVLink links and bridges; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            79,
            "fell off the bus",
            "The GPU no longer answers on PCIe: power, heat, a loose board or a failing board.",
            f"{REBOOT}; check power, cooling and seating; {REPLACE}",
            "critical",
        ),
        XidInfo(
            92,
            "many corrected ECC errors",
            "An unusually high rate of single-bit (corrected) memory errors.",
            f"watch it; {REPLACE}",
            "warning",
        ),
        XidInfo(
            94,
            "contained memory error",
            "An uncorrectable memory error, contained to the program that used that memory; other "
            "programs and the card go on.",
            f"{RESTART_APP} that was hit; reset the GPU when it is idle",
            "warning",
        ),
        XidInfo(
            95,
            "uncontained memory error",
            "An uncorrectable memory error the GPU could not contain: every program on the card "
            "may have been hit.",
            f"rerun the jobs that ran on it; {RESET_GPU}",
            "critical",
        ),
        XidInfo(
            109,
            "context switch timeout",
            "The GPU took too long to switch between programs (sources disagree whether the card "
            "or the program is to blame).",
            f"{RESTART_APP}; {RESET_GPU} if it happens again",
            "warning",
        ),
        XidInfo(
            119,
            "GSP firmware timeout",
            "The GPU's system processor (GSP) firmware stopped answering the driver.",
            f"{RESET_GPU} (or {REBOOT}); update the driver; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            120,
            "GSP firmware error",
            "The GPU's system processor (GSP) firmware reported an error.",
            f"{RESET_GPU} (or {REBOOT}); update the driver; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            121,
            "C2C link error",
            "The chip-to-chip (C2C) link between the GPU and its CPU reported an error.",
            SUPPORT,
            "warning",
        ),
        XidInfo(
            140,
            "ECC error escaped",
            "An uncorrectable memory error escaped containment: results may be wrong.",
            f"rerun the jobs that ran on it; {RESET_GPU}; {REPLACE}",
            "critical",
        ),
        XidInfo(
            143,
            "GPU initialisation error",
            "The GPU failed to initialise.",
            f"{RESET_GPU}; {REPLACE}",
            "critical",
        ),
        *(
            XidInfo(
                code,
                "NVLink5 error",
                "An NVLink5 unit reported an error (the log line names the unit).",
                f"check the NVLink fabric; {RESET_GPU} if the links do not recover",
                "warning",
            )
            for code in range(144, 150)
        ),
        XidInfo(
            150,
            "NVLink watchdog",
            "The NVLink management engine's watchdog fired.",
            f"{RESET_GPU}; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            151,
            "key rotation error",
            "Confidential computing could not rotate its keys.",
            "restart the virtual machine",
            "warning",
        ),
        XidInfo(
            154,
            "recovery action changed",
            "The driver says which recovery the GPU now needs (the kernel log names it).",
            "do what the kernel log line says (reset the GPU, or reboot the node)",
            "warning",
        ),
        XidInfo(
            155,
            "NVLink software error",
            "NVLink software detected an error.",
            f"{RESET_GPU}; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            156,
            "resource retired",
            "The GPU retired a failing internal resource.",
            f"{RESET_GPU} when it is idle",
            "warning",
        ),
        XidInfo(
            157,
            "resource retirement failed",
            "The GPU could not retire a failing internal resource.",
            f"{RESET_GPU}; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            158,
            "GPU fatal timeout",
            "The GPU stopped responding within the driver's fatal timeout.",
            f"{RESET_GPU}; {SUPPORT}",
            "critical",
        ),
        XidInfo(
            159,
            "CHI non-data error",
            "The coherent host interface reported an error that carried no data.",
            f"{RESTART_APP}; {SUPPORT}",
            "warning",
        ),
        XidInfo(
            160,
            "channel retired",
            "The GPU retired a failing channel (memory marked for repair).",
            f"{RESET_GPU} when it is idle",
            "warning",
        ),
        XidInfo(
            161,
            "channel retirement failed",
            "The GPU could not retire a failing channel.",
            f"{RESET_GPU}; {SUPPORT}",
            "critical",
        ),
    )
}


def describe(code: int) -> XidInfo:
    """The catalogue's entry for ``code``; an unknown code (999 included) as unknown."""
    info = CATALOGUE.get(code)
    if info is not None:
        return info
    return XidInfo(
        code,
        "unknown",
        "An Xid gputop's catalogue does not know"
        + (" (the driver could not name it)" if code == UNKNOWN_XID else "")
        + ".",
        "look it up in NVIDIA's Xid catalogue; read the kernel log (dmesg) around it",
        "warning",
    )
