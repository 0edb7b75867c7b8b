"""The capture endpoints (DECISIONS.md §13): each kind of body, with its status and what it leaves in the table."""

import datetime as dt
import gzip
import json
import uuid

import pytest
from django.test import Client

from organizations.services import project_rotate_api_token
from pipelines.events.models import Event, EventUUID
from tests.organizations.factories import ProjectFactory

PATHS = ["/capture/", "/e/", "/i/v0/e/", "/batch/", "/capture", "/e", "/i/v0/e", "/batch"]
UUID_1 = "01890000-0000-7000-8000-000000000001"
UUID_2 = "01890000-0000-7000-8000-000000000002"


@pytest.fixture
def client(db):
    # A browser-like client that enforces CSRF: the capture endpoints need no token for it.
    return Client(enforce_csrf_checks=True)


def post(client, path, body, **extra):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, data, content_type=extra.pop("content_type", "application/json"), **extra)


def event(name="$pageview", distinct_id="user-1", **fields):
    return {"event": name, "distinct_id": distinct_id, **fields}


def rows(project=None):
    events = Event.objects.order_by("id")
    if project is not None:
        events = events.filter(project=project)
    return [(row.event, row.distinct_id) for row in events]


def assert_refused(response, status, code, attr=None, type_=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert (body["code"], body["attr"]) == (code, attr), body
    if type_:
        assert body["type"] == type_
    assert Event.objects.count() == 0
    assert EventUUID.objects.count() == 0


class TestBodies:
    @pytest.mark.parametrize("path", PATHS)
    def test_every_path_takes_one_event(self, client, project, path):
        response = post(client, path, {**event(), "api_key": project.api_token})
        assert response.status_code == 200
        assert response.json() == {"status": 1}
        assert rows(project) == [("$pageview", "user-1")]

    @pytest.mark.parametrize("path", PATHS)
    def test_every_path_takes_a_batch(self, client, project, path):
        response = post(client, path, {"api_key": project.api_token, "batch": [event("a"), event("b")]})
        assert response.status_code == 200
        assert rows(project) == [("a", "user-1"), ("b", "user-1")]

    def test_a_list_of_events_names_its_project_in_the_events(self, client, project):
        body = [event("a", properties={"token": project.api_token}), event("b", token=project.api_token)]
        assert post(client, "/e/", body).status_code == 200
        assert rows(project) == [("a", "user-1"), ("b", "user-1")]

    def test_what_is_stored(self, client, project):
        sent = event(
            "signed up",
            "user-42",
            properties={"plan": "pro", "$lib": "web", "nested": {"list": [1, 2.5, None, True]}, "emoji": "😀"},
            timestamp="2026-03-04T05:06:07.123456+02:00",
            uuid=UUID_1,
        )
        assert post(client, "/capture/", {"api_key": project.api_token, **sent}).status_code == 200
        stored = Event.objects.get()
        assert (stored.project, stored.event, stored.distinct_id, str(stored.uuid)) == (
            project,
            "signed up",
            "user-42",
            UUID_1,
        )
        assert stored.properties == sent["properties"]
        assert stored.timestamp == dt.datetime(2026, 3, 4, 3, 6, 7, 123456, tzinfo=dt.UTC)

    @pytest.mark.parametrize("text", ['say "hi"', "back\\slash", "tab\tnew\nline", "Grüße 😀", "\u2028", "{}[],:"])
    def test_any_text_is_stored_as_sent(self, client, project, text):
        body = {"api_key": project.api_token, **event(text, text, properties={text: text})}
        assert post(client, "/e/", body).status_code == 200
        stored = Event.objects.get()
        assert (stored.event, stored.distinct_id, stored.properties) == (text, text, {text: text})

    def test_defaults_timestamp_now_and_a_new_uuid(self, client, project):
        before = dt.datetime.now(dt.UTC)
        assert post(client, "/e/", {"api_key": project.api_token, **event()}).status_code == 200
        stored = Event.objects.get()
        assert before <= stored.timestamp <= dt.datetime.now(dt.UTC)
        assert stored.uuid.version == 4
        assert stored.properties == {}

    def test_an_offset_without_timestamp_counts_back_from_now(self, client, project):
        assert post(client, "/e/", {"api_key": project.api_token, **event(offset=60_000)}).status_code == 200
        age = dt.datetime.now(dt.UTC) - Event.objects.get().timestamp
        assert dt.timedelta(seconds=59) < age < dt.timedelta(seconds=70)

    def test_a_timestamp_without_zone_is_utc(self, client, project):
        assert post(client, "/e/", {"api_key": project.api_token, **event(timestamp="2026-01-02T03:04:05")})
        assert Event.objects.get().timestamp == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)

    @pytest.mark.parametrize("key", ["distinct_id", "$distinct_id"])
    def test_distinct_id_may_come_from_the_properties(self, client, project, key):
        body = {"api_key": project.api_token, "event": "a", "properties": {key: "from-properties"}}
        assert post(client, "/e/", body).status_code == 200
        assert rows(project) == [("a", "from-properties")]

    def test_a_numeric_distinct_id_is_stored_as_text(self, client, project):
        assert post(client, "/e/", {"api_key": project.api_token, **event(distinct_id=1234)}).status_code == 200
        assert rows(project) == [("$pageview", "1234")]

    def test_integers_past_64_bits_are_stored_exactly(self, client, project):
        big = 123456789012345678901234567890
        body = {"api_key": project.api_token, **event(distinct_id=big, properties={"big": -big, "small": 2**63 - 1})}
        assert post(client, "/e/", body).status_code == 200
        stored = Event.objects.get()
        assert stored.distinct_id == str(big)
        assert stored.properties == {"big": -big, "small": 2**63 - 1}

    def test_numbers_are_stored_as_sent_however_they_are_spelt(self, client, project):
        # Properties that orjson read are written back by orjson, which spells some numbers otherwise (1e16, not
        # 1e+16): the values stored are the same.
        numbers = {
            "e16": 1e16,
            "tiny": 1.5e-7,
            "largest": 1.7976931348623157e308,
            "smallest": 5e-324,
            "negative_zero": -0.0,
            "third": 1 / 3,
            "int64": 2**63 - 1,
            "uint64": 2**64 - 1,
            "negative": -(2**63),
        }
        body = {"api_key": project.api_token, "batch": [event(properties=numbers), event(properties={"n": numbers})]}
        assert post(client, "/batch/", body).status_code == 200
        captured = [row.properties for row in Event.objects.order_by("id")]
        # What the database makes of the standard library's spelling (jsonb keeps numbers as decimals).
        Event.objects.all().delete()
        for properties in (numbers, {"n": numbers}):
            Event.objects.create(
                project=project,
                uuid=uuid.uuid4(),
                event="e",
                distinct_id="u",
                properties=properties,
                timestamp=dt.datetime.now(dt.UTC),
            )
        assert captured == [row.properties for row in Event.objects.order_by("id")]
        assert captured[0]["e16"] == 1e16 and captured[0]["uint64"] == 2**64 - 1

    def test_properties_nested_deeper_than_orjson_writes_are_stored(self, client, project):
        deep: object = "bottom"
        for _ in range(300):  # orjson reads these, but writes at most 254 levels: the standard library writes them
            deep = [deep]
        body = {"api_key": project.api_token, **event(properties={"deep": deep})}
        assert post(client, "/e/", body).status_code == 200
        assert Event.objects.get().properties == {"deep": deep}

    @pytest.mark.parametrize(
        "sent,stored",
        [
            ("2026-03-04T05:06:07Z", dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)),
            ("2026-03-04T05:06:07.5+00:00", dt.datetime(2026, 3, 4, 5, 6, 7, 500000, tzinfo=dt.UTC)),
            ("2026-03-31T23:30:00-05:00", dt.datetime(2026, 4, 1, 4, 30, tzinfo=dt.UTC)),
            ("2026-03-04T05:06:07+05:30:15", dt.datetime(2026, 3, 3, 23, 35, 52, tzinfo=dt.UTC)),
        ],
    )
    def test_timestamps_in_any_offset_are_stored_at_their_instant(self, client, project, sent, stored):
        assert post(client, "/e/", {"api_key": project.api_token, **event(timestamp=sent)}).status_code == 200
        assert Event.objects.get().timestamp == stored

    def test_a_number_that_overflows_is_refused_in_the_properties(self, client, project):
        body = b'{"api_key": "%s", "event": "e", "distinct_id": "u", "properties": {"x": 1e400}}' % (
            project.api_token.encode()
        )
        assert_refused(post(client, "/e/", body), 400, "invalid_input", "properties")

    def test_an_unknown_token_is_a_401_even_with_invalid_events(self, client, project):
        assert_refused(
            post(client, "/batch/", {"api_key": "phc_unknown", "batch": [{"event": 3}]}), 401, "authentication_failed"
        )
        assert_refused(post(client, "/batch/", {"api_key": "phc_unknown", "batch": []}), 401, "authentication_failed")

    def test_a_body_over_the_api_limit_is_accepted(self, client, project):
        # The API refuses bodies over 1 MiB; capture has its own limit.
        properties = {"blob": "x" * 2_000_000}
        response = post(client, "/batch/", {"api_key": project.api_token, "batch": [event(properties=properties)]})
        assert response.status_code == 200
        assert len(Event.objects.get().properties["blob"]) == 2_000_000


