import uuid

from django.contrib.auth.hashers import make_password

from dashboards.core.models import SharingPassword
from dashboards.core.results import InsightResults
from dashboards.core.template_library import bundled_templates
from dashboards.public.services import embed_secret_create
from organizations.models import Membership
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
    SharingConfigurationFactory,
)
from tests.organizations.factories import MembershipFactory
from tests.pipelines.scope_routes import finished_flight
from tests.scope_matrix import Route
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog

# Bodies are static, so the objects they name get fixed keys in make_objects.
TILE_ID = 900_001
TARGET_DASHBOARD_ID = 900_002
COPIED_TILE_ID = 900_003  # a text tile on the target dashboard, which copy_tile copies to the dashboard
INSIGHT_TILE_ID = 900_004  # the dashboard's second tile
ADDED_INSIGHT_ID = 900_005  # an insight on no dashboard, which add_insight adds to the dashboard
NEW_COLLABORATOR_UUID = uuid.UUID("5b1f0c2e-0000-4000-8000-000000000001")
VERSION_UUID = uuid.UUID("5b1f0c2e-0000-4000-8000-000000000002")  # an activity entry of the dashboard
SHARING_PASSWORD_UUID = uuid.UUID("5b1f0c2e-0000-4000-8000-000000000003")  # a password of the dashboard's sharing
EMBED_SECRETS = "/api/projects/{project_id}/embed_secrets"

BASE = "/api/projects/{project_id}/dashboards"
INSIGHTS = "/api/projects/{project_id}/insights"
ROUTES = [
    Route("GET", f"{BASE}/", "dashboard:read", 200),
    Route("POST", f"{BASE}/", "dashboard:write", 201, {"name": "New dashboard"}),
    Route("GET", f"{BASE}/{{dashboard_id}}/", "dashboard:read", 200),
    Route("PATCH", f"{BASE}/{{dashboard_id}}/", "dashboard:write", 200, {"name": "Renamed"}),
    Route("PUT", f"{BASE}/{{dashboard_id}}/", "dashboard:write", 200, {"name": "Replaced"}),
    Route("DELETE", f"{BASE}/{{dashboard_id}}/", "dashboard:write", 405),
    Route(
        "PATCH",
        f"{BASE}/{{dashboard_id}}/move_tile/",
        "dashboard:write",
        200,
        {"tile": {"id": TILE_ID}, "toDashboard": TARGET_DASHBOARD_ID},
    ),
    Route(
        "POST",
        f"{BASE}/{{dashboard_id}}/copy_tile/",
        "dashboard:write",
        200,
        {"fromDashboardId": TARGET_DASHBOARD_ID, "tileId": COPIED_TILE_ID},
    ),
    Route("POST", f"{BASE}/{{dashboard_id}}/add_insight/", "dashboard:write", 200, {"insightId": ADDED_INSIGHT_ID}),
    Route("GET", f"{BASE}/{{dashboard_id}}/versions/", "dashboard:read", 200),
    Route(
        "POST",
        f"{BASE}/{{dashboard_id}}/revert_to_version/",
        "dashboard:write",
        200,
        {"version_id": str(VERSION_UUID)},
    ),
    Route("GET", f"{BASE}/{{dashboard_id}}/template_json/", "dashboard:read", 200),
    Route(
        "POST",
        f"{BASE}/{{dashboard_id}}/reorder_tiles/",
        "dashboard:write",
        200,
        {"tile_order": [INSIGHT_TILE_ID, TILE_ID]},
    ),
    Route(
        "POST",
        f"{BASE}/create_from_template_json/",
        "dashboard:write",
        200,
        {"template": bundled_templates()["website-traffic"]},
    ),
    Route("GET", f"{BASE}/{{restricted_dashboard_id}}/collaborators/", "dashboard:read", 200),
    Route(
        "POST",
        f"{BASE}/{{restricted_dashboard_id}}/collaborators/",
        "dashboard:write",
        201,
        {"level": 37, "user_uuid": str(NEW_COLLABORATOR_UUID)},
    ),
    Route(
        "DELETE",
        f"{BASE}/{{restricted_dashboard_id}}/collaborators/{{collaborator_uuid}}/",
        "dashboard:write",
        204,
    ),
    Route("GET", f"{BASE}/{{dashboard_id}}/sharing/", "sharing_configuration:read", 200),
    Route("PATCH", f"{BASE}/{{dashboard_id}}/sharing/", "sharing_configuration:write", 200, {"enabled": True}),
    Route("POST", f"{BASE}/{{dashboard_id}}/sharing/refresh/", "sharing_configuration:write", 200),
    Route("POST", f"{BASE}/{{dashboard_id}}/sharing/passwords/", "sharing_configuration:write", 201, {"note": "Board"}),
    Route(
        "DELETE",
        f"{BASE}/{{dashboard_id}}/sharing/passwords/{SHARING_PASSWORD_UUID}/",
        "sharing_configuration:write",
        204,
    ),
    Route("GET", "/api/organizations/{organization_id}/shared_links/", "sharing_configuration:read", 200),
    Route("GET", f"{EMBED_SECRETS}/", "sharing_configuration:read", 200),
    Route("POST", f"{EMBED_SECRETS}/", "sharing_configuration:write", 201, {"name": "Portal"}),
    Route("GET", f"{EMBED_SECRETS}/{{embed_secret_id}}/", "sharing_configuration:read", 200),
    Route("PATCH", f"{EMBED_SECRETS}/{{embed_secret_id}}/", "sharing_configuration:write", 200, {"name": "Renamed"}),
    Route("PUT", f"{EMBED_SECRETS}/{{embed_secret_id}}/", "sharing_configuration:write", 200, {"name": "Replaced"}),
    Route("DELETE", f"{EMBED_SECRETS}/{{embed_secret_id}}/", "sharing_configuration:write", 204),
    Route("POST", f"{EMBED_SECRETS}/{{embed_secret_id}}/rotate/", "sharing_configuration:write", 200),
    Route("GET", f"{INSIGHTS}/", "insight:read", 200),
    Route(
        "POST",
        f"{INSIGHTS}/",
        "insight:write",
        201,
        {"name": "New insight", "query": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}},
    ),
    Route("GET", f"{INSIGHTS}/{{insight_id}}/", "insight:read", 200),
    Route("GET", f"{INSIGHTS}/{{insight_id}}/query/", "insight:read", 200),
    # The status URL of an insight's read that went on without its client (one done: the insight with its result).
    Route("GET", f"{INSIGHTS}/{{insight_id}}/results/{{flight_id}}/", "insight:read", 200),
    Route("PATCH", f"{INSIGHTS}/{{insight_id}}/", "insight:write", 200, {"name": "Renamed"}),
    Route("PUT", f"{INSIGHTS}/{{insight_id}}/", "insight:write", 200, {"name": "Replaced"}),
    Route("DELETE", f"{INSIGHTS}/{{insight_id}}/", "insight:write", 405),
]


