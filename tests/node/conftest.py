"""Fixtures of the node tests: an embedded server, its client and the agents started (nodekit.py),
and those of the tests that run ``podstatus node`` as a subprocess (nodeproc.py).

A test module's own ``server`` or ``client`` fixture (an HTTP client, say) overrides these."""

from nodekit import agents, client, server
from nodeproc import http_api, http_server, kubeconfig, node_env, node_procs

__all__ = ["agents", "client", "http_api", "http_server", "kubeconfig", "node_env", "node_procs", "server"]