class TestTokens:
    def test_no_token_is_a_401_and_nothing_is_stored(self, client, project):
        response = post(client, "/batch/", {"batch": [event()]})
        assert_refused(response, 401, "not_authenticated", type_="authentication_error")

    @pytest.mark.parametrize("token", ["phc_unknown", "", 42, None, ["phc"], "x" * 1000])
    def test_an_unknown_token_is_a_401(self, client, project, token):
        response = post(client, "/batch/", {"api_key": token, "batch": [event()]})
        assert_refused(response, 401, "not_authenticated" if token in ("", None) else "authentication_failed")

    def test_a_personal_api_key_is_not_a_project_token(self, client, project, alice, issue_key):
        response = post(client, "/batch/", {"api_key": issue_key(alice, "*"), "batch": [event()]})
        assert_refused(response, 401, "authentication_failed")

    def test_another_projects_token_stores_in_that_project_only(self, client, project, other_project):
        assert post(client, "/batch/", {"api_key": other_project.api_token, "batch": [event()]}).status_code == 200
        assert rows(project) == []
        assert rows(other_project) == [("$pageview", "user-1")]

    def test_a_rotated_token_is_refused_and_the_new_one_works(self, client, project, alice):
        old = project.api_token
        project_rotate_api_token(actor=alice, project=project)
        assert_refused(post(client, "/batch/", {"api_key": old, "batch": [event()]}), 401, "authentication_failed")
        assert post(client, "/batch/", {"api_key": project.api_token, "batch": [event()]}).status_code == 200
        assert rows(project) == [("$pageview", "user-1")]

    def test_token_is_an_alias_of_api_key(self, client, project):
        assert post(client, "/batch/", {"token": project.api_token, "batch": [event()]}).status_code == 200
        assert rows(project) == [("$pageview", "user-1")]

    def test_the_bodys_token_wins_over_the_events(self, client, project, other_project):
        body = {"api_key": project.api_token, "batch": [event(properties={"token": other_project.api_token})]}
        assert post(client, "/batch/", body).status_code == 200
        assert rows(project) == [("$pageview", "user-1")]

    def test_events_naming_two_projects_are_refused(self, client, project, other_project):
        body = [event(properties={"$token": project.api_token}), event(properties={"$token": other_project.api_token})]
        assert_refused(post(client, "/e/", body), 400, "multiple_tokens")

    def test_a_session_is_not_a_token(self, client, project, alice):
        client.force_login(alice)
        assert_refused(post(client, "/batch/", {"batch": [event()]}), 401, "not_authenticated")


