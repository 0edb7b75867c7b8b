"""The demo shows sharing and embedding from the first run: seed_demo prints the demo dashboard's shared page and a
signed embed of it, both of which open; the demo's visitors are persons, their anonymous and identified ids joined."""

import io
from urllib.parse import urlsplit

from django.core.management import call_command
from django.test import Client

from organizations.models import Project
from pipelines.events.models import Person, PersonDistinctId


def seed(settings, tmp_path) -> list[str]:
    settings.DEMO_KEY_FILE = tmp_path / "demo-key"
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue().splitlines()


def test_seed_demo_prints_a_shared_page_and_an_embed_that_open(db, settings, tmp_path):
    settings.SITE_URL = "http://127.0.0.1:8010"
    lines = seed(settings, tmp_path)
    [shared] = [line.split()[2] for line in lines if line.startswith("Shared page:")]
    [embed] = [line.split()[1] for line in lines if line.startswith("Embed:")]
    assert shared.startswith("http://127.0.0.1:8010/shared/") and embed.startswith("http://127.0.0.1:8010/embed/")
    assert any("manage.py embed_url --dashboard" in line and "$browser=Chrome" in line for line in lines)
    assert lines[-1].startswith("phx_")  # the key stays last, for whoever reads it with tail
    assert Client().get(urlsplit(shared).path).status_code == 200
    response = Client().get(urlsplit(embed).path, {"format": "json"})
    assert response.status_code == 200
    body = response.json()
    assert body["locked"]["properties"] == [
        {"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}
    ]
    assert len(body["tiles"]) == 4 and all(tile["insight"]["result"] for tile in body["tiles"])
    # Issue 51: no Chrome visitor signed up (and purchases named no browser), so the funnel read 14 → 0 → 0.
    [funnel] = [
        tile["insight"]["result"] for tile in body["tiles"] if tile["insight"]["name"] == "Page view to purchase"
    ]
    assert [step["count"] for step in funnel] == [14, 9, 4]
    page = Client().get(urlsplit(embed).path).content.decode()
    assert '<p class="locked">Only: $browser = Chrome</p>' in page
    # A second run prints a fresh embed of the same dashboard.
    again = seed(settings, tmp_path)
    assert [line.split()[2] for line in again if line.startswith("Shared page:")] == [shared]


def test_the_demo_visitors_are_persons_with_their_anonymous_ids_joined(db, settings, tmp_path):
    seed(settings, tmp_path)
    project = Project.objects.get(organization__name="Demo organization")
    anonymous = PersonDistinctId.objects.get(project=project, distinct_id="demo-anon-1")
    identified = PersonDistinctId.objects.get(project=project, distinct_id="demo-user-1")
    assert anonymous.person_id == identified.person_id
    person = Person.objects.get(uuid=identified.person_id)
    assert person.is_identified
    assert person.properties["email"] == "customer1@shop.example"
    # Everyone who signed up is one person with two ids; the others have one.
    persons = Person.objects.filter(project=project)
    assert persons.count() == 40
    assert PersonDistinctId.objects.filter(project=project).count() > persons.count()
