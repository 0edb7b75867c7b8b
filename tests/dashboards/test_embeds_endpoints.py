"""`/embed/<token>` of an endpoint (DECISIONS.md §21, last item; §19's signed embeds): the token locks some parameters,
checked against the endpoint's schema when it is read; the viewer sets only the others, within their schema; no URL
changes a locked one; the answer is the run's, with its freshness in HTTP, and public traffic computes it once per
period for everyone."""

import datetime as dt
import logging

import jwt
import pytest
import requests
from django.test import Client
from django.utils import timezone

from dashboards.core.models import Dashboard
from dashboards.public.embeds import embed_token
from dashboards.public.endpoint_pages import MAX_TABLE_ROWS
from dashboards.public.pages import SharedPageViewThrottle
from dashboards.public.services import embed_secret_create
from pipelines.endpoints.models import EndpointUsage
from pipelines.endpoints.services import endpoint_create, endpoint_delete, endpoint_update
from tests.pipelines.factories import EventFactory
from tests.pipelines.query.conftest import add_event
from tests.workspace.test_content_security_policy import assert_page_works_under_its_policy

QUERY = {
    "kind": "HogQLQuery",
    "query": "SELECT count() AS n FROM events WHERE properties.country = {variables.country} "
    "AND properties.n >= {variables.min_n}",
}
PARAMETERS = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "enum": ["DE", "FR", "US"], "description": "Where the customer is"},
        "min_n": {"type": "integer", "minimum": 0, "maximum": 100, "default": 0},
    },
    "required": ["country"],
}
GERMANY = {"parameters": {"country": "DE"}}


@pytest.fixture
def portal(project, alice):
    return embed_secret_create(
        actor=alice, project=project, name="Portal", allowed_origins=["https://portal.example.com"]
    )


@pytest.fixture
def endpoint(project, alice):
    for country, n in [("DE", 5), ("DE", 50), ("DE", 70), ("FR", 5), ("US", 5)]:
        add_event(project, "2024-03-11T12:00:00Z", country=country, n=n)
    return endpoint_create(
        actor=alice,
        project=project,
        name="by-country",
        description="Views by country, for our customers",
        query=QUERY,
        parameters=PARAMETERS,
    )


def sign(portal, *, resource=None, locked=None, exp_in=dt.timedelta(hours=1), **claims) -> str:
    """A token as a customer's server signs one."""
    secret, raw = portal
    payload = {
        "resource": resource if resource is not None else {"endpoint": "by-country"},
        "locked": locked if locked is not None else GERMANY,
        "exp": int((timezone.now() + exp_in).timestamp()),
        **claims,
    }
    return jwt.encode(payload, raw, algorithm="HS256", headers={"kid": secret.kid})


def get(token: str, query: str = "", **headers):
    extra = {f"HTTP_{name.upper()}": value for name, value in headers.items()}
    return Client().get(f"/embed/{token}" + (f"?{query}" if query else ""), **extra)


def data(token: str, query: str = "", **headers):
    return get(token, "&".join(part for part in ("format=json", query) if part), **headers)


