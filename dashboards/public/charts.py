"""Charts of insights for the shared page and admin: the geometry of an SVG drawn by the server (DECISIONS.md §15,
"People see charts"; §19, "The shared page tells the truth"), so that the page needs no script and loads nothing
from elsewhere.

Each insight is drawn from its result (dashboards.core.results) as its query asks: trends as lines, or bars for a bar
display, a big number for `BoldNumber`, one bar per series for the displays that show one value per series, a
labelled bar per step for funnels, a table shaded by the share who came back for retention, and HogQL results as a
table. Every chart also has the numbers as a table, for whoever cannot see the picture. Points, ticks and labels are
worked out here; the template only writes them out.

What a chart says is true of its numbers: counts get whole-number ticks, a time axis names dates (each once) at a
regular step that ends on the last interval, each series or breakdown value has one legend entry, and an empty cohort
or a step nobody could reach is shown empty, never as 0 %.

Its text is TEXT_SIZE units high, set on the SVG itself: a chart scales with the tile it is drawn in, and on a 390 px
phone a tile draws it NARROW_WIDTH px wide, so the text is at least READABLE px there (the pages' CSS caps how wide a
chart grows, so it stays under 19 px on a wide screen). Labels are placed by their width, about CHAR_WIDTH a
character, so none overlaps another or leaves the chart.

A chart draws at most MAX_SERIES series: the rest are summed as "Other" (the page links to all of them).
"""

import datetime as dt
import math
from dataclasses import dataclass, field

from dashboards.core.models import Insight

