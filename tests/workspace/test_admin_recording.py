"""Every app's admin writes are recorded like API writes: one entry per record that really changed, by the
operator, with no key mask, in the record's organization and project, secrets masked (DECISIONS.md §10)."""

import datetime as dt
import json

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from apikeys.models import PersonalAPIKey
from apikeys.services import api_key_create
from dashboards.core.models import Dashboard
from organizations.models import Domain, Invite, Membership, Project
from pipelines.batch_exports.models import BatchExport, BatchExportBackfill
from pipelines.plugins.models import Plugin
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.organizations.dns_server import LocalDNSServer
from tests.organizations.factories import DomainFactory, InviteFactory, MembershipFactory
from tests.pipelines.factories import (
    BatchExportFactory,
    BatchExportRunFactory,
    PluginConfigFactory,
    PluginFactory,
    PluginSourceFileFactory,
)
from tests.workspace.admin_pages import (
    assert_by_operator,
    change_form_data,
    change_url,
    changelist_url,
    entries,
    run_action,
)
from tests.workspace.factories import UserFactory
from workspace.admin import ActivityLogAdmin, RecordedAdminMixin, RecordedModelAdmin

S3_SECRET = "s3-secret-value"  # BatchExportFactory's aws_secret_access_key


# One record of each kind the admin edits, with one field to change and the tenant its entries belong to.
EDITS = {
    "organization": lambda ctx: (ctx["organization"], "name", "Renamed org", ctx["org_only"]),
    "project": lambda ctx: (ctx["project"], "name", "Renamed project", ctx["org_and_project"]),
    "membership": lambda ctx: (ctx["membership"], "level", str(Membership.Level.ADMIN), ctx["org_only"]),
    "invite": lambda ctx: (InviteFactory(organization=ctx["organization"]), "first_name", "Ada", ctx["org_only"]),
    "domain": lambda ctx: (DomainFactory(organization=ctx["organization"]), "saml_entity_id", "urn:x", ctx["org_only"]),
    "dashboard": lambda ctx: (DashboardFactory(project=ctx["project"]), "description", "Sales", ctx["org_and_project"]),
    "sharing": lambda ctx: (
        SharingConfigurationFactory(dashboard=DashboardFactory(project=ctx["project"])),
        "enabled",
        True,
        ctx["org_and_project"],
    ),
    "batch export": lambda ctx: (ctx["export"], "hogql_query", "SELECT event FROM events", ctx["org_and_project"]),
    "run": lambda ctx: (BatchExportRunFactory(batch_export=ctx["export"]), "status", "Failed", ctx["org_and_project"]),
    "backfill": lambda ctx: (
        BatchExportBackfill.objects.create(
            batch_export=ctx["export"], start_at=timezone.now() - dt.timedelta(days=1), end_at=timezone.now()
        ),
        "status",
        "Completed",
        ctx["org_and_project"],
    ),
    "plugin": lambda ctx: (PluginFactory(organization=ctx["organization"]), "description", "New", ctx["org_only"]),
    "plugin config": lambda ctx: (
        PluginConfigFactory(plugin=PluginFactory(organization=ctx["organization"]), project=ctx["project"]),
        "order",
        "7",
        ctx["org_and_project"],
    ),
    "api key": lambda ctx: (api_key_create(user=ctx["alice"], label="k", scopes=["*"])[0], "label", "CI", {}),
    "user": lambda ctx: (UserFactory(), "first_name", "Grace", {}),
}


@pytest.fixture
def ctx(organization, project, alice):
    return {
        "organization": organization,
        "project": project,
        "alice": alice,
        "membership": MembershipFactory(organization=organization, level=Membership.Level.MEMBER),
        "export": BatchExportFactory(project=project),
        "org_only": {"organization_id": organization.id},
        "org_and_project": {"organization_id": organization.id, "project_id": project.pk},
    }


@pytest.mark.parametrize("kind", EDITS)
def test_editing_one_field_records_exactly_that_field(admin_client, operator, ctx, kind):
    obj, field, value, tenant = EDITS[kind](ctx)
    old = obj.__dict__[field]
    data = change_form_data(admin_client, change_url(obj), **{field: value})

    response = admin_client.post(change_url(obj), data)

    assert response.status_code == 302, response.content.decode()[:3000]
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == (type(obj).__name__, str(obj.pk), "updated")
    assert_by_operator(entry, operator, **tenant)
    obj.refresh_from_db()
    assert entry.detail["before"] == {field: old}
    assert entry.detail["after"] == {field: getattr(obj, field)} != entry.detail["before"]


