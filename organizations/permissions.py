"""Who may do what in an organization, declared on the viewsets (STYLE.md #22).

A viewset names the membership level each action needs in `required_level`; rules about the member being changed
are `has_object_permission` of the classes below, and rules about what a write asks for (nobody changes their own
level, nobody grants above their own) are their `has_input_permission`, which judges the validated input once the
serializer has accepted it: a level that is no level is a 400 naming `level`, not a 403 about its value. No class
here reads the request body. Serializers and services never check levels.
"""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from organizations.models import Membership

LEVEL_NAMES = {
    Membership.Level.MEMBER: "members",
    Membership.Level.ADMIN: "organization admins and owners",
    Membership.Level.OWNER: "organization owners",
}


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
    level above their own, and only owners make owners. The last-owner rule is a 400 of the service.

    Who may act on whom is decided on the object; the new level only once it is a valid one (`has_input_permission`),
    so that `{"level": 99}` is refused as an invalid level rather than as one above the caller's."""

    def has_object_permission(self, request, view, membership) -> bool:
        if request.method in SAFE_METHODS or membership.user_id == request.user.pk:
            return True
        actor_level = view.membership_level
        if actor_level < Membership.Level.ADMIN:
            self.message = "Only organization admins and owners can change other members."
            return False
        if membership.level > actor_level:
            self.message = "You can only change members at or below your own level."
            return False
        return True

    def has_input_permission(self, request, view, data, membership) -> bool:
        new_level = data.get("level")
        if membership is None or new_level is None or new_level == membership.level:
            return True
        actor_level = view.membership_level
        if membership.user_id == request.user.pk:
            self.message = "You can't change your own access level."
            return False
        if new_level > actor_level:
            self.message = "You can't give a member a level above your own."
            return False
        if new_level == Membership.Level.OWNER and actor_level != Membership.Level.OWNER:
            self.message = "Only owners can make other members owners."
            return False
        return True


class CanInviteAtLevel(BasePermission):
    """Nobody invites someone at a level above their own. Judged on the validated invites (one, or the list of the
    bulk action), so that a level that is no level is the serializer's 400 first."""

    message = "You can't invite someone at a level above your own."

    def has_input_permission(self, request, view, data, obj) -> bool:
        invites = data if isinstance(data, list) else [data]
        return all(invite.get("level", Membership.Level.MEMBER) <= view.membership_level for invite in invites)


class KeyMayCreateOrganizations(BasePermission):
    """A key limited to some organizations works inside them only, so it cannot create another. The limit is read
    off whatever authenticated the request (`request.auth`), so this layer needs to know no kind of key."""

    message = "This API key is limited to specific organizations and cannot create organizations."

    def has_permission(self, request, view) -> bool:
        limited = bool(getattr(request.auth, "scoped_organizations", None))
        return not (limited and getattr(view, "action", None) == "create")