class TestCompression:
    def body(self, project, name="gz"):
        return json.dumps({"api_key": project.api_token, "batch": [event(name)]}).encode()

    def test_content_encoding_gzip(self, client, project):
        response = post(client, "/batch/", gzip.compress(self.body(project)), HTTP_CONTENT_ENCODING="gzip")
        assert response.status_code == 200
        assert rows(project) == [("gz", "user-1")]

    @pytest.mark.parametrize("compression", ["gzip-js", "gzip"])
    def test_compression_query_parameter(self, client, project, compression):
        # As the reference's browser SDK sends it: plain text content type, the compression in the query.
        response = post(
            client,
            f"/e/?compression={compression}&ver=1.0",
            gzip.compress(self.body(project)),
            content_type="text/plain",
        )
        assert response.status_code == 200
        assert rows(project) == [("gz", "user-1")]

    def test_gzip_is_recognised_by_its_magic_bytes(self, client, project):
        assert post(client, "/batch/", gzip.compress(self.body(project))).status_code == 200
        assert rows(project) == [("gz", "user-1")]

    def test_several_gzip_members(self, client, project):
        data = self.body(project)
        response = post(client, "/batch/", gzip.compress(data[:10]) + gzip.compress(data[10:]))
        assert response.status_code == 200
        assert rows(project) == [("gz", "user-1")]

    def test_a_body_that_is_not_gzip_is_a_400(self, client, project):
        response = post(client, "/batch/", self.body(project), HTTP_CONTENT_ENCODING="gzip")
        assert_refused(response, 400, "parse_error", type_="invalid_request")

    def test_a_truncated_gzip_body_is_a_400(self, client, project):
        assert_refused(post(client, "/batch/", gzip.compress(self.body(project))[:-12]), 400, "parse_error")

    @pytest.mark.parametrize("header,query", [("br", ""), ("deflate", ""), ("", "?compression=base64")])
    def test_an_unknown_compression_is_a_415(self, client, project, header, query):
        response = post(client, f"/batch/{query}", self.body(project), HTTP_CONTENT_ENCODING=header)
        assert_refused(response, 415, "unsupported_media_type")


