"""Charts read on a phone (issue 51): their text is at least READABLE px high on a 390 px wide screen (it was 7–8),
the dates under a time axis are a regular step apart and end on the last interval (they were spread by rounding,
7 or 8 days apart), and no label overlaps another or leaves the chart."""

import datetime as dt
import re

import pytest
from django.template.loader import render_to_string

from dashboards.core.models import Insight
from dashboards.public import charts
from dashboards.public.charts import CHAR_WIDTH, NARROW_WIDTH, READABLE, TEXT_SIZE, WIDTH, chart
from tests import live

TEMPLATES = live.ROOT / "templates" / "dashboards"


def insight(source: dict) -> Insight:
    return Insight(query={"kind": "InsightVizNode", "source": source})


def trend(days: list[str], *, interval: str = "day", display: str | None = None, data: list | None = None):
    source = {"kind": "TrendsQuery", "interval": interval}
    if display:
        source["trendsFilter"] = {"display": display}
    series = [{"label": "a", "data": data if data is not None else [1] * len(days), "days": days}]
    return chart(insight(source), {"result": series, "columns": None})


def daily(count: int, last: dt.date = dt.date(2026, 11, 28)) -> list[str]:
    return [(last - dt.timedelta(days=count - 1 - index)).isoformat() for index in range(count)]


def extent(label) -> tuple[float, float]:
    """Where a label's text starts and ends along x, at about CHAR_WIDTH a character."""
    width, x = len(label.text) * CHAR_WIDTH, float(label.x)
    return {"start": (x, x + width), "middle": (x - width / 2, x + width / 2), "end": (x - width, x)}[label.anchor]


def css(template: str) -> str:
    return re.search(r"{% block style %}(.*?){% endblock %}", (TEMPLATES / template).read_text(), re.S).group(1)


class TestTextSize:
    def test_the_text_is_readable_in_a_tile_on_a_390_px_phone(self):
        assert TEXT_SIZE * NARROW_WIDTH / WIDTH >= READABLE

    def test_the_phone_width_is_what_the_page_leaves_a_chart(self):
        """NARROW_WIDTH takes off the page's and the tile's padding and border, as the page's CSS sets them."""
        style = css("shared_dashboard.html")
        assert re.search(r"body \{[^}]*padding: 0 1rem;", style)
        assert re.search(r"\.tile \{[^}]*border: 1px [^}]*padding: 1rem;", style)
        assert re.search(r"\.chart \{ width: 100%;", style)
        assert NARROW_WIDTH == 390 - 2 * 16 - 2 * (16 + 1)

    def test_on_a_wide_screen_the_text_stays_moderate(self):
        style = css("shared_dashboard.html")
        max_width = float(re.search(r"\.chart \{[^}]*max-width: ([\d.]+)rem;", style).group(1)) * 16
        assert TEXT_SIZE * max_width / WIDTH < 19

    def test_the_svg_sets_its_text_size_and_no_stylesheet_overrides_it(self):
        drawn = trend(daily(7))

        svg = render_to_string("dashboards/chart_svg.html", {"chart": drawn, "label": "Views"})
        assert f'font-size="{TEXT_SIZE}"' in svg.split(">", 1)[0]
        admin_css = (live.ROOT / "workspace" / "static" / "workspace" / "admin.css").read_text()
        for style in (css("shared_dashboard.html"), admin_css):
            for rule in re.findall(r"\.chart(?![\w-])[^{]*\{[^}]*\}", style):
                assert "font-size" not in rule, rule


class TestDates:
    @pytest.mark.parametrize("count", [2, 7, 8, 14, 15, 30, 31, 45, 90, 180, 365])
    def test_daily_dates_are_a_regular_step_apart_and_end_on_the_last_day(self, count):
        drawn = trend(daily(count))

        # Where the axis spans two years the labels say theirs.
        texts = [label.text if label.text.count(" ") == 2 else f"{label.text} 2026" for label in drawn.labels]
        written = [dt.datetime.strptime(text, "%d %b %Y").date() for text in texts]
        assert written[-1] == dt.date(2026, 11, 28)
        steps = {(later - earlier).days for earlier, later in zip(written, written[1:], strict=False)}
        assert len(steps) <= 1 and steps <= set(charts.DATE_STEPS["day"])
        assert (written[0] - dt.date.fromisoformat(daily(count)[0])).days < max(steps, default=1)
        assert len(drawn.labels) >= min(count, 3)

    @pytest.mark.parametrize("display", [None, "ActionsBar"])
    @pytest.mark.parametrize(
        ("interval", "days"),
        [
            ("day", daily(31)),
            ("day", daily(60)),
            ("hour", [f"2026-11-27 {hour:02}:00:00" for hour in range(24)]),
            ("week", daily(12 * 7)[::7]),
            ("month", [f"2026-{month:02}-01" for month in range(1, 13)]),
        ],
    )
    def test_no_label_overlaps_another_or_leaves_the_chart(self, interval, days, display):
        drawn = trend(days, interval=interval, display=display, data=[1234] * len(days))

        spans = [extent(label) for label in drawn.labels]
        assert spans and all(0 <= start and end <= WIDTH for start, end in spans)
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
        assert drawn.date_marks == [label.x for label in drawn.labels]  # each date has its tick
        # The y axis's labels fit left of the plot.
        widest = max(len(tick.label) for tick in drawn.ticks) * CHAR_WIDTH
        assert widest + 4 <= drawn.plot_left

    def test_a_long_funnel_step_name_is_shortened_to_fit_beside_its_numbers(self):
        steps = [{"name": "a page view with an event name far too long to fit", "count": 1400}, {"count": 9}]
        drawn = chart(insight({"kind": "FunnelsQuery"}), {"result": steps, "columns": None})

        name, numbers = (extent(label) for label in drawn.labels[:2])
        assert drawn.labels[0].text.endswith("…") and drawn.labels[1].text == "1,400 people · 100%"
        assert name[1] < numbers[0] and numbers[1] <= WIDTH
