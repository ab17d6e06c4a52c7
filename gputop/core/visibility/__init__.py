"""Which physical GPU is ``cuda:N``: the CUDA driver's rules, and their inverse for launching."""

from gputop.core.visibility.inverse import pin_environment
from gputop.core.visibility.model import (
    LogicalDevice,
    Pinning,
    SelectionError,
    Visibility,
    VisibilityWarning,
)
from gputop.core.visibility.order import cuda_order, estimated_speed
from gputop.core.visibility.resolve import resolve_visibility

__all__ = [
    "LogicalDevice",
    "Pinning",
    "SelectionError",
    "Visibility",
    "VisibilityWarning",
    "cuda_order",
    "estimated_speed",
    "pin_environment",
    "resolve_visibility",
]