class TestLimits:
    def test_a_body_over_20_mb_is_a_413_unread(self, client, project):
        data = json.dumps({"api_key": project.api_token, "batch": [event(properties={"x": "y" * 20_000_000})]})
        assert_refused(post(client, "/batch/", data.encode()), 413, "request_too_large", type_="invalid_request")

    def test_a_gzip_body_over_20_mb_once_decompressed_is_a_413(self, client, project):
        # About 20 kB on the wire: the decompression stops at the limit instead of inflating it all.
        data = json.dumps({"api_key": project.api_token, "batch": [event(properties={"x": " " * 21_000_000})]})
        compressed = gzip.compress(data.encode())
        assert len(compressed) < 100_000
        assert_refused(post(client, "/batch/", compressed, HTTP_CONTENT_ENCODING="gzip"), 413, "request_too_large")

    def test_a_gzip_bomb_is_a_413(self, client, project):
        bomb = gzip.compress(b"[" + b" " * 200_000_000 + b"]")
        assert_refused(post(client, "/batch/", bomb), 413, "request_too_large")

    def test_the_limit_is_inclusive(self, client, project, settings):
        data = json.dumps({"api_key": project.api_token, "batch": [event()]}).encode()
        settings.CAPTURE_MAX_BODY_BYTES = len(data)
        assert post(client, "/batch/", data).status_code == 200
        settings.CAPTURE_MAX_BODY_BYTES = len(data) - 1
        assert post(client, "/batch/", data).status_code == 413
        assert post(client, "/batch/", gzip.compress(data)).status_code == 413
        assert rows(project) == [("$pageview", "user-1")]


