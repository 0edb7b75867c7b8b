"""The reference's own runner tests, ported as facts (DECISIONS.md §18): the same events in, the same numbers out.

Each test names the reference's test it comes from (PostHog's `posthog/hogql_queries/insights/{trends,funnels}/test/`
and `posthog/hogql_queries/insights/test/test_retention_query_runner.py`). Their persons are made as the reference's
tests make them, a person per distinct id unless the test joins several; where the reference counts persons, so do
these. What the reference does and this service deliberately does not is in docs/decisions.md ("Queries")."""

import datetime as dt

import pytest

from tests.pipelines.factories import PersonFactory
from tests.pipelines.query.conftest import add_event, on_both_engines, trends

run = on_both_engines()  # every test on the service's database and on ClickHouse (chDB)

ORDERS = ["ordered", "strict", "unordered"]


def counts(body) -> list[int]:
    return [step["count"] for step in body["results"]]


def funnel(*events: str, order: str = "ordered", date_from: str, date_to: str, **funnels_filter) -> dict:
    return {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": event, "name": event} for event in events],
        "funnelsFilter": {"funnelOrderType": order, **funnels_filter},
        "dateRange": {"date_from": date_from, "date_to": date_to},
    }


def journeys(project, people: dict[str, list[tuple[str, dt.datetime]]]) -> None:
    """The reference's `journeys_for`: a person per key, with its events (event, naive UTC time)."""
    for distinct_id, events in people.items():
        PersonFactory(project=project, distinct_ids=[distinct_id])
        for event, when in events:
            add_event(project, when.replace(tzinfo=dt.UTC), event, distinct_id)


class TestFunnelConversionTimes:
    """`conversion_time_cases.py` (`funnel_conversion_time_test_factory`), which the reference runs for each order."""

    @pytest.mark.parametrize("order", ORDERS)
    def test_funnel_with_multiple_incomplete_tries(self, run, project, order):
        journeys(
            project,
            {
                "person1": [
                    ("user signed up", dt.datetime(2021, 5, 1, 1)),  # the whole funnel on 1 May
                    ("$pageview", dt.datetime(2021, 5, 1, 2)),
                    ("something else", dt.datetime(2021, 5, 1, 3)),
                    ("user signed up", dt.datetime(2021, 5, 3, 4)),  # part of it, in two hours
                    ("$pageview", dt.datetime(2021, 5, 3, 5)),
                    ("user signed up", dt.datetime(2021, 5, 4, 7)),  # part of it, in three hours
                    ("$pageview", dt.datetime(2021, 5, 4, 10)),
                ]
            },
        )
        query = funnel(
            "user signed up",
            "$pageview",
            "something else",
            order=order,
            date_from="2021-05-01 00:00:00",
            date_to="2021-05-14 00:00:00",
            funnelWindowInterval=1,
        )

        results = run(query)["results"]

        assert results[0]["count"] == 1
        # One hour to convert: the incomplete tries are not counted.
        assert (results[1]["average_conversion_time"], results[1]["median_conversion_time"]) == (3600, 3600)

    @pytest.mark.parametrize("order", ORDERS)
    def test_funnel_step_conversion_times(self, run, project, order):
        journeys(
            project,
            {
                "person1": [
                    ("sign up", dt.datetime(2020, 1, 1, 12)),
                    ("play movie", dt.datetime(2020, 1, 1, 13)),
                    ("buy", dt.datetime(2020, 1, 1, 15)),
                ],
                "person2": [("sign up", dt.datetime(2020, 1, 2, 14)), ("play movie", dt.datetime(2020, 1, 2, 16))],
                "person3": [
                    ("sign up", dt.datetime(2020, 1, 2, 14)),
                    ("play movie", dt.datetime(2020, 1, 2, 16)),
                    ("buy", dt.datetime(2020, 1, 2, 17)),
                ],
            },
        )

        results = run(
            funnel("sign up", "play movie", "buy", order=order, date_from="2020-01-01", date_to="2020-01-08")
        )["results"]

        assert [step["average_conversion_time"] for step in results] == [None, 6000, 5400]
        assert [step["median_conversion_time"] for step in results] == [None, 7200, 5400]

    @pytest.mark.parametrize("order", ORDERS)
    def test_funnel_times_with_different_conversion_windows(self, run, project, order):
        journeys(
            project,
            {
                "stopped_after_signup1": [
                    ("user signed up", dt.datetime(2020, 1, 2, 14)),
                    ("pageview", dt.datetime(2020, 1, 2, 14, 5)),
                ],
                "stopped_after_signup2": [("user signed up", dt.datetime(2020, 1, 2, 14, 3))],
                "stopped_after_signup3": [
                    ("user signed up", dt.datetime(2020, 1, 2, 12)),
                    ("pageview", dt.datetime(2020, 1, 2, 12, 15)),
                ],
            },
        )
        dates = {"date_from": "2020-01-01", "date_to": "2020-01-14"}

        results = run(funnel("user signed up", "pageview", order=order, **dates))["results"]
        five_minutes = run(
            funnel(
                "user signed up",
                "pageview",
                order=order,
                funnelWindowInterval=5,
                funnelWindowIntervalUnit="minute",
                **dates,
            )
        )["results"]

        assert [step["count"] for step in results] == [3, 2]
        assert results[1]["average_conversion_time"] == 600
        assert [step["count"] for step in five_minutes] == [3, 1]
        assert five_minutes[1]["average_conversion_time"] == 300


