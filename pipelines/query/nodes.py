"""Query nodes: the reference's JSON query language, read strictly.

A request's `query` is one node, named by its `kind`. Nodes are pydantic models that forbid unknown fields, as the
reference's schema does (DECISIONS.md §15), unlike the rest of a request body: a misspelt `math` or a field this
service does not compute is a 400 whose `attr` is the field's JSON path (`query__series__0__math`), never a result
computed without it. Fields that only change how a result is drawn (`trendsFilter.showLegend`, the wrappers' `show*`
switches) are accepted and kept.

The wrappers `InsightVizNode` and `DataVisualizationNode` are unwrapped: `pipelines.query.kinds.parse_query` returns
their `source` and the path it was read at, so that later errors name fields inside it (`query__source__interval`).
"""

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

# The longest a query's free text may be (DECISIONS.md §18; docs/decisions.md, "Query bounds"): the reference
# publishes no limits for its query nodes, so these are the service's own, short enough that no answer grows with them.
NAME_LENGTH = 400  # names, event names, property keys, breakdowns, labels
VALUE_LENGTH = 1_000  # a property filter's value (each of a list's)
SETTING_LENGTH = 100  # a drawing setting's text (an axis prefix, a display) and a date
Name = Annotated[str, Field(max_length=NAME_LENGTH)]
Setting = Annotated[str, Field(max_length=SETTING_LENGTH)]

Math = Literal[
    "total", "dau", "weekly_active", "monthly_active", "sum", "avg", "min", "max", "median", "p90", "p95", "p99"
]
# Maths that aggregate a numeric property (`math_property`) rather than count events or users.
PROPERTY_MATHS = frozenset({"sum", "avg", "min", "max", "median", "p90", "p95", "p99"})
PropertyOperator = Literal[
    "exact",
    "is_not",
    "icontains",
    "not_icontains",
    "regex",
    "not_regex",
    "gt",
    "gte",
    "lt",
    "lte",
    "is_set",
    "is_not_set",
]
Interval = Literal["hour", "day", "week", "month"]
Display = Literal[
    "ActionsLineGraph",
    "ActionsLineGraphCumulative",
    "ActionsBar",
    "ActionsStackedBar",
    "ActionsUnstackedBar",
    "ActionsAreaGraph",
    "BoldNumber",
    "ActionsPie",
    "ActionsBarValue",
    "ActionsTable",
    "WorldMap",
]


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EventPropertyFilter(Node):
    key: str = Field(min_length=1, max_length=NAME_LENGTH)
    # A string, number or boolean, or a list of them for `exact` and `is_not`; checked against the operator when the
    # query is built, so that the error names `value`.
    value: Any = None
    operator: PropertyOperator = "exact"
    type: Literal["event"] = "event"
    label: Name | None = None

    @field_validator("value")
    @classmethod
    def _short_texts(cls, value: Any) -> Any:
        """Each text of `value` (the value, or each of a list's) at most VALUE_LENGTH characters."""
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and len(text) > VALUE_LENGTH:
                raise PydanticCustomError(
                    "string_too_long",
                    "String should have at most {max_length} characters",
                    {"max_length": VALUE_LENGTH},
                )
        return value


class EventsNode(Node):
    kind: Literal["EventsNode"] = "EventsNode"
    event: Name | None = None  # None: all events
    name: Name | None = None
    custom_name: Name | None = None
    math: Math = "total"
    math_property: str | None = Field(default=None, min_length=1, max_length=NAME_LENGTH)
    properties: list[EventPropertyFilter] = Field(default_factory=list, max_length=100)


class DateRange(Node):
    date_from: Setting | None = None
    date_to: Setting | None = None
    # True: the dates are used as given; otherwise they are widened to whole hours (hour intervals) or days.
    explicitDate: bool | None = None


class BreakdownFilter(Node):
    breakdown: str | None = Field(default=None, min_length=1, max_length=NAME_LENGTH)
    breakdown_type: Literal["event"] | None = "event"
    breakdown_limit: int | None = Field(default=None, ge=1, le=1000)
    breakdown_hide_other_aggregation: bool | None = None


class TrendsFilter(Node):
    display: Display | None = None
    formula: Name | None = None
    # How the chart is drawn; kept, never computed with.
    showLegend: bool | None = None
    showValuesOnSeries: bool | None = None
    showLabelsOnSeries: bool | None = None
    showPercentStackView: bool | None = None
    aggregationAxisFormat: Setting | None = None
    aggregationAxisPrefix: Setting | None = None
    aggregationAxisPostfix: Setting | None = None
    decimalPlaces: int | None = None
    yAxisScaleType: Literal["linear", "log10"] | None = None


class TrendsQuery(Node):
    kind: Literal["TrendsQuery"]
    series: list[EventsNode] = Field(min_length=1, max_length=20)
    interval: Interval = "day"
    dateRange: DateRange | None = None
    properties: list[EventPropertyFilter] = Field(default_factory=list, max_length=100)
    breakdownFilter: BreakdownFilter | None = None
    trendsFilter: TrendsFilter | None = None
    # The reference's switch for its per-project test-account filters; this service has none, so it changes nothing.
    filterTestAccounts: bool | None = None