WIDTH, HEIGHT = 320, 170
TEXT_SIZE = 12  # units of the viewBox
CHAR_WIDTH = 0.6 * TEXT_SIZE  # about the width of a character of system-ui at TEXT_SIZE (digits are narrower)
# The width a chart is drawn at in a tile on a 390 px wide phone: the page's padding (1rem each side), the tile's
# border and padding (1px and 1rem each side) taken off; and the least text size in px that reads well there.
NARROW_WIDTH = 390 - 2 * 16 - 2 * (1 + 16)
READABLE = 12
RIGHT, TOP, BOTTOM = 8, 10, 24  # room for the top tick's label above and the dates below
LABEL_GAP = 10  # the least room between two dates under the axis
PALETTE = (
    "#1d4aff",
    "#f04f58",
    "#2ea043",
    "#f7a501",
    "#9b51e0",
    "#0fb5ae",
    "#e3489c",
    "#6b7280",
    "#8c5a2b",
    "#2f6f4f",
    "#b3261e",
    "#00629b",
    "#c29b00",
    "#5b3cc4",
    "#d4569d",
)  # 15 colours: series further on share them, and the legend tells them apart
BAR_DISPLAYS = frozenset({"ActionsBar", "ActionsStackedBar", "ActionsUnstackedBar"})
VALUE_DISPLAYS = frozenset({"ActionsBarValue", "ActionsPie", "ActionsTable", "WorldMap"})
WRAPPERS = ("InsightVizNode", "DataVisualizationNode")
MAX_TABLE_ROWS = 100  # of a HogQL result shown on the page
MAX_SERIES = 25  # drawn on one chart; the rest are summed as "Other"
BREAKDOWN_OTHER = "$$_posthog_breakdown_other_$$"
OTHER = "Other"
# The steps, in intervals, at which dates are written under a time axis, finest first: the finest whose labels do
# not collide is taken (then multiples of the last).
DATE_STEPS = {
    "hour": (1, 2, 3, 6, 12, 24, 48, 72, 168),
    "day": (1, 2, 3, 7, 14, 28, 56, 91, 182, 364),
    "week": (1, 2, 4, 8, 13, 26, 52),
    "month": (1, 2, 3, 6, 12, 24),
}
FUNNEL_ROW = 34  # the height of a funnel step: its label line, then its bar
FUNNEL_BAR = 10


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
class Label:
    """A text on the chart: a date under the time axis, or a funnel step's name and numbers."""

    x: str
    y: str
    text: str
    anchor: str = "middle"  # start, middle or end
    kind: str = "date"  # date, step or value (the CSS class)


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
    first column names the cohort), empty ("No data") or withheld (a page that may not show this result: `reason`
    says why). `folded`: how many series were summed into "Other"."""

    kind: str
    lines: list[Mark] = field(default_factory=list)
    bars: list[Mark] = field(default_factory=list)
    tracks: list[Mark] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    legend: list[Mark] = field(default_factory=list)
    number: str = ""
    table: Table | None = None
    grid: list[list[Cell]] = field(default_factory=list)
    folded: int = 0
    reason: str = ""
    width: int = WIDTH
    height: int = HEIGHT
    text_size: int = TEXT_SIZE
    plot_left: int = 0
    plot_right: int = WIDTH - RIGHT
    plot_bottom: int = HEIGHT - BOTTOM
    # Where a date under the time axis has its tick mark.
    date_marks: list[str] = field(default_factory=list)

    @property
    def drawn(self) -> bool:
        return bool(self.lines or self.bars)


def chart(insight: Insight, shown: dict) -> Chart:
    """The chart of `insight` from its result (`shown`: the RESULT_FIELDS of dashboards.core.results), drawn as its
    query asks (a tile's effective query differs from it in dates and properties only, never in how it is drawn)."""
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
    series, folded = _capped(result)
    if display == "BoldNumber":
        return _number(series)
    if display in VALUE_DISPLAYS:
        return _value_bars(series, folded)
    return _trend(series, folded, bars=display in BAR_DISPLAYS, interval=source.get("interval") or "day")


def _source(query) -> dict:
    while isinstance(query, dict) and query.get("kind") in WRAPPERS and isinstance(query.get("source"), dict):
        query = query["source"]
    return query if isinstance(query, dict) else {}


def _capped(series: list[dict]) -> tuple[list[dict], int]:
    """At most MAX_SERIES series: the first ones as they are, then one "Other" summing the rest (and the query's own
    "Other", so that it has one legend entry). Also how many series went into it."""
    own_other = [entry for entry in series if entry.get("breakdown_value") == BREAKDOWN_OTHER]
    named = [entry for entry in series if entry.get("breakdown_value") != BREAKDOWN_OTHER]
    if len(series) <= MAX_SERIES:
        return [*named, *own_other], 0
    kept, rest = named[: MAX_SERIES - 1], named[MAX_SERIES - 1 :] + own_other
    length = max((len(entry.get("data") or []) for entry in rest), default=0)
    data = [sum(_number_of(value) for value in _column(rest, index)) for index in range(length)]
    days = next((entry.get("days") for entry in rest if len(entry.get("days") or []) == length), [])
    other = {
        "label": OTHER,
        "data": data,
        "days": days,
        "count": sum(_number_of(entry.get("count")) for entry in rest),
        "aggregated_value": sum(_number_of(entry.get("aggregated_value", entry.get("count"))) for entry in rest),
        "breakdown_value": BREAKDOWN_OTHER,
    }
    return [*kept, other], len(rest)


def _column(series: list[dict], index: int) -> list:
    return [(entry.get("data") or [])[index] for entry in series if index < len(entry.get("data") or [])]


def _labels(series: list[dict]) -> list[str]:
    """One label per series: its custom name or event, its breakdown value, and where two would read alike, its
    math, then its place."""
    labels = [_label(entry) for entry in series]
    if len(set(labels)) < len(labels):
        labels = [
            f"{label} ({(entry.get('action') or {}).get('math')})"
            if labels.count(label) > 1 and (entry.get("action") or {}).get("math")
            else label
            for label, entry in zip(labels, series, strict=True)
        ]
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return unique


def _label(entry: dict) -> str:
    if entry.get("label") == OTHER and entry.get("breakdown_value") == BREAKDOWN_OTHER and "action" not in entry:
        return OTHER
    action = entry.get("action") or {}
    name = action.get("custom_name") or action.get("name") or entry.get("label") or "Series"
    if "breakdown_value" in entry:
        value = entry["breakdown_value"]
        shown = {BREAKDOWN_OTHER: OTHER, "$$_posthog_breakdown_null_$$": "None"}.get(value, value)
        return f"{name} - {'None' if shown in (None, '') else shown}"
    return str(name)


def _trend(series: list[dict], folded: int, *, bars: bool, interval: str) -> Chart:
    days = next((entry.get("days") for entry in series if entry.get("days")), None) or []
    values = [[_number_of(value) for value in entry.get("data") or []] for entry in series]
    count = max((len(data) for data in values), default=0)
    if count == 0:
        return Chart(kind="empty")
    top, ticks = _scale(max((max(data, default=0) for data in values), default=0), integer=_integers(values))
    moments = [_moment(day) for day in days[:count]]
    dates = _date_texts(moments, days, interval)
    # Room for the y ticks' labels, and for a date centred under the first and the last interval.
    half = math.ceil(max((_text_width(text) for text in dates), default=0) / 2) + 2
    left, right = max(_left(ticks), half), max(RIGHT, half)
    legend = [Mark(color=_color(index), label=label) for index, label in enumerate(_labels(series))]
    plot_width, plot_height = WIDTH - left - right, HEIGHT - TOP - BOTTOM
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
                        x=_coordinate(left + position * group + group * 0.1 + index * bar_width),
                        y=_coordinate(TOP + plot_height - height),
                        width=_coordinate(bar_width),
                        height=_coordinate(height),
                        value=_format(value),
                    )
                )

        def x_of(position: int) -> float:
            return left + (position + 0.5) * group

    else:
        step = plot_width / (count - 1) if count > 1 else 0

        def x_of(position: int) -> float:
            return left + (position * step if count > 1 else plot_width / 2)

        for index, data in enumerate(values):
            points = " ".join(
                f"{_coordinate(x_of(position))},{_coordinate(TOP + plot_height * (1 - value / top))}"
                for position, value in enumerate(data)
            )
            lines.append(Mark(color=legend[index].color, label=legend[index].label, points=points))
    rows = [
        [str(days[position]) if position < len(days) else str(position + 1)]
        + [_format(data[position]) if position < len(data) else "" for data in values]
        for position in range(count)
    ]
    labels = _date_labels(dates, interval, x_of)
    return Chart(
        kind="bar" if bars else "line",
        lines=lines,
        bars=rects,
        ticks=ticks,
        labels=labels,
        legend=legend,
        table=Table(columns=["Date", *(mark.label for mark in legend)], rows=rows),
        folded=folded,
        plot_left=left,
        plot_right=WIDTH - right,
        date_marks=[label.x for label in labels],
    )


