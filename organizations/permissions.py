"""Who may do what in an organization, declared on the viewsets (STYLE.md #22).

A viewset names the membership level each action needs in `required_level`; object rules that depend on the
member being changed or on the body (nobody changes their own level, nobody grants above their own) are
`has_object_permission` / `has_permission` of the classes below. Serializers and services never check levels.
"""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from apikeys.models import PersonalAPIKey
from organizations.models import Membership

LEVEL_NAMES = {
    Membership.Level.MEMBER: "members",
    Membership.Level.ADMIN: "organization admins and owners",
    Membership.Level.OWNER: "organization owners",
}


def requested_level(data) -> int | None:
    """The integer `level` of a request body, when there is one (anything else is for the serializer to refuse)."""
    level = data.get("level") if isinstance(data, dict) else None
    return level if isinstance(level, int) and not isinstance(level, bool) else None


class MembershipLevelPermission(BasePermission):
    """The caller's membership level must reach `view.required_level[view.action]`.

    The level is `view.membership_level` where the route names the organization (resolving it first, so that
    another tenant's id stays a 404), or the object's `membership_level` annotation where the object is the
    organization or project itself.
    """

    def needed(self, view) -> int | None:
        return getattr(view, "required_level", {}).get(getattr(view, "action", None))

    def check(self, level: int | None, needed: int) -> bool:
        if level is not None and level >= needed:
            return True
        self.message = f"Only {LEVEL_NAMES[needed]} can do this."
        return False

    def has_permission(self, request, view) -> bool:
        needed = self.needed(view)
        level = getattr(view, "membership_level", None)
        return needed is None or level is None or self.check(level, needed)

    def has_object_permission(self, request, view, obj) -> bool:
        needed = self.needed(view)
        level = getattr(obj, "membership_level", None)
        return needed is None or level is None or self.check(level, needed)


class CanChangeMember(BasePermission):
    """Members change and remove each other by these rules (DECISIONS.md §4): anybody may leave; nobody changes
    their own level; otherwise admins and owners act on members at or below their own level, nobody grants a
    level above their own, and only owners make owners. The last-owner rule is a 400 of the service."""

    def has_object_permission(self, request, view, membership) -> bool:
        if request.method in SAFE_METHODS:
            return True
        actor_level = view.membership_level
        new_level = requested_level(request.data) if request.method in ("PATCH", "PUT") else None
        if membership.user_id == request.user.pk:
            if new_level is not None and new_level != membership.level:
                self.message = "You can't change your own access level."
                return False
            return True
        if actor_level < Membership.Level.ADMIN:
            self.message = "Only organization admins and owners can change other members."
            return False
        if membership.level > actor_level:
            self.message = "You can only change members at or below your own level."
            return False
        if new_level is not None and new_level > actor_level:
            self.message = "You can't give a member a level above your own."
            return False
        if new_level == Membership.Level.OWNER and actor_level != Membership.Level.OWNER:
            self.message = "Only owners can make other members owners."
            return False
        return True


class CanInviteAtLevel(BasePermission):
    """Nobody invites someone at a level above their own (one invite object, or a list of them)."""

    message = "You can't invite someone at a level above your own."

    def has_permission(self, request, view) -> bool:
        if request.method != "POST":
            return True
        invites = request.data if isinstance(request.data, list) else [request.data]
        levels = [requested_level(invite) for invite in invites]
        return all(level is None or level <= view.membership_level for level in levels)


class KeyMayCreateOrganizations(BasePermission):
    """A key limited to some organizations works inside them only, so it cannot create another."""

    message = "This API key is limited to specific organizations and cannot create organizations."

    def has_permission(self, request, view) -> bool:
        key = request.auth
        limited = isinstance(key, PersonalAPIKey) and bool(key.scoped_organizations)
        return not (limited and getattr(view, "action", None) == "create")
