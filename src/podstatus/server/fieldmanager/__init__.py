"""The embedded server's field manager: what a write may contain and who owns which field.

- :mod:`.schema`: the fields each kind declares (unknown ones are pruned), Go's number conversions.
- :mod:`.fieldschema`: the merge strategy of list and map fields (generated from the OpenAPI documents).
- :mod:`.fieldsets`: structured-merge-diff's field sets, typed by a :class:`~.fieldsets.Schema`.
- :mod:`.apply`: ``metadata.managedFields`` on every write and server-side apply.

It imports nothing of the store: the store calls it.
"""
