"""Errors of the smol API, one class per server error code (docs/api.md, Errors)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Type


class SmolError(Exception):
    """Anything this SDK raises."""


class SmolConnectionError(SmolError):
    """The server could not be reached (no socket, refused, TLS failure)."""


class SmolProtocolError(SmolError):
    """The server's answer broke a bound or the protocol (an endless SSE line, a huge body, bad JSON)."""


class SmolApiError(SmolError):
    """A non-2xx answer: the same code, hint and exit code the CLI gives for the same failure."""

    def __init__(
        self,
        code: str,
        message: str,
        hint: Optional[str] = None,
        exit_code: int = 1,
        status: int = 0,
        where: Optional[str] = None,
        issues: Optional[List[Dict[str, str]]] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
        self.status = status
        self.where = where
        self.issues: List[Dict[str, str]] = issues or []

    def __str__(self) -> str:
        text = f"{self.message} [{self.code}, HTTP {self.status}]"
        if self.issues:
            text += "".join(f"\n  {i.get('path', '')}: {i.get('message', '')}" for i in self.issues)
        return text + (f"\n  hint: {self.hint}" if self.hint else "")


class InvalidInput(SmolApiError):
    """400: a body or query failing its schema; `issues` names each field. Nothing was changed."""


class UserError(SmolApiError):
    """400: a request the server understood but refuses (see `hint`)."""


class Unauthorized(SmolApiError):
    """401: missing or wrong bearer token on a TCP listener."""


class NotFound(SmolApiError):
    """404: no such machine, file, point or image."""


class MethodNotAllowed(SmolApiError):
    """405: the route exists but not with this method (an SDK newer than its server)."""


class Conflict(SmolApiError):
    """409: name taken, machine in the wrong state, machine busy."""


class PayloadTooLarge(SmolApiError):
    """413: the request body is over the server's cap."""


class Timeout(SmolApiError):
    """504: the operation's deadline passed on the server."""


class GuestChannel(SmolApiError):
    """502: the channel to the guest agent broke (QEMU died mid-call)."""


class BootFailed(SmolApiError):
    """The guest did not become ready in time."""


class Integrity(SmolApiError):
    """422: a checksum or signature mismatch in an artifact or image."""


class Failed(SmolApiError):
    """500: a generic failure (exit code 1)."""


class Gpu(SmolApiError):
    """502: CUDA/NVML remoting failed."""


class Unavailable(SmolApiError):
    """503: temporary (lease lost, ledger busy, overloaded): retry."""


class Interrupted(SmolApiError):
    """503: the operation was interrupted on the server."""


class NoSpace(SmolApiError):
    """507: the server's data directory is full or cannot be written."""


class Prerequisite(SmolApiError):
    """503: QEMU, kernel or agent missing on the server host (`smol setup`)."""


class Internal(SmolApiError):
    """500: a bug in smol."""


_BY_CODE: Dict[str, Type[SmolApiError]] = {
    "invalid_input": InvalidInput,
    "user_error": UserError,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
    "timeout": Timeout,
    "guest_channel": GuestChannel,
    "boot_failed": BootFailed,
    "prerequisite": Prerequisite,
    "internal": Internal,
    "integrity": Integrity,
    "failed": Failed,
    "gpu": Gpu,
    "unavailable": Unavailable,
    "interrupted": Interrupted,
    "no_space": NoSpace,
}

# When the body is not the error shape (a proxy's page, a crash), the status still picks a class.
_BY_STATUS: Dict[int, Type[SmolApiError]] = {
    400: InvalidInput, 401: Unauthorized, 404: NotFound, 405: MethodNotAllowed, 409: Conflict, 413: PayloadTooLarge,
    422: Integrity, 500: Internal, 502: GuestChannel, 503: Unavailable, 504: Timeout, 507: NoSpace,
}


def error_from_body(status: int, body: Any, fallback_text: str = "") -> SmolApiError:
    """The error for an answer `status` whose parsed JSON body is `body` (None when it was not JSON)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or not isinstance(err.get("code"), str):
        cls = _BY_STATUS.get(status, SmolApiError)
        text = fallback_text.strip()[:500] or "no error body"
        return cls(f"http_{status}", f"HTTP {status} without the smol error shape: {text}", status=status)
    code = err["code"]
    issues = err.get("issues")
    exit_code = err.get("exitCode")
    return _BY_CODE.get(code, SmolApiError)(
        code,
        str(err.get("message", "")),
        hint=err.get("hint") if isinstance(err.get("hint"), str) else None,
        exit_code=exit_code if isinstance(exit_code, int) else 1,
        status=status,
        where=err.get("where") if isinstance(err.get("where"), str) else None,
        issues=[i for i in issues if isinstance(i, dict)] if isinstance(issues, list) else None,
    )