class TestRepeatedUUIDs:
    def send(self, client, project, *events):
        response = post(client, "/batch/", {"api_key": project.api_token, "batch": list(events)})
        assert response.status_code == 200
        return response

    def test_a_uuid_sent_twice_is_stored_once(self, client, project):
        self.send(client, project, event("first", uuid=UUID_1))
        self.send(client, project, event("again", uuid=UUID_1), event("new", uuid=UUID_2))
        assert rows(project) == [("first", "user-1"), ("new", "user-1")]

    def test_a_uuid_repeated_in_one_batch_keeps_the_first(self, client, project):
        self.send(client, project, event("first", uuid=UUID_1), event("second", uuid=UUID_1.upper()))
        assert rows(project) == [("first", "user-1")]

    def test_a_repeated_uuid_with_another_timestamp_in_another_month_is_stored_once(self, client, project):
        # The events table is partitioned by month: the uniqueness lives in the uuid ledger, not in a partition.
        self.send(client, project, event("first", uuid=UUID_1, timestamp="2026-11-01T00:00:00Z"))
        self.send(client, project, event("retry", uuid=UUID_1, timestamp="2024-02-03T00:00:00Z"))
        assert rows(project) == [("first", "user-1")]

    def test_the_same_uuid_in_another_project_is_stored_there_too(self, client, project, other_project):
        self.send(client, project, event("mine", uuid=UUID_1))
        self.send(client, other_project, event("theirs", uuid=UUID_1))
        assert rows(project) == [("mine", "user-1")]
        assert rows(other_project) == [("theirs", "user-1")]

    def test_events_without_uuid_are_all_stored(self, client, project):
        self.send(client, project, event(), event())
        assert len(rows(project)) == 2


