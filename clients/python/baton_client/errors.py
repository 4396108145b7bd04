"""Typed errors: every refusal of the API as `BatonApiError`, carrying the
error body's code, message and details, and the JSON path at fault."""

from typing import Any


class BatonError(Exception):
    """Anything the client could not do."""


class BatonApiError(BatonError):
    """The API refused a request (`{"error": {"code", "message", "details"?}}`)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None,
                 retry_after: float | None = None):
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after
        super().__init__(f"{status} {code}: {message}")

    @property
    def path(self) -> str | None:
        """The JSON path of what is wrong (`$.objective`), when the API named one;
        the first of `details.errors[]` otherwise."""
        if isinstance(self.details.get("path"), str):
            return self.details["path"]
        errors = self.details.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return errors[0].get("path")
        return None

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (rate limits, limits of
        open work, a service unavailable)."""
        return self.status in (408, 425, 429, 502, 503, 504)


class StreamGaveUp(BatonError):
    """A run's event stream kept dropping; the frames read so far were yielded."""