def _date_texts(moments: list, days: list, interval: str) -> list[str]:
    """Each interval's date as the axis writes it, with its year when the axis spans two or more."""
    with_year = len({moment.year for moment in moments if moment is not None}) > 1
    return [_date_text(moment, interval, day, with_year=with_year) for moment, day in zip(moments, days, strict=False)]


def _date_positions(dates: list[str], interval: str, x_of) -> list[int]:
    """The intervals whose dates are written under the time axis: every `step`-th one counted back from the last, at
    the finest step of DATE_STEPS (the interval's) at which no two of them collide."""
    count = len(dates)
    if count == 0:
        return []
    room = max(_text_width(text) for text in dates) + LABEL_GAP
    spacing = x_of(1) - x_of(0) if count > 1 else WIDTH
    steps = DATE_STEPS.get(interval, DATE_STEPS["day"])
    step = next((step for step in steps if step * spacing >= room), None)
    if step is None:
        step = steps[-1] * math.ceil(room / (steps[-1] * spacing))
    return list(range((count - 1) % step, count, step))


def _date_labels(dates: list[str], interval: str, x_of) -> list[Label]:
    """The dates under the time axis (`_date_positions`), each centred on its interval and written once."""
    labels, written = [], set()
    for position in _date_positions(dates, interval, x_of):
        if dates[position] in written:
            continue
        written.add(dates[position])
        labels.append(Label(x=_coordinate(x_of(position)), y=str(HEIGHT - 6), text=dates[position]))
    return labels


def _text_width(text: str) -> float:
    return len(text) * CHAR_WIDTH


def _left(ticks: list[Tick]) -> int:
    """Where the plot starts: room for the widest y tick label and a gap before the axis."""
    return max(24, math.ceil(max((_text_width(tick.label) for tick in ticks), default=0)) + 8)


def _moment(day) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(day))
    except ValueError:
        return None


def _date_text(moment: dt.datetime | None, interval: str, raw, *, with_year: bool = False) -> str:
    """A bucket's start as people read it: `27 Nov`, `27 Nov 14:00` for hours, `Nov 2026` for months."""
    if moment is None:
        return str(raw)
    if interval == "month":
        return f"{moment:%b %Y}"
    text = f"{moment.day} {moment:%b}" + (f" {moment.year}" if with_year else "")
    return f"{text} {moment:%H:%M}" if interval == "hour" else text