class TestRefusals:
    """A body that cannot be stored is refused whole: 400 with `attr` naming where, and nothing stored."""

    @pytest.mark.parametrize(
        "raw,attr",
        [
            (event("a\u0000b"), "batch__1__event"),
            (event(distinct_id="a\u0000"), "batch__1__distinct_id"),
            (event(properties={"k": "v\u0000"}), "batch__1__properties__k"),
            (event(properties={"k\u0000": "v"}), "batch__1__properties"),
            (event(properties={"deep": [{"x": ["\u0000"]}]}), "batch__1__properties__deep__0__x__0"),
            (event(properties={"half": "\ud800"}), "batch__1__properties__half"),
        ],
    )
    def test_null_characters_and_unpaired_surrogates(self, client, project, raw, attr):
        response = post(client, "/batch/", {"api_key": project.api_token, "batch": [event("fine"), raw]})
        assert_refused(response, 400, "null_characters_not_allowed", attr, type_="validation_error")

    def test_an_escaped_backslash_u0000_is_text_not_a_null(self, client, project):
        assert post(client, "/e/", {"api_key": project.api_token, **event("\\u0000")}).status_code == 200
        assert rows(project) == [("\\u0000", "user-1")]

    def test_a_surrogate_pair_is_a_character(self, client, project):
        data = b'{"api_key": "%s", "event": "\\ud83d\\ude00", "distinct_id": "u"}' % project.api_token.encode()
        assert post(client, "/e/", data).status_code == 200
        assert rows(project) == [("😀", "u")]

    @pytest.mark.parametrize(
        "raw,code,attr",
        [
            ({"distinct_id": "u"}, "required", "batch__1__event"),
            (event(None), "required", "batch__1__event"),
            (event(7), "invalid_input", "batch__1__event"),
            (event(""), "blank", "batch__1__event"),
            (event("x" * 201), "max_length", "batch__1__event"),
            ({"event": "a"}, "required", "batch__1__distinct_id"),
            (event(distinct_id=True), "invalid_input", "batch__1__distinct_id"),
            (event(distinct_id={"id": 1}), "invalid_input", "batch__1__distinct_id"),
            (event(distinct_id=""), "blank", "batch__1__distinct_id"),
            (event(distinct_id="x" * 201), "max_length", "batch__1__distinct_id"),
            ({"event": "a", "properties": {"distinct_id": []}}, "invalid_input", "batch__1__properties__distinct_id"),
            (event(properties=["a"]), "invalid_input", "batch__1__properties"),
            (event(properties="a"), "invalid_input", "batch__1__properties"),
            (event(timestamp=1700000000), "invalid_input", "batch__1__timestamp"),
            (event(timestamp="yesterday"), "invalid_input", "batch__1__timestamp"),
            (event(uuid="not-a-uuid"), "invalid_input", "batch__1__uuid"),
            (event(uuid=12), "invalid_input", "batch__1__uuid"),
            ("an event", "invalid_input", "batch__1"),
            (None, "invalid_input", "batch__1"),
        ],
    )
    def test_wrong_types(self, client, project, raw, code, attr):
        response = post(client, "/batch/", {"api_key": project.api_token, "batch": [event("fine"), raw]})
        assert_refused(response, 400, code, attr, type_="validation_error")

    def test_a_number_out_of_range_is_a_400(self, client, project):
        # Valid JSON, but a float overflows to infinity, which no JSON column can hold.
        data = b'{"api_key": "%s", "event": "a", "distinct_id": "u", "properties": {"n": 1e400}}'
        response = post(client, "/e/", data % project.api_token.encode())
        assert_refused(response, 400, "invalid_input", "properties")

    def test_attr_of_a_single_event_and_of_a_list(self, client, project):
        assert_refused(post(client, "/e/", {"api_key": project.api_token, "event": 1}), 400, "invalid_input", "event")
        body = [event("fine", properties={"token": project.api_token}), event(distinct_id=[])]
        assert_refused(post(client, "/e/", body), 400, "invalid_input", "1__distinct_id")

    def test_batch_must_be_a_list(self, client, project):
        response = post(client, "/batch/", {"api_key": project.api_token, "batch": {"event": "a"}})
        assert_refused(response, 400, "invalid_input", "batch")

    @pytest.mark.parametrize("body", [b"", b"   ", b"{", b"not json", b"\xff\xfe\x00", b'{"a": NaN}', b"[Infinity]"])
    def test_malformed_bodies_are_a_parse_error(self, client, project, body):
        assert_refused(post(client, "/batch/", body), 400, "parse_error", type_="invalid_request")

    def test_a_body_that_is_not_utf8_is_a_parse_error(self, client, project):
        # In UTF-16 a NUL escape would hide from a byte-level check; JSON travels in UTF-8 only.
        data = json.dumps({"api_key": project.api_token, **event("a\u0000")}).encode("utf-16")
        assert_refused(post(client, "/e/", data), 400, "parse_error")

    def test_a_byte_order_mark_is_tolerated(self, client, project):
        data = b"\xef\xbb\xbf" + json.dumps({"api_key": project.api_token, **event()}).encode()
        assert post(client, "/e/", data).status_code == 200
        assert rows(project) == [("$pageview", "user-1")]

    @pytest.mark.parametrize("body", ['"a string"', "42", "null"])
    def test_a_body_that_is_no_event_is_a_400(self, client, project, body):
        assert_refused(post(client, "/batch/", body.encode()), 400, "invalid_input")

    def test_an_empty_batch_is_a_400(self, client, project):
        response = post(client, "/batch/", {"api_key": project.api_token, "batch": []})
        assert_refused(response, 400, "empty_batch", "batch")

    def test_an_empty_list_names_no_project(self, client, project):
        assert_refused(post(client, "/e/", []), 401, "not_authenticated")


class TestHTTP:
    def test_get_is_a_405_with_allow(self, client, db):
        response = client.get("/batch/")
        assert response.status_code == 405
        assert response["Allow"] == "POST, OPTIONS"
        assert response.json()["code"] == "method_not_allowed"

    def test_browsers_may_post_from_any_origin(self, client, project):
        preflight = client.options(
            "/e/", HTTP_ORIGIN="https://shop.example", HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type"
        )
        assert preflight.status_code == 200
        assert preflight["Access-Control-Allow-Origin"] == "https://shop.example"
        assert preflight["Access-Control-Allow-Headers"] == "content-type"
        assert "POST" in preflight["Access-Control-Allow-Methods"]
        response = post(client, "/e/", {"api_key": project.api_token, **event()}, HTTP_ORIGIN="https://shop.example")
        assert response["Access-Control-Allow-Origin"] == "https://shop.example"
        assert "Origin" in response["Vary"]

    def test_an_unavailable_database_is_a_503(self, client, project, monkeypatch):
        from django.db import OperationalError

        def unavailable(**kwargs):
            raise OperationalError("connection refused")

        monkeypatch.setattr("pipelines.events.capture.events_ingest_for_token", unavailable)
        response = post(client, "/e/", {"api_key": project.api_token, **event()})
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        assert response.json()["code"] == "service_unavailable"

    def test_an_unexpected_error_is_a_json_500(self, client, project, monkeypatch):
        def broken(**kwargs):
            raise RuntimeError("boom")

        monkeypatch.setattr("pipelines.events.capture.events_ingest_for_token", broken)
        response = post(client, "/e/", {"api_key": project.api_token, **event()})
        assert response.status_code == 500
        assert response.json() == {
            "type": "server_error",
            "code": "error",
            "detail": "A server error occurred.",
            "attr": None,
        }


