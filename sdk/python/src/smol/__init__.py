"""Python SDK for `smol serve` (docs/api.md): machines, exec, files, fork, pause. Standard library only."""
from .client import Machines, Smol
from .errors import (
    BootFailed, Conflict, Failed, Gpu, GuestChannel, Integrity, Internal, Interrupted, InvalidInput, MethodNotAllowed,
    NoSpace, NotFound, PayloadTooLarge, Prerequisite, SmolApiError, SmolConnectionError, SmolError, SmolProtocolError,
    Timeout, Unauthorized, Unavailable, UserError,
)
from .machine import Clones, ExecStream, Files, Machine
from .sse import SseEvent, SseParser
from .types import ExecExit, ExecResult, FileEntry, FileList, MachineEvent, MachineInfo

__version__ = "0.1.0"

__all__ = [
    "Smol", "Machines", "Machine", "Files", "ExecStream", "Clones",
    "ExecResult", "ExecExit", "FileEntry", "FileList", "MachineEvent", "MachineInfo", "SseEvent", "SseParser",
    "SmolError", "SmolApiError", "SmolConnectionError", "SmolProtocolError",
    "InvalidInput", "UserError", "Unauthorized", "NotFound", "MethodNotAllowed", "Conflict", "PayloadTooLarge", "Timeout",
    "GuestChannel", "BootFailed", "Prerequisite", "Internal", "Integrity", "Failed", "Gpu", "Unavailable",
    "Interrupted", "NoSpace",
]
