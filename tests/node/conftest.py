"""Fixtures of the tests that run ``podstatus node`` as a subprocess (see nodeproc.py)."""

from nodeproc import http_api, http_server, kubeconfig, node_env, node_procs

__all__ = ["http_api", "http_server", "kubeconfig", "node_env", "node_procs"]
