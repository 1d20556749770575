"""The explain engine: which route reads an input, and what each route's report keeps.

``KnowledgeBase.explain`` (the facade, ``errkb.kb``) asks :func:`choose_route` once per input
and runs that route:

- ``PASTE``: a small input, parsed whole (``errkb.parse.regions.parse_input``) and reported
  whole;
- ``SCAN``: large plain text or JSON lines, read by the record scan
  (``errkb.match.recordscan``: the record anchors' pass and the shape pass over the whole buffer,
  the parser only on windows around the lines they name);
- ``REGIONS``: a large input the scan cannot read (a JSON document, markup, UTF-16, YAML
  folds), parsed region by region around its error words; the scan hands an input here too
  when it names more lines than it holds, or the store cannot feed it.

The sizes that choose are one frozen :class:`Thresholds` value, passed in.
"""

from errkb.explain.routes import DEFAULT_THRESHOLDS, Route, Thresholds, choose_route

__all__ = ["DEFAULT_THRESHOLDS", "Route", "Thresholds", "choose_route"]
