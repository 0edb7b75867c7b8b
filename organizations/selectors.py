"""Reads of the organizations app that a response needs in a few queries."""

import uuid

from django.db.models import Count, F, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from organizations.models import Invite, Membership, Organization, Project
from workspace.api.rows import CompiledQuery, ModelColumns
from workspace.models import User


def _active_member_count():
    """The number of active members of the organization of the row, 0 for none: all its memberships less those of
    deactivated users. Both counts read indexes only (the second starts from the partial index of deactivated users,
    who are few), where counting the active members joined every member's user row: 0.85 ms an organization of 750
    members on PostgreSQL, against 0.05 ms."""

    def memberships(**conditions):
        counted = (
            Membership.objects.filter(organization=OuterRef("pk"), **conditions)
            .order_by()
            .values("organization")
            .annotate(count=Count("*"))
            .values("count")
        )
        return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))

    return memberships() - memberships(user__is_active=False)


def with_organization_stats(queryset: QuerySet[Organization]) -> QuerySet[Organization]:
    """Organizations with their active member count and projects: two queries whatever their number (the
    organizations with the member count as an annotation, and the projects prefetch)."""
    return queryset.annotate(member_count=_active_member_count()).prefetch_related(
        Prefetch("projects", queryset=Project.objects.order_by("id"))
    )


def _member_count_of(organization: uuid.UUID):
    return Organization.objects.filter(pk=organization).values(member_count=_active_member_count())


_MEMBER_COUNT_OF = CompiledQuery(_member_count_of)


def active_member_count(organization_id: uuid.UUID) -> int:
    """The number of active members of one organization, in a query compiled once per connection."""
    rows = _MEMBER_COUNT_OF.rows(organization=organization_id)
    return rows[0]["member_count"] if rows else 0


def organizations_of(user: int, scoped: tuple[uuid.UUID, ...] | None) -> QuerySet[Organization]:
    """The organizations `user` is a member of, by name: all of them, or those of `scoped` (a key's
    `scoped_organizations`, see organizations.tenancy.visible_membership_filter)."""
    memberships = Q(memberships__user_id=user)
    if scoped is not None:
        memberships &= Q(memberships__organization_id__in=scoped)
    return Organization.objects.filter(memberships).order_by("name", "id")


def organization_values(page: QuerySet, user: int, columns: list[str]) -> QuerySet:
    """The organizations of `page` (a subquery of ids) as values of `columns`, with `user`'s `membership_level`
    and the active `member_count`."""
    return (
        Organization.objects.filter(pk__in=page, memberships__user_id=user)
        .values(*columns)
        .annotate(membership_level=F("memberships__level"), member_count=_active_member_count())
    )


# What a list of organizations (and the user's) reads of each of their projects.
PROJECT_VALUES = ("id", "uuid", "organization_id", "name", "api_token", "created_at")


def _projects_of(user: int):
    return Project.objects.filter(organization__memberships__user_id=user).order_by("id").values(*PROJECT_VALUES)


_PROJECTS_OF = CompiledQuery(_projects_of)


def projects_by_organization(user: int, organization_ids) -> dict[uuid.UUID, list[dict]]:
    """`{organization id: [project values, by id]}` for these organizations of `user`'s, in one query compiled once
    per connection: the projects of all of `user`'s organizations, the others left out here."""
    projects = {organization_id: [] for organization_id in organization_ids}
    for project in _PROJECTS_OF.rows(user=user):
        listed = projects.get(project["organization_id"])
        if listed is not None:
            listed.append(project)
    return projects


def invites_pending(organization_id: uuid.UUID) -> QuerySet[Invite]:
    """The organization's invites that have not been accepted, newest first."""
    pending = Invite.objects.filter(organization_id=organization_id, accepted_at__isnull=True)
    return pending.order_by("-created_at", "id")


def project_id_for_api_token(token: str) -> int | None:
    """The id of the project a capture token names, or None: one indexed query, with no join."""
    return Project.objects.filter(api_token=token).values_list("id", flat=True).first()


def scoped_organization_ids(key) -> set[uuid.UUID] | None:
    """The organizations a key is limited to (organizations.tenancy.key_scoped_organizations), or None."""
    scoped = getattr(key, "scoped_organizations", None)
    if not scoped:
        return None
    ids = set()
    for value in scoped:
        try:
            ids.add(uuid.UUID(str(value)))
        except ValueError:
            continue
    return ids


MEMBERSHIP_COLUMNS = ModelColumns(Membership, "tm")
ORGANIZATION_COLUMNS = ModelColumns(Organization, "torg")
PROJECT_COLUMNS = ModelColumns(Project, "tp")


def _user_column(name: str, connection) -> str:
    """A column of the key's user (alias `u` in the key's query)."""
    field = User._meta.pk if name == "pk" else User._meta.get_field(name)
    return f"u.{connection.ops.quote_name(field.column)}"


class CallerTenantLookup:
    """What a tenancy route needs about the caller, read in the API key's own query (see apikeys.authentication):
    no second round trip on every request. `loaded` says whether the key's query ran; without it (another kind of
    authentication) the view reads the same thing itself, through organizations.tenancy.visible_memberships.
    Whatever the key's `scoped_organizations` leave out is not found, as there."""

    loaded = False

    def load(self, values, user, key, connection) -> None:
        self.loaded = True
        self.scoped = scoped_organization_ids(key)

    def visible(self, organization_id) -> bool:
        return self.scoped is None or organization_id in self.scoped


