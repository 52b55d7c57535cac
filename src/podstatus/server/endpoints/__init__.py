"""The embedded server's endpoints, apart from its HTTP front: :class:`ApiHandler` routes a
:class:`Request` to them and returns a :class:`Response`."""

from .handler import ApiHandler
from .wire import MAX_BODY_BYTES, Request, Response

__all__ = ["MAX_BODY_BYTES", "ApiHandler", "Request", "Response"]
