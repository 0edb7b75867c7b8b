"""The query kinds a request may compute: one registry, read by the parser, the runner and the ClickHouse runner.

Each kind is its node (pipelines.query.nodes), its computation, `run(parsed, *, project, now, dialect)` (its own
module), the version of its results and the wrapper that may hold it; a new kind is its module and one line in
`KINDS`. `parse_query` reads a request's `query` against the registry: the wrappers `InsightVizNode` and
`DataVisualizationNode` are unwrapped, and an unknown kind or field is a 400 naming its JSON path.
"""

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from pipelines.query import funnels, hogql, retention, trends
from pipelines.query.errors import QueryError
from pipelines.query.nodes import (
    DataVisualizationNode,
    FunnelsQuery,
    HogQLQuery,
    InsightVizNode,
    Node,
    ParsedQuery,
    RetentionQuery,
    TrendsQuery,
)


@dataclass(frozen=True)
class Kind:
    name: str  # the node's `kind`
    node: type[Node]
    run: Callable[..., dict]  # run(parsed, *, project, now, dialect) -> the result
    # Raised when the kind's computation or result shape changes, so results computed before are not served.
    version: int
    wrapper: str  # the wrapper node that may hold it as its source
    # Shown to render for ClickHouse: tests/pipelines/test_clickhouse_rendering.py runs its cases in chDB.
    clickhouse: bool = False


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("TrendsQuery", TrendsQuery, trends.run, version=2, wrapper="InsightVizNode", clickhouse=True),
        Kind("FunnelsQuery", FunnelsQuery, funnels.run, version=2, wrapper="InsightVizNode", clickhouse=True),
        Kind("RetentionQuery", RetentionQuery, retention.run, version=2, wrapper="InsightVizNode", clickhouse=True),
        Kind("HogQLQuery", HogQLQuery, hogql.run, version=1, wrapper="DataVisualizationNode", clickhouse=True),
    )
}
WRAPPERS: dict[str, type[Node]] = {"InsightVizNode": InsightVizNode, "DataVisualizationNode": DataVisualizationNode}


def parse_query(data: object, path: tuple[str, ...] = ("query",)) -> ParsedQuery:
    """The query node `data` describes (a wrapper's source, for a wrapper); QueryError naming the first bad field."""
    attr = "__".join(path)
    if not isinstance(data, dict):
        raise QueryError("A query is a JSON object with a `kind`.", attr=attr)
    kind = data.get("kind")
    if kind is not None and not isinstance(kind, str):  # an object or a list cannot name a kind (nor be looked up)
        raise QueryError(f"A query's kind is a string: one of {_known()}.", attr=f"{attr}__kind")
    if kind in WRAPPERS:
        wrapper = _validate(WRAPPERS[kind], data, path)
        sources = [name for name, source in KINDS.items() if source.wrapper == kind]
        if wrapper.source.get("kind") not in sources:
            raise QueryError(f"{kind} takes a source of kind {' or '.join(sources)}.", attr=f"{attr}__source__kind")
        return parse_query(wrapper.source, (*path, "source"))
    if kind not in KINDS:
        raise QueryError(f"Unknown query kind {kind!r}: use one of {_known()}.", attr=f"{attr}__kind")
    return ParsedQuery(_validate(KINDS[kind].node, data, path), path)


def _known() -> str:
    return ", ".join([*KINDS, *WRAPPERS])


def _validate(model: type[Node], data: dict, path: tuple[str, ...]) -> Node:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        location = [str(part) for part in first["loc"]]
        attr = "__".join([*path, *location])
        if first["type"] == "extra_forbidden":
            raise QueryError(f"Unknown field {location[-1]!r}.", attr=attr) from None
        if first["type"] == "missing":
            raise QueryError("This field is required.", attr=attr, code="required") from None
        raise QueryError(f"{first['msg']}.", attr=attr) from None
