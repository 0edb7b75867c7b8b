"""Charts of insights for the shared page: the geometry of an SVG drawn by the server (DECISIONS.md §15, "People see
charts"), so that the page needs no script and loads nothing from elsewhere.

Each insight is drawn from its result (dashboards.results) as its query asks: trends as lines, or bars for a bar
display, a big number for `BoldNumber`, one bar per series for the displays that show one value per series, a bar
per step for funnels, a table shaded by the share who came back for retention, and HogQL results as a table. Every
chart also has the numbers as a table, for whoever cannot see the picture. Points, ticks and labels are worked out
here; the template only writes them out.
"""

import math
from dataclasses import dataclass, field

from dashboards.models import Dashboard, DashboardTile, Insight
from dashboards.results import InsightResults

WIDTH, HEIGHT = 320, 160
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 8, 20  # room for the y ticks' labels on the left and the first/last day below
PALETTE = ("#1d4aff", "#f04f58", "#2ea043", "#f7a501", "#9b51e0", "#0fb5ae", "#e3489c", "#6b7280")
BAR_DISPLAYS = frozenset({"ActionsBar", "ActionsStackedBar", "ActionsUnstackedBar"})
VALUE_DISPLAYS = frozenset({"ActionsBarValue", "ActionsPie", "ActionsTable", "WorldMap"})
WRAPPERS = ("InsightVizNode", "DataVisualizationNode")
MAX_TABLE_ROWS = 100  # of a HogQL result shown on the page


@dataclass(frozen=True)
class Mark:
    """A polyline (`points`) or a bar (`x`, `y`, `width`, `height`) of one series, with its colour and label."""

    color: str
    label: str
    points: str = ""
    x: str = ""
    y: str = ""
    width: str = ""
    height: str = ""
    value: str = ""


@dataclass(frozen=True)
class Tick:
    y: str
    label: str


@dataclass(frozen=True)
class Table:
    """The numbers of a chart: `columns` and `rows` of text."""

    columns: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Cell:
    """A cell of a retention table: its text and its shading class (`shade-0` to `shade-10`, tenths of the cohort
    that came back), so that the page needs no inline style."""

    text: str
    shade: str = ""


@dataclass(frozen=True)
class Chart:
    """What the template draws. `kind`: line, bar, funnel, number, table, retention (`grid`, a shaded table whose
    first column names the cohort) or empty ("No data")."""

    kind: str
    lines: list[Mark] = field(default_factory=list)
    bars: list[Mark] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    first_label: str = ""
    last_label: str = ""
    legend: list[Mark] = field(default_factory=list)
    number: str = ""
    table: Table | None = None
    grid: list[list[Cell]] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    plot_left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    plot_bottom: int = HEIGHT - BOTTOM
    label_y: int = HEIGHT - 6


@dataclass(frozen=True)
class ShownTile:
    tile: DashboardTile
    chart: Chart | None  # None for a text tile


def shared_tiles(dashboard: Dashboard) -> list[ShownTile]:
    """The dashboard's shown tiles (prefetched, in order), each insight with its chart. Results are computed when
    stale (`blocking`), so that whoever holds the link sees numbers; a tile whose result cannot be had shows "No
    data", and the others still show."""
    results = InsightResults(project=dashboard.project, refresh="blocking")
    return [
        ShownTile(tile=tile, chart=chart(tile.insight, results.of(tile.insight)) if tile.insight_id else None)
        for tile in dashboard.tiles.all()
    ]


def chart(insight: Insight, shown: dict) -> Chart:
    """The chart of `insight` from its result (`shown`: the RESULT_FIELDS of dashboards.results)."""
    result = shown["result"]
    if not result:
        return Chart(kind="empty")
    if shown["columns"] is not None:
        return _table(shown["columns"], result)
    source = _source(insight.query)
    if source.get("kind") == "FunnelsQuery":
        return _funnel(result)
    if source.get("kind") == "RetentionQuery":
        return _retention(result)
    display = (source.get("trendsFilter") or {}).get("display")
    if display == "BoldNumber":
        return _number(result)
    if display in VALUE_DISPLAYS:
        return _value_bars(result)
    return _trend(result, bars=display in BAR_DISPLAYS)