def _value_bars(series: list[dict], folded: int) -> Chart:
    """One bar per series (a breakdown's values side by side), for the displays that show one value per series."""
    values = [_number_of(entry.get("aggregated_value", entry.get("count"))) for entry in series]
    top, ticks = _scale(max(values, default=0), integer=_integers([values]))
    left = _left(ticks)
    plot_width, plot_height = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_width / len(values)
    legend, rects = [], []
    for index, (label, value) in enumerate(zip(_labels(series), values, strict=True)):
        mark = Mark(color=_color(index), label=label)
        legend.append(mark)
        height = plot_height * value / top
        rects.append(
            Mark(
                color=mark.color,
                label=mark.label,
                x=_coordinate(left + index * slot + slot * 0.1),
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
        folded=folded,
        plot_left=left,
    )


def _funnel(steps: list[dict]) -> Chart:
    """A row per step: its name, how many people reached it and their share of the first step above a bar as long as
    that share. The table adds the average time from the step before. A step's share is empty when nobody entered
    the funnel."""
    counts = [_number_of(step.get("count")) for step in steps]
    first = counts[0] if counts else 0
    length = WIDTH - 8
    bars, tracks, labels, rows = [], [], [], []
    for index, (step, count) in enumerate(zip(steps, counts, strict=True)):
        name = f"{index + 1}. {step.get('custom_name') or step.get('name') or 'Step'}"
        share = _percent(count, first)
        value = f"{_format(count)} {'person' if count == 1 else 'people'}" + (f" · {share}" if share else "")
        top = 4 + index * FUNNEL_ROW
        # The step's name as long as fits beside its numbers.
        room = max(4, int((length - _text_width(value) - LABEL_GAP) / CHAR_WIDTH))
        labels.append(Label(x="4", y=str(top + TEXT_SIZE), text=_shortened(name, room), anchor="start", kind="step"))
        labels.append(Label(x=str(WIDTH - 4), y=str(top + TEXT_SIZE), text=value, anchor="end", kind="value"))
        bar_top = str(top + TEXT_SIZE + 6)
        tracks.append(Mark(color="", label=name, x="4", y=bar_top, width=str(length), height=str(FUNNEL_BAR)))
        bars.append(
            Mark(
                color=PALETTE[0],
                label=name,
                x="4",
                y=bar_top,
                width=_coordinate(length * count / first if first else 0),
                height=str(FUNNEL_BAR),
                value=value,
            )
        )
        average = step.get("average_conversion_time")
        rows.append([name, _format(count), share, "" if average is None else _duration(average)])
    return Chart(
        kind="funnel",
        bars=bars,
        tracks=tracks,
        labels=labels,
        height=8 + len(steps) * FUNNEL_ROW,
        table=Table(columns=["Step", "People", "Conversion", "Average time"], rows=rows),
    )


def _retention(cohorts: list[dict]) -> Chart:
    """A row per cohort: its start, its size, and the share of it that came back in each later period, each cell
    shaded by that share. A cohort of nobody, and a period still to come, are empty cells."""
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
            row.append(
                Cell(text=_percent(value, size), shade=f"shade-{round(10 * value / size)}") if size else Cell("")
            )
        row += [Cell(text="") for _ in range(periods - len(values))]
        grid.append(row)
    return Chart(kind="retention", grid=grid, table=Table(columns=columns, rows=[]))


def _percent(value: float, whole: float) -> str:
    """`value` as a share of `whole`; empty when `whole` is nothing (no share of nobody is 0 %)."""
    return f"{100 * value / whole:.1f}%".replace(".0%", "%") if whole else ""


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
    return Chart(
        kind="number", number=value, table=Table(columns=["Series", "Value"], rows=[[_labels(series)[0], value]])
    )


def _table(columns: list, rows: list) -> Chart:
    shown = [[_cell(value) for value in row] for row in rows[:MAX_TABLE_ROWS]]
    return Chart(kind="table", table=Table(columns=[str(column) for column in columns], rows=shown))


def _scale(highest: float, *, integer: bool = False) -> tuple[float, list[Tick]]:
    """The top of the y axis (a round number at or above `highest`, at least 1) and its ticks, bottom to top; whole
    numbers only when `integer` (counts: no 2.5 people)."""
    highest = max(highest, 1)
    raw = highest / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(
        factor * magnitude
        for factor in (1, 2, 2.5, 5, 10)
        if factor * magnitude >= raw and (not integer or float(factor * magnitude).is_integer())
    )
    top = step * math.ceil(highest / step)
    plot_height = HEIGHT - TOP - BOTTOM
    count = round(top / step)
    ticks = [
        Tick(y=_coordinate(TOP + plot_height * (1 - index * step / top)), label=_format(index * step))
        for index in range(count + 1)
    ]
    return top, ticks


def _integers(values: list[list[float]]) -> bool:
    return all(float(value).is_integer() for data in values for value in data)


def _shortened(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


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