class TestTheAnswer:
    def test_the_json_is_the_runs_answer_with_the_locked_parameters_in_force(self, portal, endpoint, computations):
        response = data(sign(portal))

        assert response.status_code == 200
        body = response.json()
        assert body == {
            "results": [[3]],
            "columns": ["n"],
            "types": [["n", "UInt64"]],
            "version": 1,
            "parameters": {"country": "DE", "min_n": 0},
            "limit": 100,
            "offset": 0,
            "hasMore": False,
            "resource": {"endpoint": "by-country", "version": 1},
            "locked": {"parameters": {"country": "DE"}},
            "expires_at": body["expires_at"],
        }
        assert computations == ["HogQLQuery"]

    def test_an_open_parameter_is_read_by_its_type(self, portal, endpoint):
        body = data(sign(portal), "min_n=10").json()

        assert body["parameters"] == {"country": "DE", "min_n": 10}
        assert body["results"] == [[2]]

    def test_a_blank_open_parameter_takes_its_default(self, portal, endpoint):
        assert data(sign(portal), "min_n=").json()["parameters"] == {"country": "DE", "min_n": 0}

    def test_a_token_that_locks_nothing_leaves_every_parameter_to_the_viewer(self, portal, endpoint):
        token = sign(portal, locked={"parameters": {}})

        assert data(token, "country=FR").json()["results"] == [[1]]
        missing = data(token)
        assert missing.status_code == 400
        assert (missing.json()["code"], missing.json()["attr"]) == ("required", "/country")

    @pytest.mark.parametrize(
        "query, attr, code",
        [
            ("min_n=ten", "/min_n", "invalid_type"),
            ("min_n=101", "/min_n", "max_value"),
            ("min_n=-1", "/min_n", "min_value"),
            ("min_n=1.5", "/min_n", "invalid_type"),
        ],
    )
    def test_an_open_parameter_outside_its_schema_is_a_400_naming_it(self, portal, endpoint, query, attr, code):
        response = data(sign(portal), query)

        assert response.status_code == 400
        body = response.json()
        assert (body["type"], body["code"], body["attr"]) == ("validation_error", code, attr)
        assert "no-store" in response["Cache-Control"] and "ETag" not in response

    def test_csv_and_ndjson_by_format(self, portal, endpoint):
        token = sign(portal)

        as_csv = get(token, "format=csv")
        as_ndjson = get(token, "format=ndjson&min_n=10")

        assert as_csv.status_code == 200 and as_csv["Content-Type"].startswith("text/csv")
        assert as_csv.content.decode() == "n\r\n3\r\n"
        assert as_ndjson.content.decode() == '{"n":2}\n'
        assert as_csv["ETag"] != data(token)["ETag"]

    def test_a_pinned_version_answers_as_it_did(self, portal, endpoint, alice):
        endpoint_update(
            actor=alice,
            endpoint=endpoint,
            query={
                "kind": "HogQLQuery",
                "query": "SELECT count() * 10 AS n FROM events WHERE "
                "properties.country = {variables.country} AND properties.n >= {variables.min_n}",
            },
        )

        pinned = data(sign(portal, resource={"endpoint": "by-country", "version": 1})).json()
        latest = data(sign(portal)).json()

        assert (pinned["version"], pinned["results"]) == (1, [[3]])
        assert (latest["version"], latest["results"]) == (2, [[30]])
        assert pinned["resource"] == {"endpoint": "by-country", "version": 1}

    def test_an_allowed_origin_may_read_the_json(self, portal, endpoint):
        token = sign(portal)
        allowed = data(token, origin="https://portal.example.com")
        other = data(token, origin="https://evil.example")

        assert allowed["Access-Control-Allow-Origin"] == "https://portal.example.com"
        assert "Access-Control-Allow-Origin" not in other

    def test_each_view_is_counted_in_the_endpoints_usage(self, portal, endpoint):
        token = sign(portal)
        data(token)
        data(token)
        data(token, "min_n=ten")

        usage = EndpointUsage.objects.get(endpoint=endpoint)
        assert (usage.calls, usage.errors, usage.cache_hits, usage.rows) == (3, 1, 1, 2)


class TestNoUrlChangesALockedParameter:
    @pytest.mark.parametrize(
        "query",
        [
            "country=FR",
            "country=FR&country=US",
            "country=&min_n=0",
            "Country=FR",
            "COUNTRY=US",
            "country%20=FR",
            "parameters[country]=FR",
            "parameters%5Bcountry%5D=FR",
            'parameters={"country":"FR"}',
            'locked={"parameters":{}}',
            "version=1&country=FR",
            "refresh=force_blocking&country=US",
        ],
    )
    def test_no_query_string_changes_it(self, portal, endpoint, query):
        token = sign(portal)

        tried = data(token, query)
        page = get(token, query)

        assert tried.status_code == 200, tried.content
        assert tried.json()["parameters"]["country"] == "DE"
        assert tried.json()["results"] == [[3]]
        assert page.status_code == 200
        assert "<td>3</td>" in page.content.decode()

    def test_the_page_shows_it_fixed_and_offers_no_field_for_it(self, portal, endpoint):
        html = get(sign(portal), "country=FR").content.decode()

        fixed = html.split('<dl class="fixed">', 1)[1].split("</dl>", 1)[0]
        assert "<dt>country</dt><dd>DE" in fixed
        form = html.split("<form", 1)[1].split("</form>", 1)[0]
        assert 'name="country"' not in form and 'name="min_n"' in form

    @pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
    def test_no_method_but_get_is_taken(self, portal, endpoint, method):
        response = getattr(Client(), method)(
            f"/embed/{sign(portal)}?format=json", {"parameters": {"country": "FR"}}, content_type="application/json"
        )
        assert response.status_code == 405