def _source(query) -> dict:
    while isinstance(query, dict) and query.get("kind") in WRAPPERS and isinstance(query.get("source"), dict):
        query = query["source"]
    return query if isinstance(query, dict) else {}


def _trend(series: list[dict], *, bars: bool) -> Chart:
    days = series[0].get("days") or []
    values = [[_number_of(value) for value in entry.get("data") or []] for entry in series]
    count = max((len(data) for data in values), default=0)
    if count == 0:
        return Chart(kind="empty")
    top, ticks = _scale(max((max(data, default=0) for data in values), default=0))
    legend = [Mark(color=_color(index), label=_label(entry)) for index, entry in enumerate(series)]
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    lines, rects = [], []
    if bars:
        group = plot_width / count
        bar_width = group * 0.8 / len(series)
        for index, data in enumerate(values):
            for position, value in enumerate(data):
                height = plot_height * value / top
                rects.append(
                    Mark(
                        color=legend[index].color,
                        label=legend[index].label,
                        x=_coordinate(LEFT + position * group + group * 0.1 + index * bar_width),
                        y=_coordinate(TOP + plot_height - height),
                        width=_coordinate(bar_width),
                        height=_coordinate(height),
                        value=_format(value),
                    )
                )
    else:
        step = plot_width / (count - 1) if count > 1 else 0
        for index, data in enumerate(values):
            points = " ".join(
                f"{_coordinate(LEFT + (position * step if count > 1 else plot_width / 2))},"
                f"{_coordinate(TOP + plot_height * (1 - value / top))}"
                for position, value in enumerate(data)
            )
            lines.append(Mark(color=legend[index].color, label=legend[index].label, points=points))
    rows = [
        [str(days[position]) if position < len(days) else str(position + 1)]
        + [_format(data[position]) if position < len(data) else "" for data in values]
        for position in range(count)
    ]
    return Chart(
        kind="bar" if bars else "line",
        lines=lines,
        bars=rects,
        ticks=ticks,
        first_label=str(days[0]) if days else "",
        last_label=str(days[count - 1]) if len(days) >= count else "",
        legend=legend,
        table=Table(columns=["Date", *(mark.label for mark in legend)], rows=rows),
    )


def _value_bars(series: list[dict]) -> Chart:
    """One bar per series (a breakdown's values side by side), for the displays that show one value per series."""
    values = [_number_of(entry.get("aggregated_value", entry.get("count"))) for entry in series]
    top, ticks = _scale(max(values, default=0))
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_width / len(values)
    legend, rects = [], []
    for index, (entry, value) in enumerate(zip(series, values, strict=True)):
        mark = Mark(color=_color(index), label=_label(entry))
        legend.append(mark)
        height = plot_height * value / top
        rects.append(
            Mark(
                color=mark.color,
                label=mark.label,
                x=_coordinate(LEFT + index * slot + slot * 0.1),
                y=_coordinate(TOP + plot_height - height),
                width=_coordinate(slot * 0.8),
                height=_coordinate(height),
                value=_format(value),
            )
        )
    return Chart(
        kind="bar",
        bars=rects,
        ticks=ticks,
        legend=legend,
        table=Table(columns=["Series", "Value"], rows=[[mark.label, mark.value] for mark in rects]),
    )