class TestStrictFunnel:
    def test_basic_strict_funnel(self, run, project):
        """`test_funnel_strict.py` `test_basic_strict_funnel`: its events, created one after the other, a second
        apart here."""
        people = {
            "stopped_after_signup1": ["user signed up"],
            "stopped_after_pageview1": ["$pageview", "user signed up"],
            "stopped_after_insightview": ["user signed up", "$pageview", "blaah blaa", "insight viewed"],
            "stopped_after_insightview2": ["insight viewed", "blaah blaa", "$pageview", "user signed up"],
            "stopped_after_insightview3": ["$pageview", "user signed up", "blaah blaa", "$pageview", "insight viewed"],
            "person6": ["blaah blaa", "user signed up", "blaah blaa", "$pageview"],
            "person7": ["blaah blaa", "user signed up", "$pageview", "insight viewed", "blaah blaa"],
            "stopped_after_insightview6": ["insight viewed", "$pageview"],
        }
        second = dt.datetime(2024, 3, 5, 12, tzinfo=dt.UTC)
        for distinct_id, events in people.items():
            PersonFactory(project=project, distinct_ids=[distinct_id])
            for event in events:
                second += dt.timedelta(seconds=1)
                add_event(project, second, event, distinct_id)

        body = run(
            funnel(
                "user signed up",
                "$pageview",
                "insight viewed",
                order="strict",
                date_from="2024-03-01",
                date_to="2024-03-10",
            )
        )

        assert [step["name"] for step in body["results"]] == ["user signed up", "$pageview", "insight viewed"]
        # Step 2: stopped_after_insightview and person7; step 3: person7 alone.
        assert counts(body) == [7, 2, 1]


