"""A typed client for Baton's HTTP API: `BatonClient` (sync) and
`AsyncBatonClient` (asyncio), models generated from `docs/openapi.json`
(`baton_client.models`), typed errors with the JSON path
(`BatonApiError.path`), and event streams that resume after a dropped
connection."""

from . import models
from .client import AsyncBatonClient, BatonClient, Frame, status_text
from .errors import BatonApiError, BatonError, StreamGaveUp

__all__ = ["AsyncBatonClient", "BatonApiError", "BatonClient", "BatonError", "Frame",
           "StreamGaveUp", "models", "status_text"]