def test_deleting_a_project_deletes_its_events_and_their_uuids(client, project, other_project, alice):
    second = ProjectFactory(organization=project.organization)
    for target in (second, other_project):
        body = {"api_key": target.api_token, "batch": [event(uuid=str(uuid.uuid4())) for _ in range(3)]}
        assert post(client, "/batch/", body).status_code == 200
    from organizations.services import project_delete

    project_delete(actor=alice, project=second)
    assert Event.objects.filter(project_id=second.pk).count() == 0
    assert EventUUID.objects.filter(project_id=second.pk).count() == 0
    assert len(rows(other_project)) == 3
    assert EventUUID.objects.filter(project=other_project).count() == 3


@pytest.mark.parametrize(
    "raw",
    [
        event(timestamp="2026-03-04T05:06:07.123456+02:00", uuid=UUID_1, properties={"a": [1, 2.5, None]}),
        event(timestamp="2026-03-04T05:06:07", uuid=UUID_1.upper(), properties={}),
        event(timestamp="2026-03-04T05:06:07Z", uuid="{" + UUID_1 + "}", properties={"deep": {"x": "é"}}),
        event("x" * 200, "y" * 200, timestamp="2026-03-04", uuid=UUID_2, properties={"n": 1e16}),
    ],
)
def test_a_plain_event_is_read_as_parse_event_reads_it(raw):
    from pipelines.events.capture import parse_event, parse_plain_event

    now = dt.datetime.now(dt.UTC)
    for fast in (False, True):
        assert parse_plain_event(raw, fast=fast) == parse_event(raw, ("batch", "0"), now=now, fast=fast)


@pytest.mark.parametrize(
    "raw",
    [
        event(uuid=UUID_1, properties={}),  # no timestamp
        event(timestamp="2026-03-04T05:06:07", properties={}),  # no uuid
        event(timestamp="2026-03-04T05:06:07", uuid=UUID_1),  # no properties
        event(distinct_id=7, timestamp="2026-03-04T05:06:07", uuid=UUID_1, properties={}),
        event("", timestamp="2026-03-04T05:06:07", uuid=UUID_1, properties={}),
        event("x" * 201, timestamp="2026-03-04T05:06:07", uuid=UUID_1, properties={}),
        event(timestamp="yesterday", uuid=UUID_1, properties={}),
        event(timestamp="2026-03-04T05:06:07", uuid="not-a-uuid", properties={}),
        event(timestamp="2026-03-04T05:06:07", uuid=UUID_1, properties={"big": float("inf")}),
        ["not", "an", "event"],
    ],
)
def test_any_other_event_is_left_to_parse_event(raw):
    from pipelines.events.capture import parse_plain_event

    assert parse_plain_event(raw) is None


