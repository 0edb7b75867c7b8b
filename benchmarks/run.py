"""Timings and query counts of the hot paths: authentication, scope check, tenancy and list serialization.

Runs against a throw-away SQLite database (or DATABASE_URL, which must then point at a scratch database),
fills it with one organization holding many rows, and reports the median time and the query count of each
request at two page sizes. A target that is missed makes the command exit with status 1.

    make bench            # or: .venv/bin/python benchmarks/run.py [--requests 200]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Median milliseconds per request on the reference machine (2 cores), with headroom.
TARGET_MS = 25.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="requests per endpoint and page size")
    parser.add_argument("--rows", type=int, default=100, help="rows of each kind to create")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="workspace-bench-")
    os.environ.setdefault("DATA_DIR", scratch)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ.setdefault("API_RATE_LIMIT_BURST", "1000000/minute")
    os.environ.setdefault("API_RATE_LIMIT_SUSTAINED", "1000000/hour")
    os.environ["DEBUG"] = "true"

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext, setup_test_environment
    from django.urls import resolve
    from rest_framework.test import APIClient

    setup_test_environment()
    call_command("migrate", verbosity=0)
    fixtures = populate(args.rows)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {fixtures['key']}")

    failures = 0
    print(f"{'endpoint':<70} {'limit':>5} {'queries':>7} {'median ms':>9} {'p95 ms':>7}")
    for template in endpoints():
        path = template.format(**fixtures)
        if resolve(path).func.__name__ == "api_not_found":
            continue
        counts = []
        for limit in (1, args.rows):
            url = f"{path}?limit={limit}"
            response = client.get(url)
            if response.status_code != 200:
                print(f"{path:<70} status {response.status_code}: {response.content[:120]!r}")
                failures += 1
                break
            connection.queries_log.clear()  # a full log (9000 entries) would hide new queries
            with CaptureQueriesContext(connection) as queries:
                client.get(url)
            timings = []
            for _ in range(args.requests):
                start = time.perf_counter()
                client.get(url)
                timings.append((time.perf_counter() - start) * 1000)
            median = statistics.median(timings)
            p95 = statistics.quantiles(timings, n=20)[-1]
            counts.append(len(queries))
            flag = "" if median <= TARGET_MS else f"  over target {TARGET_MS} ms"
            failures += bool(flag)
            print(f"{path:<70} {limit:>5} {len(queries):>7} {median:>9.2f} {p95:>7.2f}{flag}")
        if len(counts) == 2 and counts[0] != counts[1]:
            print(f"{path:<70} query count grows with the page size: {counts}")
            failures += 1
    print("ok" if not failures else f"{failures} target(s) missed")
    return 1 if failures else 0


def endpoints() -> list[str]:
    """List endpoints of every app that is installed (a route that does not exist yet is skipped)."""
    return [
        "/api/users/@me/",
        "/api/organizations/",
        "/api/organizations/{organization_id}/projects/",
        "/api/organizations/{organization_id}/members/",
        "/api/organizations/{organization_id}/invites/",
        "/api/organizations/{organization_id}/domains/",
        "/api/organizations/{organization_id}/batch_exports/",
        "/api/organizations/{organization_id}/pipeline_destinations/",
        "/api/projects/{project_id}/dashboards/",
    ]


def populate(rows: int) -> dict:
    """One owner with `rows` organizations, and in the first one `rows` of every kind the apps can make."""
    import importlib

    from django.apps import apps

    from apikeys.services import api_key_create
    from organizations.models import Membership, Organization, Project
    from organizations.services import organization_create
    from workspace.models import User

    owner = User.objects.create_user("bench@example.com", "bench-password")
    organization = organization_create(user=owner, name="Bench")
    project = organization.projects.get()
    for index in range(rows - 1):
        other = Organization.objects.create(name=f"Bench {index}", slug=f"bench-{index}")
        Membership.objects.create(organization=other, user=owner, level=Membership.Level.OWNER)
        Project.objects.create(organization=other, name="Default project")
    for index in range(rows - 1):
        member = User.objects.create_user(f"member{index}@example.com")
        Membership.objects.create(organization=organization, user=member, level=Membership.Level.MEMBER)
    for app_config in apps.get_app_configs():
        if importlib.util.find_spec(f"{app_config.name}.demo"):
            demo = importlib.import_module(f"{app_config.name}.demo")
            for _ in range(min(rows, 20)):
                demo.create_demo_data(user=owner, organization=organization, project=project)
    _, key = api_key_create(user=owner, label="bench", scopes=["*"])
    return {"key": key, "organization_id": organization.id, "project_id": project.id}


if __name__ == "__main__":
    sys.exit(main())