@pytest.mark.parametrize("kind", EDITS)
def test_saving_an_unchanged_form_records_nothing(admin_client, ctx, kind):
    obj, *_ = EDITS[kind](ctx)
    if kind == "batch export":
        BatchExportRunFactory(batch_export=obj)  # with an inline row, whose times the form shows to the second
    if kind == "dashboard":
        DashboardTileFactory(dashboard=obj, layouts={"sm": {"x": 0, "y": 0, "w": 6, "h": 5}})

    response = admin_client.post(change_url(obj), change_form_data(admin_client, change_url(obj)))

    assert response.status_code == 302, response.content.decode()[:3000]
    assert entries() == []


def test_adding_records_one_created_entry(admin_client, operator, organization):
    response = admin_client.post(
        reverse("admin:organizations_project_add"), {"organization": str(organization.pk), "name": "Added"}
    )

    assert response.status_code == 302
    project = Project.objects.get(name="Added")
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("Project", str(project.pk), "created")
    assert_by_operator(entry, operator, organization.id, project.pk)
    assert entry.detail["before"] is None
    assert entry.detail["after"]["name"] == "Added"


def test_deleting_records_one_entry_with_the_last_state(admin_client, operator, organization):
    domain = DomainFactory(organization=organization)

    response = admin_client.post(reverse("admin:organizations_domain_delete", args=[domain.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert not Domain.objects.filter(pk=domain.pk).exists()
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("Domain", str(domain.pk), "deleted")
    assert_by_operator(entry, operator, organization.id)
    assert entry.detail["before"]["domain"] == domain.domain
    assert entry.detail["after"] is None


def test_bulk_delete_records_one_entry_per_object(admin_client, project):
    exports = BatchExportFactory.create_batch(3, project=project)

    response = admin_client.post(
        changelist_url(BatchExport),
        {"action": "delete_selected", "_selected_action": [str(e.pk) for e in exports], "post": "yes"},
    )

    assert response.status_code == 302
    assert not BatchExport.objects.exists()
    assert sorted(entry.item_id for entry in entries(activity="deleted")) == sorted(str(e.pk) for e in exports)
    assert len(entries()) == 3


def test_deletes_go_through_the_service_and_a_refusal_changes_nothing(admin_client, organization, project):
    response = admin_client.post(reverse("admin:organizations_project_delete", args=[project.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert Project.objects.filter(pk=project.pk).exists()
    assert entries() == []
    messages = [str(m) for m in admin_client.get(response["Location"]).context["messages"]]
    assert any("at least one project" in message for message in messages)


def test_deleting_an_organization_records_it_once_and_moves_its_members_elsewhere(admin_client, alice, organization):
    response = admin_client.post(
        reverse("admin:organizations_organization_delete", args=[organization.pk]), {"post": "yes"}
    )

    assert response.status_code == 302
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("Organization", str(organization.pk), "deleted")
    assert entry.organization_id == organization.pk
    alice.refresh_from_db()
    assert alice.current_organization_id is None


def test_a_global_plugin_is_not_deleted(admin_client, organization):
    plugin = PluginFactory(organization=organization, is_global=True)

    response = admin_client.post(reverse("admin:pipelines_plugin_delete", args=[plugin.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert Plugin.objects.filter(pk=plugin.pk).exists()
    assert entries() == []


def test_demoting_the_last_owner_is_refused(admin_client, alice, organization):
    owner = Membership.objects.get(user=alice)
    url = change_url(owner)

    response = admin_client.post(url, change_form_data(admin_client, url, level=str(Membership.Level.MEMBER)))

    assert response.status_code == 302
    owner.refresh_from_db()
    assert owner.level == Membership.Level.OWNER
    assert entries() == []


def test_inline_rows_are_recorded_as_records_of_their_own(admin_client, operator, organization, project):
    url = change_url(organization)
    data = change_form_data(admin_client, url, **{"projects-0-name": "Renamed inline"})

    response = admin_client.post(url, data)

    assert response.status_code == 302
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("Project", str(project.pk), "updated")
    assert_by_operator(entry, operator, organization.id, project.pk)
    assert entry.detail["after"] == {"name": "Renamed inline"}


def test_inline_deletion_goes_through_the_service(admin_client, operator, alice, organization):
    member = MembershipFactory(organization=organization)
    url = change_url(organization)
    data = change_form_data(admin_client, url)
    index = next(i for i in range(10) if data.get(f"memberships-{i}-id") == str(member.pk))
    data[f"memberships-{index}-DELETE"] = "on"

    assert admin_client.post(url, data).status_code == 302

    assert not Membership.objects.filter(pk=member.pk).exists()
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("Membership", str(member.pk), "deleted")


def test_plugin_source_files_are_recorded_from_the_inline(admin_client, organization):
    plugin = PluginFactory(organization=organization)
    source = PluginSourceFileFactory(plugin=plugin, filename="index.ts")
    url = change_url(plugin)

    admin_client.post(url, change_form_data(admin_client, url, **{"source_files-0-source": "// changed"}))

    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.organization_id) == ("PluginSourceFile", str(source.pk), organization.id)
    assert entry.detail["after"] == {"source": "// changed"}


def test_a_renamed_domain_goes_through_the_service_and_must_be_verified_again(admin_client, organization):
    domain = DomainFactory(organization=organization, domain="old.example.com", verified_at=timezone.now())
    url = change_url(domain)

    admin_client.post(url, change_form_data(admin_client, url, domain="new.example.com"))

    domain.refresh_from_db()
    assert domain.verified_at is None
    [entry] = entries()
    assert entry.detail["after"]["domain"] == "new.example.com"
    assert entry.detail["after"]["verified_at"] is None


# Actions


def test_soft_delete_and_restore_record_one_entry_per_changed_dashboard(admin_client, operator, project):
    live = DashboardFactory(project=project)
    gone = DashboardFactory(project=project, deleted=True)

    run_action(admin_client, Dashboard, "soft_delete", [live, gone])
    [entry] = entries()
    assert (entry.item_id, entry.detail["before"], entry.detail["after"]) == (
        str(live.pk),
        {"deleted": False},
        {"deleted": True},
    )
    assert_by_operator(entry, operator, project.organization_id, project.pk)

    run_action(admin_client, Dashboard, "restore", [live, gone])
    assert [(e.item_id, e.detail["after"]) for e in entries()[1:]] == [
        (str(live.pk), {"deleted": False}),
        (str(gone.pk), {"deleted": False}),
    ]
    assert not Dashboard.objects.filter(deleted=True).exists()


def test_pause_records_only_exports_that_were_running(admin_client, project):
    running = BatchExportFactory(project=project)
    paused = BatchExportFactory(project=project, paused=True)

    run_action(admin_client, BatchExport, "pause", [running, paused])
    [entry] = entries()
    assert entry.item_id == str(running.pk)
    assert entry.detail["before"] == {"paused": False, "paused_reason": None, "last_paused_at": None}
    assert entry.detail["after"]["paused"] is True

    run_action(admin_client, BatchExport, "unpause", [running])
    run_action(admin_client, BatchExport, "unpause", [running])
    unpaused = {"paused": False, "paused_reason": None}
    assert [(e.item_id, e.detail["after"]) for e in entries()[1:]] == [(str(running.pk), unpaused)]


def test_verify_records_the_domains_it_verified(admin_client, operator, organization, settings):
    good = DomainFactory(organization=organization, domain="acme.com")
    missing = DomainFactory(organization=organization, domain="nope.com")
    with LocalDNSServer() as server:
        server.resolver.records["_workspace-challenge.acme.com"] = [good.verification_challenge]
        settings.DOMAIN_VERIFICATION_PREFIX = "_workspace-challenge"
        settings.DOMAIN_VERIFICATION_PORT = server.port
        run_action(admin_client, Domain, "verify", [good, missing])

    [entry] = entries()
    assert entry.item_id == str(good.pk)
    assert list(entry.detail["after"]) == ["verified_at"]
    assert Domain.objects.get(pk=missing.pk).last_verification_attempt_at is not None


def test_resend_records_each_invite_mailed(admin_client, organization, mailoutbox):
    invites = InviteFactory.create_batch(2, organization=organization)

    run_action(admin_client, Invite, "resend", invites)
    run_action(admin_client, Invite, "resend", invites[:1])

    assert len(mailoutbox) == 3
    resent = entries(activity="resent")
    assert sorted(e.item_id for e in resent[:2]) == sorted(str(invite.pk) for invite in invites)
    assert [e.detail["after"] for e in resent[:2]] == [{"emailing_attempt_made": True}] * 2
    # Mailed again: nothing in the row changed, but someone received a mail.
    assert resent[2].item_id == str(invites[0].pk)
    assert resent[2].detail["before"] == resent[2].detail["after"] == {}


def test_a_failed_resend_is_recorded_only_when_it_changed_the_invite(admin_client, organization, settings):
    settings.EMAIL_BACKEND = "tests.organizations.test_invites_api.FailingEmailBackend"
    invite = InviteFactory(organization=organization)

    run_action(admin_client, Invite, "resend", [invite])
    run_action(admin_client, Invite, "resend", [invite])

    [entry] = entries()
    assert entry.activity == "resent"
    assert "unreachable" in entry.detail["after"]["emailing_error"]


def test_revoking_a_key_records_once(admin_client, operator, alice):
    key, plaintext = api_key_create(user=alice, label="To revoke", scopes=["*"])

    run_action(admin_client, PersonalAPIKey, "revoke", [key])
    run_action(admin_client, PersonalAPIKey, "revoke", [key])

    [entry] = entries()
    assert (entry.scope, entry.activity, list(entry.detail["after"])) == ("PersonalAPIKey", "updated", ["revoked_at"])
    assert_by_operator(entry, operator)
    assert plaintext not in json.dumps(entry.detail)


# Secrets


def test_batch_export_secrets_never_reach_the_log(admin_client, project):
    export = BatchExportFactory(project=project)
    config = {**export.destination_config, "aws_secret_access_key": "rotated-secret", "bucket_name": "other"}
    url = change_url(export)

    admin_client.post(url, change_form_data(admin_client, url, destination_config=json.dumps(config)))
    admin_client.post(reverse("admin:pipelines_batchexport_delete", args=[export.pk]), {"post": "yes"})

    updated, deleted = entries()
    logged = json.dumps([updated.detail, deleted.detail])
    assert S3_SECRET not in logged and "rotated-secret" not in logged
    before, after = updated.detail["before"]["destination_config"], updated.detail["after"]["destination_config"]
    assert (before["bucket_name"], after["bucket_name"]) == ("my-bucket", "other")
    # The rotation shows as a change of a masked value.
    assert before["aws_secret_access_key"] != after["aws_secret_access_key"]
    assert after["aws_secret_access_key"].startswith("masked:")


def test_plugin_config_secret_settings_never_reach_the_log(admin_client, organization, project):
    plugin = PluginFactory(
        organization=organization,
        config_schema=[{"key": "apiKey", "secret": True}, {"key": "region"}],
    )
    config = PluginConfigFactory(plugin=plugin, project=project, config={"apiKey": "plugin-secret", "region": "eu"})
    url = change_url(config)

    admin_client.post(url, change_form_data(admin_client, url, config=json.dumps({"apiKey": "new", "region": "us"})))

    [entry] = entries()
    assert "plugin-secret" not in json.dumps(entry.detail) and '"new"' not in json.dumps(entry.detail)
    assert entry.detail["after"]["config"]["region"] == "us"


def test_issuing_a_key_records_it_without_its_value_or_digest(admin_client, operator, alice):
    response = admin_client.post(
        reverse("admin:apikeys_personalapikey_add"),
        {"user": alice.pk, "label": "From admin", "scopes": ["dashboard:read"]},
        follow=True,
    )

    assert response.status_code == 200
    key = PersonalAPIKey.objects.get(label="From admin")
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("PersonalAPIKey", str(key.pk), "created")
    assert_by_operator(entry, operator)
    logged = json.dumps(entry.detail)
    assert key.secure_value not in logged
    assert key.mask_value[-4:] in entry.detail["after"]["mask_value"]
    for message in response.context["messages"]:
        plaintext = str(message).rsplit(" ", 1)[-1]
        assert plaintext not in logged


def test_sharing_tokens_are_masked(admin_client, project):
    sharing = SharingConfigurationFactory(dashboard=DashboardFactory(project=project))

    admin_client.post(reverse("admin:dashboards_sharingconfiguration_delete", args=[sharing.pk]), {"post": "yes"})

    [entry] = entries()
    assert sharing.access_token not in json.dumps(entry.detail)
    assert entry.detail["before"]["access_token"].startswith("masked:")


def test_every_project_admin_records_its_writes():
    """Each ModelAdmin and inline of the project's apps records (the activity log's own admin is read-only)."""
    apps = {"workspace", "organizations", "apikeys", "dashboards", "pipelines"}
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in apps or isinstance(model_admin, ActivityLogAdmin):
            continue
        assert isinstance(model_admin, RecordedModelAdmin), f"{type(model_admin).__name__} must be recorded."
        for inline in model_admin.inlines:
            assert issubclass(inline, RecordedAdminMixin), f"{inline.__name__} must use RecordedInlineMixin."