FunnelOrderType = Literal["ordered", "strict", "unordered"]
FunnelWindowUnit = Literal["second", "minute", "hour", "day", "week", "month"]


class FunnelsFilter(Node):
    funnelOrderType: FunnelOrderType = "ordered"
    funnelWindowInterval: int = Field(default=14, ge=1, le=100_000)
    funnelWindowIntervalUnit: FunnelWindowUnit = "day"
    # Only the steps chart is computed; the reference's time-to-convert and trends views are not.
    funnelVizType: Literal["steps"] | None = None
    # How the chart is drawn; kept, never computed with.
    layout: Literal["horizontal", "vertical"] | None = None
    funnelStepReference: Literal["total", "previous"] | None = None
    showValuesOnSeries: bool | None = None


class FunnelsQuery(Node):
    kind: Literal["FunnelsQuery"]
    series: list[EventsNode] = Field(min_length=2, max_length=20)
    funnelsFilter: FunnelsFilter = Field(default_factory=FunnelsFilter)
    dateRange: DateRange | None = None
    properties: list[EventPropertyFilter] = Field(default_factory=list, max_length=100)
    # Accepted so that a breakdown is refused by name rather than as an unknown field; not computed.
    breakdownFilter: BreakdownFilter | None = None
    filterTestAccounts: bool | None = None


class RetentionEntity(Node):
    id: Name | None = None  # an event name; None: any event
    type: Literal["events"] = "events"
    kind: Literal["EventsNode"] | None = None
    name: Name | None = None
    custom_name: Name | None = None
    order: int | None = None
    uuid: Setting | None = None
    properties: list[EventPropertyFilter] = Field(default_factory=list, max_length=100)


class RetentionFilter(Node):
    targetEntity: RetentionEntity = Field(default_factory=lambda: RetentionEntity(id="$pageview"))
    returningEntity: RetentionEntity = Field(default_factory=lambda: RetentionEntity(id="$pageview"))
    period: Literal["Day", "Week", "Month"] = "Day"
    totalIntervals: int = Field(default=11, ge=1, le=30)
    retentionType: Literal["retention_recurring", "retention_first_time"] = "retention_recurring"
    # How the table is drawn; kept, never computed with.
    display: Setting | None = None
    showMean: bool | None = None


class RetentionQuery(Node):
    kind: Literal["RetentionQuery"]
    retentionFilter: RetentionFilter = Field(default_factory=RetentionFilter)
    # Cohorts end with the interval holding `date_to` (now by default) and number `totalIntervals`; `date_from` is
    # accepted, as the reference's clients send it, and not used, as the reference does.
    dateRange: DateRange | None = None
    properties: list[EventPropertyFilter] = Field(default_factory=list, max_length=100)
    breakdownFilter: BreakdownFilter | None = None
    filterTestAccounts: bool | None = None


def _placeholder_values(values: dict, depth: int = 0) -> bool:
    """Whether `values` may be a HogQL query's (pipelines.query.hogql, `{name}` and `{name.key}`): each value a string
    of at most VALUE_LENGTH characters, a number, a boolean or null, or an object of them by name."""
    return all(
        isinstance(key, str)
        and len(key) <= NAME_LENGTH
        and (_placeholder_values(item, 1) if isinstance(item, dict) and depth == 0 else _placeholder_value(item))
        for key, item in values.items()
    )


def _placeholder_value(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, bool | int | float)
        or (isinstance(value, str) and len(value) <= VALUE_LENGTH)
    )


class HogQLQuery(Node):
    kind: Literal["HogQLQuery"]
    query: str = Field(min_length=1, max_length=10_000)
    name: Name | None = None
    # The values of the text's placeholders, as the reference's `values`: `{country}` reads `values["country"]`,
    # `{variables.country}` reads `values["variables"]["country"]`. Each binds as a typed literal of the tree.
    values: dict[Name, Any] | None = None

    @field_validator("values")
    @classmethod
    def _scalar_values(cls, values: dict | None) -> dict | None:
        if values is not None and not _placeholder_values(values):
            raise PydanticCustomError(
                "placeholder_values",
                "Each value is a string (at most {length} characters), a number, a boolean or null, or an object of "
                "them by name",
                {"length": VALUE_LENGTH},
            )
        return values


class InsightVizNode(Node):
    kind: Literal["InsightVizNode"]
    source: dict
    # How the insight is shown; kept, never computed with.
    full: bool | None = None
    embedded: bool | None = None
    showHeader: bool | None = None
    showTable: bool | None = None
    showFilters: bool | None = None
    showResults: bool | None = None
    showLastComputation: bool | None = None
    showLastComputationRefresh: bool | None = None
    showCorrelationTable: bool | None = None
    hidePersonsModal: bool | None = None
    vizSpecificOptions: dict | None = None


class DataVisualizationNode(Node):
    kind: Literal["DataVisualizationNode"]
    source: dict
    display: Setting | None = None
    chartSettings: dict | None = None
    tableSettings: dict | None = None


@dataclass(frozen=True)
class ParsedQuery:
    node: Node
    path: tuple[str, ...]  # where the node was read in the request body: ("query",) or ("query", "source")

    def attr(self, *keys: object) -> str:
        """The error `attr` of a field inside the node."""
        return "__".join([*self.path, *(str(key) for key in keys)])