def make_objects(*, user, organization, project) -> dict:
    dashboard = DashboardFactory(project=project, created_by=user)
    ActivityLog.objects.create(
        uuid=VERSION_UUID,
        scope="Dashboard",
        item_id=str(dashboard.pk),
        project_id=project.pk,
        activity="updated",
        detail={"before": {"name": "Before"}, "after": {"name": dashboard.name}},
    )
    DashboardTileFactory(dashboard=dashboard, pk=TILE_ID)
    SharingPassword.objects.create(
        id=SHARING_PASSWORD_UUID,
        configuration=SharingConfigurationFactory(dashboard=dashboard),
        password_hash=make_password("matrix password"),
    )
    target = DashboardFactory(project=project, created_by=user, pk=TARGET_DASHBOARD_ID)
    DashboardTileFactory(dashboard=target, text_tile=True, pk=COPIED_TILE_ID)
    restricted = DashboardFactory(project=project, created_by=user, restriction_level=37)
    newcomer = UserFactory(uuid=NEW_COLLABORATOR_UUID)
    MembershipFactory(user=newcomer, organization=organization, level=Membership.Level.MEMBER)
    collaborator = UserFactory()
    MembershipFactory(user=collaborator, organization=organization, level=Membership.Level.MEMBER)
    DashboardCollaboratorFactory(dashboard=restricted, user=collaborator)
    insight = InsightFactory(project=project, created_by=user)
    DashboardTileFactory(dashboard=dashboard, insight=insight, pk=INSIGHT_TILE_ID)
    InsightFactory(project=project, created_by=user, pk=ADDED_INSIGHT_ID)
    embed_secret, _ = embed_secret_create(actor=user, project=project, name="Matrix secret")
    return {
        "embed_secret_id": embed_secret.pk,
        "dashboard_id": dashboard.pk,
        "restricted_dashboard_id": restricted.pk,
        "collaborator_uuid": collaborator.uuid,
        "insight_id": insight.pk,
        "flight_id": finished_flight(project, InsightResults(project=project).query_of(insight)),
    }