class CallerMembershipLookup(CallerTenantLookup):
    """The caller's membership of one organization, with the organization: `membership` is None when the caller cannot
    use it. `organization_id` is a UUID, or None for the user's current organization."""

    def __init__(self, organization_id: uuid.UUID | None):
        self.organization_id = organization_id
        self.membership: Membership | None = None

    def sql(self, connection) -> tuple[str, str, list]:
        quote = connection.ops.quote_name
        if self.organization_id is None:
            target, params = _user_column("current_organization", connection), []
        else:
            target, params = "%s", [Organization._meta.pk.get_db_prep_value(self.organization_id, connection)]
        membership_organization = MEMBERSHIP_COLUMNS.column("organization", connection)
        joins = (
            f"LEFT JOIN {quote(MEMBERSHIP_COLUMNS.table)} tm"
            f" ON {MEMBERSHIP_COLUMNS.column('user', connection)} = {_user_column('pk', connection)}"
            f" AND {membership_organization} = {target}"
            f" LEFT JOIN {quote(ORGANIZATION_COLUMNS.table)} torg"
            f" ON {ORGANIZATION_COLUMNS.column('id', connection)} = {membership_organization}"
        )
        return f"{MEMBERSHIP_COLUMNS.select(connection)}, {ORGANIZATION_COLUMNS.select(connection)}", joins, params

    def load(self, values, user, key, connection) -> None:
        super().load(values, user, key, connection)
        membership = MEMBERSHIP_COLUMNS.load(values[: len(MEMBERSHIP_COLUMNS)], connection)
        if membership is not None and self.visible(membership.organization_id):
            membership.organization = ORGANIZATION_COLUMNS.load(values[len(MEMBERSHIP_COLUMNS) :], connection)
            # As organizations.tenancy.visible_organizations annotates it.
            membership.organization.membership_level = membership.level
            self.membership = membership


class CallerProjectLookup(CallerTenantLookup):
    """A project the caller can see, with its organization and the caller's `membership_level` there (as
    organizations.tenancy.visible_projects gives it): `project` is None when the caller cannot see it.
    `project_id` is an integer, or None for the user's current project."""

    def __init__(self, project_id: int | None):
        self.project_id = project_id
        self.project: Project | None = None

    def sql(self, connection) -> tuple[str, str, list]:
        quote = connection.ops.quote_name
        if self.project_id is None:
            target, params = _user_column("current_project", connection), []
        else:
            target, params = "%s", [self.project_id]
        project_organization = PROJECT_COLUMNS.column("organization", connection)
        joins = (
            f"LEFT JOIN {quote(PROJECT_COLUMNS.table)} tp ON {PROJECT_COLUMNS.column('id', connection)} = {target}"
            f" LEFT JOIN {quote(MEMBERSHIP_COLUMNS.table)} tm"
            f" ON {MEMBERSHIP_COLUMNS.column('user', connection)} = {_user_column('pk', connection)}"
            f" AND {MEMBERSHIP_COLUMNS.column('organization', connection)} = {project_organization}"
            f" LEFT JOIN {quote(ORGANIZATION_COLUMNS.table)} torg"
            f" ON {ORGANIZATION_COLUMNS.column('id', connection)} = {project_organization}"
        )
        select = (
            f"{PROJECT_COLUMNS.select(connection)}, {ORGANIZATION_COLUMNS.select(connection)}, "
            f"{MEMBERSHIP_COLUMNS.column('level', connection)}"
        )
        return select, joins, params

    def load(self, values, user, key, connection) -> None:
        super().load(values, user, key, connection)
        project = PROJECT_COLUMNS.load(values[: len(PROJECT_COLUMNS)], connection)
        level = values[-1]
        if project is not None and level is not None and self.visible(project.organization_id):
            project.organization = ORGANIZATION_COLUMNS.load(
                values[len(PROJECT_COLUMNS) : len(PROJECT_COLUMNS) + len(ORGANIZATION_COLUMNS)], connection
            )
            project.membership_level = level
            self.project = project


def _memberships_of(user: int):
    # One row per project of each membership's organization (one with no project for an organization without).
    return (
        Membership.objects.filter(user_id=user)
        .order_by("joined_at", "id", "organization__projects__id")
        .values(
            "id",
            "organization_id",
            "level",
            "organization__name",
            "organization__slug",
            *(f"organization__projects__{name}" for name in PROJECT_VALUES),
        )
    )


_MEMBERSHIPS_OF = CompiledQuery(_memberships_of)


def caller_organizations(user_id: int, key) -> list[tuple[dict, list[dict]]]:
    """The user's memberships that the key may use (all of them without a key, or with one not limited to some
    organizations), oldest first, each with its organization's projects by id: `(membership values, [project
    values])`, in one query compiled once per connection."""
    scoped = scoped_organization_ids(key)
    found: dict[int, tuple[dict, list[dict]]] = {}
    for row in _MEMBERSHIPS_OF.rows(user=user_id):
        if scoped is not None and row["organization_id"] not in scoped:
            continue
        project = {name: row.pop(f"organization__projects__{name}") for name in PROJECT_VALUES}
        _, projects = found.setdefault(row.pop("id"), (row, []))
        if project["id"] is not None:
            projects.append(project)
    return list(found.values())