class TestThePage:
    def test_it_shows_the_description_the_form_and_the_result(self, portal, endpoint):
        response = get(sign(portal, locked={"parameters": {}}), "country=DE&min_n=10")

        assert response.status_code == 200
        html = response.content.decode()
        assert "<h1>by-country</h1>" in html and "Views by country, for our customers" in html
        form = html.split("<form", 1)[1].split("</form>", 1)[0]
        assert 'method="get"' in html.split("<form", 1)[1][:40]
        select = form.split('<select name="country"', 1)[1].split("</select>", 1)[0]
        assert " required" in select.split(">", 1)[0]
        assert '<option value="DE" selected>DE</option>' in select and '<option value="FR">FR</option>' in select
        number = form.split('name="min_n"', 1)[1].split(">", 1)[0]
        assert 'value="10"' in number and 'min="0"' in number and 'max="100"' in number and 'step="1"' in number
        assert 'type="number"' in form.split('name="min_n"', 1)[0].rsplit("<input", 1)[1]
        assert '<th scope="col">n</th>' in html and "<td>2</td>" in html
        assert "1 row." in html
        assert "<script" not in html and "http://" not in html and "https://" not in html
        href = html.split("<footer>", 1)[1].split('href="', 1)[1].split('"', 1)[0]
        assert sorted(href.lstrip("?").split("&amp;")) == ["country=DE", "format=json", "min_n=10"]

    def test_inputs_follow_the_schema(self, portal, project, alice):
        add_event(project, "2024-03-11T12:00:00Z")
        endpoint_create(
            actor=alice,
            project=project,
            name="typed",
            query={
                "kind": "HogQLQuery",
                "query": "SELECT {variables.day} AS day, {variables.on} AS on, "
                "{variables.at} AS at, {variables.ratio} AS ratio, {variables.who} AS who FROM events LIMIT 1",
            },
            parameters={
                "type": "object",
                "properties": {
                    "day": {"type": "string", "format": "date", "default": "2024-03-01"},
                    "on": {"type": "boolean", "default": True},
                    "at": {"type": "string", "format": "date-time", "default": "2024-03-01T00:00:00Z"},
                    "ratio": {"type": "number", "default": 0.5},
                    "who": {"type": "string", "pattern": "^[a-z]+$", "default": "ann"},
                },
            },
        )
        html = get(sign(portal, resource={"endpoint": "typed"}, locked={"parameters": {}})).content.decode()
        form = html.split("<form", 1)[1].split("</form>", 1)[0]

        def tag(name):
            before, after = form.split(f'name="{name}"', 1)
            return before.rsplit("<", 1)[1] + after.split(">", 1)[0]

        assert 'input type="date"' in tag("day")
        assert tag("on").startswith("select")
        assert '<option value="true">true</option>' in form and '<option value="" selected>Default (true)' in form
        assert 'input type="text"' in tag("at") and 'placeholder="2024-03-01T00:00:00Z"' in tag("at")
        assert 'input type="number"' in tag("ratio") and 'step="any"' in tag("ratio")
        assert 'input type="text"' in tag("who")
        assert "<td>2024-03-01</td>" in html and "<td>ann</td>" in html

    def test_a_query_of_another_kind_shows_its_results_as_rows(self, portal, project, alice):
        add_event(project, timezone.now() - dt.timedelta(days=1))
        endpoint_create(
            actor=alice,
            project=project,
            name="views",
            query={
                "kind": "TrendsQuery",
                "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
                "dateRange": {"date_from": "{variables.since}"},
            },
            parameters={"type": "object", "properties": {"since": {"type": "string", "default": "-7d"}}},
        )
        token = sign(portal, resource={"endpoint": "views"}, locked={"parameters": {}})

        html = get(token).content.decode()
        body = data(token, "since=-3d").json()

        assert '<th scope="col">count</th>' in html and "1 row." in html
        assert body["parameters"] == {"since": "-3d"} and body["results"][0]["count"] == 1
        assert body["columns"] is None

    def test_a_wrong_open_parameter_is_shown_inline_with_a_400(self, portal, endpoint):
        response = get(sign(portal), "min_n=ten")

        assert response.status_code == 400
        html = response.content.decode()
        field = html.split('name="min_n"', 1)[1].split("</label>", 1)[0]
        assert 'aria-invalid="true"' in field and 'value="ten"' in field
        assert "The parameter &#x27;min_n&#x27;" in field and 'role="alert"' in field
        assert "<table>" not in html

    def test_a_required_open_parameter_is_asked_for(self, portal, endpoint):
        response = get(sign(portal, locked={"parameters": {}}))

        assert response.status_code == 200
        html = response.content.decode()
        assert "Choose a value above to see the result." in html and "<table>" not in html
        assert '<option value="" selected>Choose…</option>' in html

    def test_rows_past_the_tables_bound_are_cut_and_counted(self, portal, project, alice):
        EventFactory.create_batch(MAX_TABLE_ROWS + 20, project=project)
        endpoint_create(
            actor=alice,
            project=project,
            name="numbers",
            query={"kind": "HogQLQuery", "query": "SELECT uuid FROM events LIMIT 1000"},
            parameters={"type": "object", "properties": {}},
        )
        token = sign(portal, resource={"endpoint": "numbers"}, locked={"parameters": {}})

        html = get(token).content.decode()
        body = data(token).json()

        assert html.count("<tr>") == MAX_TABLE_ROWS + 1  # the header and the rows shown
        assert f"The first {MAX_TABLE_ROWS} of {MAX_TABLE_ROWS + 20} rows" in html
        assert "all of them are in the JSON" in html
        assert len(body["results"]) == MAX_TABLE_ROWS + 20

    def test_it_is_framed_by_the_secrets_origins_only_and_never_kept(self, portal, endpoint):
        response = get(sign(portal))

        policy = dict((part.split()[0], part.split()[1:]) for part in response["Content-Security-Policy"].split("; "))
        assert policy["frame-ancestors"] == ["https://portal.example.com"]
        assert "X-Frame-Options" not in response and response["Referrer-Policy"] == "no-referrer"
        assert "no-store" in response["Cache-Control"] and "ETag" not in response

    def test_it_works_under_its_content_security_policy(self, project, alice, endpoint):
        nowhere = embed_secret_create(actor=alice, project=project, name="Nowhere")  # framed nowhere: 'none'
        assert_page_works_under_its_policy(get(sign(nowhere)))

    def test_views_are_throttled_per_address(self, portal, endpoint, monkeypatch):
        monkeypatch.setattr(SharedPageViewThrottle, "THROTTLE_RATES", {"shared_page_view": "2/minute"})
        token = sign(portal)

        assert [get(token).status_code for _ in range(2)] == [200, 200]
        refused = data(token)
        assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1

    def test_the_page_reads_three_rows_four_when_pinned(self, portal, endpoint, alice, django_assert_num_queries):
        token = sign(portal)
        get(token)  # the result is cached, and the hour's usage row exists

        # the secret (with its project and organization), the endpoint, the usage counter's UPDATE
        with django_assert_num_queries(3):
            assert get(token).status_code == 200
        # a pinned earlier version: its kept row too
        endpoint_update(actor=alice, endpoint=endpoint, query={**QUERY, "query": QUERY["query"] + " LIMIT 5"})
        pinned = sign(portal, resource={"endpoint": "by-country", "version": 1})
        get(pinned)
        with django_assert_num_queries(4):
            assert get(pinned).status_code == 200


