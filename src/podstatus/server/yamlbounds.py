"""YAML (and JSON, which is YAML) read with the bounds kube-apiserver's decoder has.

kube-apiserver turns an apply body into JSON with sigs.k8s.io/yaml, which parses with
go-yaml v2. go-yaml refuses two kinds of small hostile documents, and so does this loader,
before anything is built from them:

- **Alias bombs.** go-yaml counts every node it decodes, and those decoded again through
  an alias; past 100 alias decodes and 1,000 decodes in all, a document whose alias
  share goes over 99% (small documents) down to 10% (documents of 4 million decodes) is
  ``document contains excessive aliasing`` (``decode.go``: ``allowedAliasRatio``). The
  counts here are go-yaml's, computed while composing: an alias adds the size of its
  anchor's node once, nothing is expanded, so a 489-byte bomb of 10^7 leaves is refused
  after a few thousand nodes. An alias to an anchor still open is go-yaml's
  ``anchor 'a' value contains itself``.
- **Deep nesting.** go-yaml stops at 10,000 levels (``exceeded max depth of 10000``). Past
  the parser, podstatus walks bodies with recursive Python code, so it stops earlier, at
  :data:`MAX_DEPTH` levels: far deeper than any object it serves (a Pod is about 12), and
  checked as the levels open, before any recursion that could run out of stack.

Both raise :class:`yaml.YAMLError` (a :class:`BoundsError`) with go-yaml's words.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

__all__ = ["MAX_DEPTH", "BoundedSafeLoader", "BoundsError", "allowed_alias_ratio", "load"]

# Nesting levels (mappings and sequences) a body may have; see the module's docstring.
MAX_DEPTH = 200

# go-yaml v2 decode.go: alias_ratio_range_low/high.
_RATIO_LOW = 400_000
_RATIO_HIGH = 4_000_000


class BoundsError(yaml.YAMLError):
    """A document past a bound (aliasing or depth); ``line`` is 1-based, 0 when unknown."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def allowed_alias_ratio(decodes: int) -> float:
    """go-yaml's share of decodes that may come from aliases, for a document of ``decodes``."""
    if decodes <= _RATIO_LOW:
        return 0.99
    if decodes >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decodes - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


class _Bounds(Composer):
    """The composer's side: counts and checks as nodes are composed (mixed into a loader below)."""

    max_depth = MAX_DEPTH

    def _init_bounds(self) -> None:
        self._depth = 0
        # go-yaml's counters for the document being composed.
        self._decodes = 0
        self._alias_decodes = 0
        # id(node) -> decodes it costs (its subtree, aliases in it counted expanded).
        self._sizes: dict[int, int] = {}

    def compose_document(self) -> Any:
        self._depth = self._decodes = self._alias_decodes = 0
        self._sizes = {}
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, mixed in below
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:
                size = self._sizes.get(id(target))
                if size is None:
                    # go-yaml's decoder words it without a line.
                    raise BoundsError(f"anchor '{event.anchor}' value contains itself")
                # The alias node itself (not an alias decode), then its anchor's whole node again.
                self._decodes += 1 + size
                self._alias_decodes += size
                self._check_aliasing(line)
            return super().compose_node(parent, index)  # an undefined alias: PyYAML's own error
        collection = isinstance(event, yaml.CollectionStartEvent)
        if collection:
            self._depth += 1
            if self._depth > self.max_depth:
                raise BoundsError(f"exceeded max depth of {self.max_depth}", line)
        start = self._decodes
        self._decodes += 1
        node = super().compose_node(parent, index)
        if collection:
            self._depth -= 1
        self._sizes[id(node)] = self._decodes - start
        return node

    def _check_aliasing(self, line: int) -> None:
        # Checked at the end of each alias's expansion, where go-yaml's ratio peaks.
        decodes, aliases = self._decodes, self._alias_decodes
        if aliases > 100 and decodes > 1000 and aliases / decodes > allowed_alias_ratio(decodes):
            raise BoundsError("document contains excessive aliasing")


if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser

    class BoundedSafeLoader(_Bounds, CParser, SafeConstructor, Resolver):
        """``yaml.SafeLoader`` that refuses alias bombs and deep nesting (see the module).

        libyaml's parser makes the events (PyYAML's pure-Python scanner looks ahead over
        every open flow level: 10,000 ``[`` cost it a second); the Python composer above it
        does the counting.
        """

        def __init__(self, stream: Any) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._init_bounds()

else:  # pragma: no cover (PyYAML built without libyaml)

    class BoundedSafeLoader(_Bounds, yaml.SafeLoader):  # type: ignore[no-redef]
        """``yaml.SafeLoader`` that refuses alias bombs and deep nesting (see the module)."""

        def __init__(self, stream: Any) -> None:
            yaml.SafeLoader.__init__(self, stream)
            self._init_bounds()


def load(text: str | bytes) -> Any:
    """One YAML document as Python data, within the bounds (``yaml.YAMLError`` past them)."""
    loader = BoundedSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
