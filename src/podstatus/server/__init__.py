"""An embedded Kubernetes API server (pods, nodes, Leases, Events): in memory, on loopback HTTP.

:class:`Store` holds the objects and their history; :class:`EmbeddedApiServer`
serves it over HTTP to real clients (``kubectl``, the ``kubernetes`` package);
:class:`podstatus.clients.embedded.EmbeddedClient` uses it in process.
"""

from . import registry  # noqa: F401  (registers the served resources: their strategies)
from .endpoints import ApiHandler, Request, Response
from .http import EmbeddedApiServer, serve
from .selectors import FieldSelector, LabelSelector, SelectorError
from .storage.objects import Event, Stored
from .storage.store import Store
from .storage.watch import Watch

__all__ = [
    "ApiHandler",
    "EmbeddedApiServer",
    "Event",
    "FieldSelector",
    "LabelSelector",
    "Request",
    "Response",
    "SelectorError",
    "Store",
    "Stored",
    "Watch",
    "serve",
]