class TestPublicTraffic:
    def test_one_computation_per_effective_parameters_and_period(self, portal, endpoint, computations):
        token = sign(portal)

        for _ in range(3):
            data(token, "min_n=10")
        get(token, "min_n=10")
        data(token, "min_n=20")

        assert computations == ["HogQLQuery", "HogQLQuery"]

    def test_the_period_is_the_endpoints_own_when_longer(self, portal, endpoint, settings, alice):
        settings.SHARED_PAGE_REFRESH_SECONDS = 60
        endpoint_update(actor=alice, endpoint=endpoint, cache_seconds=3600)

        assert data(sign(portal))["Cache-Control"] == "private, max-age=3600"
        endpoint_update(actor=alice, endpoint=endpoint, cache_seconds=5)
        # public traffic never computes more often than public pages do
        assert data(sign(portal, locked={"parameters": {"country": "FR"}}))["Cache-Control"] == "private, max-age=60"


class TestFreshness:
    def test_etag_age_and_cache_status_then_a_304_with_nothing_computed(self, portal, endpoint, computations):
        token = sign(portal)

        first = data(token)
        again = data(token, if_none_match=first["ETag"])
        other = data(token, "min_n=10", if_none_match=first["ETag"])

        assert first["ETag"].startswith('W/"') and first["Age"] == "0"
        assert first["Cache-Status"] == "workspace; fwd=miss; stored; ttl=300"
        assert first["Cache-Control"] == "private, max-age=300"
        assert (again.status_code, again.content) == (304, b"")
        assert again["ETag"] == first["ETag"] and again["Cache-Status"].startswith("workspace; hit; ttl=")
        assert other.status_code == 200 and other["ETag"] != first["ETag"]
        assert computations == ["HogQLQuery", "HogQLQuery"]

    def test_only_if_cached_is_a_504_until_it_is_cached_and_no_cache_changes_nothing(
        self, portal, endpoint, computations
    ):
        token = sign(portal)

        missing = data(token, cache_control="only-if-cached")
        computed = data(token)
        cached = data(token, cache_control="only-if-cached")
        no_cache = data(token, cache_control="no-cache")

        assert missing.status_code == 504 and missing.json()["code"] == "not_cached"
        assert "no-store" in missing["Cache-Control"]
        assert cached.status_code == 200 and cached["ETag"] == computed["ETag"]
        assert no_cache["Cache-Status"].startswith("workspace; hit; ")
        assert computations == ["HogQLQuery"]


