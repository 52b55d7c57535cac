"""The status manager: the node's source of truth for pod status, synced to the API server.

With default options it behaves towards the API server exactly as the
kubelet's ``pkg/kubelet/status`` manager does (SPEC section 4): one worker, a
GET before every PATCH, a full resync every 10 seconds. The options of SPEC
section 6 are opt-in (:class:`ManagerOptions`):

* ``skip_get``: write from the last pod known to be on the server, with its
  ``resourceVersion`` as a precondition; read again only on a conflict.
* ``workers``: several sync workers; one pod is never synced by two at once,
  and every sync sends the newest cached status, so changes are never reordered.
* ``prioritize``: readiness and terminal transitions jump the queue.
* ``backoff``: pods that keep failing wait longer; pods that are gone are not
  asked for again until their status changes.

``fast_path=True`` turns all four on.
"""

from .accept import volume_health_condition_sets_equal
from .core import Manager, new_manager
from .state import ManagerOptions, SetPodStatusResult, SyncRecord

__all__ = [
    "Manager",
    "ManagerOptions",
    "SetPodStatusResult",
    "SyncRecord",
    "new_manager",
    "volume_health_condition_sets_equal",
]