class TestTrends:
    """`test_trends_query_runner.py`, over its `_create_test_events`: four persons, p1 to p4."""

    @pytest.fixture
    def reference_events(self, project):
        pageviews = {
            "p1": ["2020-01-11", "2020-01-12", "2020-01-13", "2020-01-15", "2020-01-17", "2020-01-19"],
            "p2": ["2020-01-09", "2020-01-12"],
            "p3": ["2020-01-12"],
            "p4": ["2020-01-15"],
        }
        pageleaves = {"p1": ["2020-01-11", "2020-01-12", "2020-01-13"], "p2": ["2020-01-13"], "p3": ["2020-01-13"]}
        pageleaves["p4"] = ["2020-01-16"]
        for distinct_id, days in pageviews.items():
            PersonFactory(project=project, distinct_ids=[distinct_id])
            for day in days:
                add_event(project, f"{day}T12:00:00Z", "$pageview", distinct_id)
            for day in pageleaves[distinct_id]:
                add_event(project, f"{day}T12:00:00Z", "$pageleave", distinct_id)

    @staticmethod
    def data(run, math: str, interval: str, date_from: str, date_to: str) -> list:
        query = trends(
            {"kind": "EventsNode", "event": "$pageview", "math": math},
            interval=interval,
            dateRange={"date_from": date_from, "date_to": date_to},
        )
        return run(query)["results"][0]["data"]

    def test_trends_data(self, run, reference_events):
        assert self.data(run, "total", "day", "2020-01-09", "2020-01-19") == [1, 0, 1, 3, 1, 0, 2, 0, 1, 0, 1]

    def test_trends_aggregation_dau(self, run, reference_events):
        assert self.data(run, "dau", "day", "2020-01-09", "2020-01-20") == [1, 0, 1, 3, 1, 0, 2, 0, 1, 0, 1, 0]

    def test_trends_aggregation_wau(self, run, reference_events):
        assert self.data(run, "weekly_active", "day", "2020-01-09", "2020-01-20") == [
            1, 1, 2, 3, 3, 3, 4, 4, 4, 4, 2, 2
        ]  # fmt: skip

    def test_trends_aggregation_wau_long_interval(self, run, reference_events):
        # Weeks from Sunday: 9-11 January (the range starts on a Thursday), 12-18, 19-20.
        assert self.data(run, "weekly_active", "week", "2020-01-09", "2020-01-20") == [2, 4, 1]

    def test_trends_aggregation_mau(self, run, reference_events):
        assert self.data(run, "monthly_active", "day", "2020-01-09", "2020-01-20") == [
            1, 1, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4
        ]  # fmt: skip

    def test_trends_aggregation_mau_long_interval(self, run, reference_events):
        assert self.data(run, "monthly_active", "month", "2019-12-31", "2020-02-01") == [0, 4, 0]


class TestRetention:
    """`test_retention_query_runner.py`: person1 and alias1 are one person, person2 another; their `$pageview`s."""

    @staticmethod
    def date(day: int, hour: int = 5, month: int = 0) -> str:
        return dt.datetime(2020, 6 + month, 10 + day, hour).isoformat()

    @staticmethod
    def values(body) -> list[list[int]]:
        return [[value["count"] for value in cohort["values"]] for cohort in body["results"]]

    @pytest.fixture
    def persons(self, project):
        PersonFactory(project=project, distinct_ids=["person1", "alias1"])
        PersonFactory(project=project, distinct_ids=["person2"])

    def test_day_interval(self, run, project, persons):
        date = self.date
        for distinct_id, when in [
            ("person1", date(0)),
            ("person1", date(1)),
            ("person1", date(2)),
            ("person1", date(5)),
            ("alias1", date(5, 9)),
            ("person1", date(6)),
            ("person2", date(1)),
            ("person2", date(2)),
            ("person2", date(3)),
            ("person2", date(6)),
        ]:
            add_event(project, when, "$pageview", distinct_id)

        body = run({"kind": "RetentionQuery", "dateRange": {"date_to": date(10, hour=6)}})

        assert [cohort["label"] for cohort in body["results"]] == [f"Day {day}" for day in range(11)]
        assert body["results"][0]["date"] == "2020-06-10T00:00:00+00:00"
        assert self.values(body) == [
            [1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0],
            [2, 2, 1, 0, 1, 2, 0, 0, 0, 0],
            [2, 1, 0, 1, 2, 0, 0, 0, 0],
            [1, 0, 0, 1, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],  # person1 and alias1 on day 5: one person
            [2, 0, 0, 0, 0],
            [0, 0, 0, 0],
            [0, 0, 0],
            [0, 0],
            [0],
        ]

    def test_month_interval(self, run, project, persons):
        date = self.date
        for distinct_id, months in [("person1", [-5, -4, -3, -1, 0, 3]), ("person2", [-5, -4, -3, 0, 1, 5])]:
            for month in months:
                add_event(project, date(0, month=month), "$pageview", distinct_id)

        body = run(
            {
                "kind": "RetentionQuery",
                "dateRange": {"date_to": date(15, month=5, hour=0)},
                "retentionFilter": {"period": "Month", "totalIntervals": 11},
            }
        )

        assert [cohort["date"][:10] for cohort in body["results"]] == [f"2020-{month:02d}-01" for month in range(1, 12)]
        assert self.values(body) == [
            [2, 2, 2, 0, 1, 2, 1, 0, 1, 0, 1],
            [2, 2, 0, 1, 2, 1, 0, 1, 0, 1],
            [2, 0, 1, 2, 1, 0, 1, 0, 1],
            [0, 0, 0, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 1, 0, 0],
            [2, 1, 0, 1, 0, 1],
            [1, 0, 0, 0, 1],
            [0, 0, 0, 0],
            [1, 0, 0],
            [0, 0],
            [1],
        ]