def refused_tokens(portal, endpoint, other_project, alice) -> dict[str, str]:
    """Every kind of endpoint token that grants nothing, by reason."""
    endpoint_create(actor=alice, project=other_project, name="elsewhere", query=QUERY, parameters=PARAMETERS)
    dashboard = Dashboard.objects.create(project=endpoint.project, name="Shop")
    return {
        "no such endpoint": sign(portal, resource={"endpoint": "nope"}),
        "another project's endpoint": sign(portal, resource={"endpoint": "elsewhere"}),
        "a name that is no slug": sign(portal, resource={"endpoint": "By Country"}),
        "a name that is no text": sign(portal, resource={"endpoint": 7}),
        "a version it never had": sign(portal, resource={"endpoint": "by-country", "version": 2}),
        "a version as text": sign(portal, resource={"endpoint": "by-country", "version": "1"}),
        "a version of zero": sign(portal, resource={"endpoint": "by-country", "version": 0}),
        "an endpoint and a dashboard": sign(portal, resource={"endpoint": "by-country", "dashboard": dashboard.pk}),
        "a resource of another kind": sign(portal, resource={"report": "by-country"}),
        "a locked name that is no parameter": sign(portal, locked={"parameters": {"city": "Berlin"}}),
        "a locked value outside its enum": sign(portal, locked={"parameters": {"country": "ES"}}),
        "a locked value of another type": sign(portal, locked={"parameters": {"country": "DE", "min_n": "5"}}),
        "a locked value past its maximum": sign(portal, locked={"parameters": {"country": "DE", "min_n": 101}}),
        "a locked value too long": sign(portal, locked={"parameters": {"country": "D" * 1001}}),
        "locked parameters not an object": sign(portal, locked={"parameters": ["country"]}),
        "locked properties for an endpoint": sign(portal, locked={"parameters": {}, "properties": []}),
        "locked dates for an endpoint": sign(portal, locked={"parameters": {}, "date_from": "-7d"}),
        "a viewer date range for an endpoint": sign(portal, viewer_date_range=True),
        "an unknown lock": sign(portal, locked={"parameters": {}, "columns": ["n"]}),
        "no locked": jwt.encode(
            {"resource": {"endpoint": "by-country"}, "exp": int((timezone.now() + dt.timedelta(hours=1)).timestamp())},
            portal[1],
            algorithm="HS256",
            headers={"kid": portal[0].kid},
        ),
        "a dashboard with locked parameters": sign(
            portal, resource={"dashboard": dashboard.pk}, locked={"properties": [], "parameters": {"country": "DE"}}
        ),
        "expired": sign(portal, exp_in=-dt.timedelta(seconds=5)),
    }


