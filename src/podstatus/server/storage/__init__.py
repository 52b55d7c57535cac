"""Generic storage with no kind in it (kube-apiserver's apiserver/pkg/registry/generic and storage):

- :mod:`.store`: the :class:`~.store.Store` (create, get, list, update, patch, delete, watch).
- :mod:`.objects`: stored versions, change events, each storage's history.
- :mod:`.watch`: watches over a history. :mod:`.listing`: paged lists and continue tokens.
- :mod:`.strategy`: :class:`~.strategy.ResourceInfo`, :class:`~.strategy.Strategy`, the registry of resources.
- :mod:`.decoding`: what the decoder does to a body; :mod:`.meta`: ObjectMeta rules; :mod:`.errors`: Status errors.
"""