def _funnel(steps: list[dict]) -> Chart:
    """A bar per step, as tall as the people who reached it; the table adds each step's conversion from the first
    step and the average time from the step before."""
    counts = [_number_of(step.get("count")) for step in steps]
    top, ticks = _scale(max(counts, default=0))
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(steps), 1)
    first = counts[0] if counts else 0
    bars, rows = [], []
    for index, (step, count) in enumerate(zip(steps, counts, strict=True)):
        label = f"{index + 1}. {step.get('custom_name') or step.get('name') or 'Step'}"
        height = plot_height * count / top
        share = _percent(count, first)
        bars.append(
            Mark(
                color=PALETTE[0],
                label=label,
                x=_coordinate(LEFT + index * slot + slot * 0.15),
                y=_coordinate(TOP + plot_height - height),
                width=_coordinate(slot * 0.7),
                height=_coordinate(height),
                value=f"{_format(count)} ({share})",
            )
        )
        average = step.get("average_conversion_time")
        rows.append([label, _format(count), share, "" if average is None else _duration(average)])
    return Chart(
        kind="funnel",
        bars=bars,
        ticks=ticks,
        first_label=bars[0].label if bars else "",
        last_label=bars[-1].label if len(bars) > 1 else "",
        table=Table(columns=["Step", "People", "Conversion", "Average time"], rows=rows),
    )


def _retention(cohorts: list[dict]) -> Chart:
    """A row per cohort: its start, its size, and how many came back in each later period, each cell shaded by its
    share of the cohort."""
    periods = max((len(cohort.get("values") or []) for cohort in cohorts), default=0)
    if periods == 0:
        return Chart(kind="empty")
    first_values = next((cohort["values"] for cohort in cohorts if len(cohort.get("values") or []) == periods), [])
    columns = ["Cohort", "People", *(str(value.get("label") or index) for index, value in enumerate(first_values))]
    grid = []
    for cohort in cohorts:
        values = [_number_of(value.get("count")) for value in cohort.get("values") or []]
        size = values[0] if values else 0
        row = [Cell(text=str(cohort.get("date") or cohort.get("label") or "")[:10]), Cell(text=_format(size))]
        for value in values:
            share = value / size if size else 0
            row.append(Cell(text=_percent(value, size), shade=f"shade-{round(10 * share)}" if size else ""))
        row += [Cell(text="") for _ in range(periods - len(values))]
        grid.append(row)
    return Chart(kind="retention", grid=grid, table=Table(columns=columns, rows=[]))


def _percent(value: float, whole: float) -> str:
    return f"{100 * value / whole:.1f}%".replace(".0%", "%") if whole else "0%"


def _duration(seconds: float) -> str:
    """Seconds as the page shows a conversion time: `45s`, `12m 5s`, `3h 20m`, `2d 4h`."""
    seconds = round(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, rest = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {rest}s"
    return f"{rest}s"


def _number(series: list[dict]) -> Chart:
    first = series[0]
    value = _format(_number_of(first.get("aggregated_value", first.get("count"))))
    return Chart(kind="number", number=value, table=Table(columns=["Series", "Value"], rows=[[_label(first), value]]))


def _table(columns: list, rows: list) -> Chart:
    shown = [[_cell(value) for value in row] for row in rows[:MAX_TABLE_ROWS]]
    return Chart(kind="table", table=Table(columns=[str(column) for column in columns], rows=shown))


def _scale(highest: float) -> tuple[float, list[Tick]]:
    """The top of the y axis (a round number at or above `highest`, at least 1) and its ticks, bottom to top."""
    highest = max(highest, 1)
    raw = highest / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(factor * magnitude for factor in (1, 2, 2.5, 5, 10) if factor * magnitude >= raw)
    top = step * math.ceil(highest / step)
    plot_height = HEIGHT - TOP - BOTTOM
    count = round(top / step)
    ticks = [
        Tick(y=_coordinate(TOP + plot_height * (1 - index * step / top)), label=_format(index * step))
        for index in range(count + 1)
    ]
    return top, ticks


def _label(entry: dict) -> str:
    return str(entry.get("label") or (entry.get("action") or {}).get("name") or "Series")


def _color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _number_of(value) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _coordinate(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _format(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _cell(value) -> str:
    return "" if value is None else str(value)