class TestRefusals:
    def assert_refused(self, token):
        html, as_json = get("not-a-token"), data("not-a-token")
        response = get(token)
        assert response.status_code == 404
        assert response.content == html.content
        assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
        response = data(token)
        assert response.status_code == 404 and response.content == as_json.content

    def test_every_refused_token_is_the_same_404_and_logged_why(self, portal, endpoint, other_project, alice, caplog):
        for reason, token in refused_tokens(portal, endpoint, other_project, alice).items():
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="dashboards.public.embed_pages"):
                assert get(token).status_code == 404, reason
            [record] = [record for record in caplog.records if record.name == "dashboards.public.embed_pages"]
            assert record.levelno == logging.INFO and "refused" in record.getMessage(), reason
            self.assert_refused(token)

    def test_why_a_locked_parameter_is_refused_is_logged(self, portal, endpoint, caplog):
        with caplog.at_level(logging.INFO, logger="dashboards.public.embed_pages"):
            get(sign(portal, locked={"parameters": {"country": "ES"}}))
        assert "locked parameter /country" in caplog.text

    def test_an_endpoint_deleted_after_signing_is_refused(self, portal, endpoint, alice):
        token = sign(portal)
        assert get(token).status_code == 200

        endpoint_delete(actor=alice, endpoint=endpoint)

        self.assert_refused(token)

    def test_an_endpoint_renamed_after_signing_is_refused(self, portal, endpoint, alice):
        token = sign(portal)
        assert get(token).status_code == 200

        endpoint_update(actor=alice, endpoint=endpoint, name="by-land")

        self.assert_refused(token)
        assert get(sign(portal, resource={"endpoint": "by-land"})).status_code == 200

    def test_a_locked_value_the_latest_schema_no_longer_allows_is_refused(self, portal, endpoint, alice):
        token = sign(portal, locked={"parameters": {"country": "US"}})
        assert get(token).status_code == 200
        narrowed = {
            **PARAMETERS,
            "properties": {**PARAMETERS["properties"], "country": {"type": "string", "enum": ["DE"]}},
        }

        endpoint_update(actor=alice, endpoint=endpoint, parameters=narrowed)

        self.assert_refused(token)
        assert (
            get(
                sign(
                    portal, resource={"endpoint": "by-country", "version": 1}, locked={"parameters": {"country": "US"}}
                )
            ).status_code
            == 200
        )


def test_the_signing_helper_locks_parameters_for_an_endpoint(portal, endpoint):
    secret, raw = portal
    token = embed_token(kid=secret.kid, secret=raw, resource={"endpoint": "by-country"}, parameters={"country": "FR"})
    assert data(token).json()["results"] == [[1]]


def test_an_embedded_endpoint_over_http(live_service, portal, endpoint):
    token = sign(portal)
    url = f"{live_service.url}/embed/{token}"

    page = live_service.session.get(url, params={"country": "FR", "min_n": "10"})
    first = requests.get(url, params={"format": "json", "country": "US"}, timeout=30)
    again = requests.get(
        url, params={"format": "json", "country": "US"}, headers={"If-None-Match": first.headers["ETag"]}, timeout=30
    )
    wrong = requests.get(url, params={"format": "json", "min_n": "many"}, timeout=30)
    posted = requests.post(url, json={"parameters": {"country": "FR"}}, timeout=30)

    assert page.status_code == 200 and "<td>2</td>" in page.text
    assert "frame-ancestors https://portal.example.com" in page.headers["Content-Security-Policy"]
    assert first.status_code == 200 and first.json()["parameters"] == {"country": "DE", "min_n": 0}
    assert first.json()["results"] == [[3]]
    assert first.headers["Cache-Status"].startswith("workspace; ")
    assert (again.status_code, again.content) == (304, b"")
    assert wrong.status_code == 400 and wrong.json()["attr"] == "/min_n"
    assert posted.status_code == 405
