"""``podstatus simulate``: simulated nodes whose containers are make-believe and whose status is real.

One concept per module: :mod:`.agent` (the simulated node: the node agent driving the
simulated provider), :mod:`.invariants` (SPEC section 7, checked on every write and watch
event), :mod:`.run` (the simulation: workloads created, the users played, the nodes driven
to the end, cleanup), :mod:`.result` (what a run did, and why it failed), :mod:`.report`
(the progress and the summary the command draws). The command itself is in :mod:`podstatus.cli`.
"""