class TestOffsetsTheDatabaseCannotHold:
    """Python reads offsets up to 23:59, PostgreSQL's stop at 15:59: such a timestamp was a 500."""

    @pytest.mark.parametrize("path", ["/capture/", "/batch/"])
    def test_a_large_offset_is_stored_as_its_moment_in_utc(self, client, project, path):
        sent = event(timestamp="2026-11-24T15:21:53-19:24", uuid=str(uuid.uuid4()))
        body = (
            {"api_key": project.api_token, **sent}
            if path == "/capture/"
            else {
                "api_key": project.api_token,
                "batch": [sent],
            }
        )
        assert post(client, path, body).status_code == 200
        assert Event.objects.get().timestamp == dt.datetime(2026, 11, 25, 10, 45, 53, tzinfo=dt.UTC)

    def test_a_moment_past_year_9999_in_utc_is_a_400_naming_the_timestamp(self, client, project):
        body = {"api_key": project.api_token, "batch": [event(timestamp="9999-12-31T23:59:59-19:24")]}
        assert_refused(post(client, "/batch/", body), 400, "invalid_input", "batch__0__timestamp")


class TestTimestampSpan:
    """Issue 51: one captured event dated 0001-01-01 made every all-time insight of its project a 400. A timestamp
    before the year 1000 is refused; one more than 23 hours ahead of its arrival is stored as the time of arrival, as
    the reference does."""

    @pytest.mark.parametrize("plain", [True, False], ids=["plain", "read-in-full"])
    @pytest.mark.parametrize(
        "sent", ["0001-01-01T00:00:00Z", "0999-12-31T23:59:59.999999Z", "1000-01-01T00:00:00+01:00"]
    )
    def test_a_timestamp_before_the_year_1000_is_a_400_and_nothing_of_the_batch_is_stored(
        self, client, project, sent, plain
    ):
        extra = {"uuid": str(uuid.uuid4()), "properties": {}} if plain else {}
        body = {"api_key": project.api_token, "batch": [event(uuid=str(uuid.uuid4())), event(timestamp=sent, **extra)]}

        response = post(client, "/batch/", body)

        assert_refused(response, 400, "invalid_input", "batch__1__timestamp")
        assert "1000" in response.json()["detail"]

    def test_the_span_starts_where_the_query_layers_calendar_does(self):
        from pipelines.events.capture import EARLIEST_TIMESTAMP
        from pipelines.query.dates import EARLIEST

        assert EARLIEST_TIMESTAMP == EARLIEST

    def test_the_year_1000_is_stored_as_sent(self, client, project):
        body = {"api_key": project.api_token, **event(timestamp="1000-01-01T00:00:00Z")}

        assert post(client, "/capture/", body).status_code == 200
        assert Event.objects.get().timestamp == dt.datetime(1000, 1, 1, tzinfo=dt.UTC)

    @pytest.mark.parametrize("plain", [True, False], ids=["plain", "read-in-full"])
    @pytest.mark.parametrize("ahead", [dt.timedelta(hours=23, minutes=1), dt.timedelta(days=3000)])
    def test_a_timestamp_far_ahead_is_stored_as_the_time_of_arrival(self, client, project, ahead, plain):
        extra = {"uuid": str(uuid.uuid4()), "properties": {}} if plain else {}
        sent = (dt.datetime.now(dt.UTC) + ahead).isoformat()
        body = {"api_key": project.api_token, "batch": [event(timestamp=sent, **extra)]}

        before = dt.datetime.now(dt.UTC)
        assert post(client, "/batch/", body).status_code == 200
        after = dt.datetime.now(dt.UTC)

        assert before <= Event.objects.get().timestamp <= after

    def test_the_end_of_year_9999_is_stored_as_the_time_of_arrival(self, client, project):
        body = {"api_key": project.api_token, **event(timestamp="9999-12-31T23:59:59Z", uuid=UUID_1, properties={})}

        before = dt.datetime.now(dt.UTC)
        assert post(client, "/capture/", body).status_code == 200
        after = dt.datetime.now(dt.UTC)

        assert before <= Event.objects.get().timestamp <= after

    def test_a_timestamp_less_than_23_hours_ahead_is_stored_as_sent(self, client, project):
        sent = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=22)).replace(microsecond=0)
        body = {"api_key": project.api_token, **event(timestamp=sent.isoformat(), uuid=UUID_1, properties={})}

        assert post(client, "/capture/", body).status_code == 200
        assert Event.objects.get().timestamp == sent
