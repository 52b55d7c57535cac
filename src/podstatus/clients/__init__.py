"""Kubernetes clients implementing the protocols of :mod:`podstatus.protocols` (SPEC 2.4, 5).

``http`` talks to a real API server, ``embedded`` binds to the embedded one
(:mod:`podstatus.server`), ``fake`` records every request for tests. The
package imports none of them, so a client for a real cluster never loads the
embedded server.
"""
