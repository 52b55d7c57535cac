"""The served resources, one module per kind (kube-apiserver's pkg/registry): each defines its
:class:`~podstatus.server.storage.strategy.Strategy` and registers its resource when imported.

The import order is the order discovery lists them in.
"""

from . import pods  # noqa: I001  (the order below is the registration order)
from . import nodes
from . import namespaces
from . import leases
from . import events

__all__ = ["events", "leases", "namespaces", "nodes", "pods"]