class TestUnorderedFunnel:
    """`test_funnel_unordered.py`: its events, created one after the other, a second apart here."""

    PEOPLE = {
        "stopped_after_signup1": ["user signed up"],
        "stopped_after_pageview1": ["$pageview", "user signed up"],
        "stopped_after_insightview": ["user signed up", "$pageview", "blaah blaa", "insight viewed"],
        "stopped_after_insightview2": ["insight viewed", "$pageview", "user signed up"],
        "stopped_after_insightview3": ["$pageview", "user signed up", "blaah blaa", "insight viewed"],
        "stopped_after_insightview4": ["blaah blaa", "insight viewed"],
        "stopped_after_insightview5": ["$pageview", "blaah blaa"],
        "stopped_after_insightview6": ["insight viewed", "$pageview"],
    }

    @staticmethod
    def sequences(project, people: dict[str, list[str]]) -> None:
        second = dt.datetime(2024, 3, 5, 12, tzinfo=dt.UTC)
        for distinct_id, events in people.items():
            PersonFactory(project=project, distinct_ids=[distinct_id])
            for event in events:
                second += dt.timedelta(seconds=1)
                add_event(project, second, event, distinct_id)

    def test_basic_unordered_funnel(self, run, project):
        self.sequences(project, self.PEOPLE)

        body = run(
            funnel(
                "user signed up",
                "$pageview",
                "insight viewed",
                order="unordered",
                date_from="2024-03-01",
                date_to="2024-03-10",
            )
        )

        assert [step["name"] for step in body["results"]] == [
            "Completed 1 step",
            "Completed 2 steps",
            "Completed 3 steps",
        ]
        assert counts(body) == [8, 5, 3]

    def test_big_multi_step_unordered_funnel(self, run, project):
        people = {
            **self.PEOPLE,
            "stopped_after_pageview1": ["$pageview", "crying"],
            "stopped_after_insightview2": ["insight viewed", "crying", "user signed up"],
            "stopped_after_insightview3": ["$pageview", "user signed up", "crying", "insight viewed"],
        }
        self.sequences(project, people)
        steps = ["user signed up", "$pageview", "insight viewed", "crying"]

        body = run(funnel(*steps, order="unordered", date_from="2024-03-01", date_to="2024-03-10"))

        assert counts(body) == [8, 5, 3, 1]

    def test_basic_unordered_funnel_conversion_times(self, run, project):
        journeys(
            project,
            {
                "stopped_after_signup1": [("user signed up", dt.datetime(2021, 5, 2))],
                "stopped_after_pageview1": [
                    ("$pageview", dt.datetime(2021, 5, 2)),
                    ("user signed up", dt.datetime(2021, 5, 2, 1)),
                ],
                "stopped_after_insightview": [  # completes the funnel twice: the first (2 h + 2 h) counts
                    ("insight viewed", dt.datetime(2021, 5, 2)),
                    ("user signed up", dt.datetime(2021, 5, 2, 2)),
                    ("$pageview", dt.datetime(2021, 5, 2, 4)),
                    ("$pageview", dt.datetime(2021, 5, 3)),
                    ("insight viewed", dt.datetime(2021, 5, 3, 3)),
                    ("user signed up", dt.datetime(2021, 5, 3, 6)),
                ],
            },
        )
        query = funnel(
            "user signed up",
            "$pageview",
            "insight viewed",
            order="unordered",
            date_from="2021-05-01 00:00:00",
            date_to="2021-05-07 23:59:59",
            funnelWindowInterval=1,
        )

        results = run(query)["results"]

        assert results[0]["count"] == 3
        # As the reference's UDF funnels: each person's first conversion, not an average of all of theirs.
        assert [step["average_conversion_time"] for step in results] == [None, 5400, 7200]
