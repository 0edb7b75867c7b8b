"""The public page of a shared dashboard, `/shared/<access_token>`: plain HTML for whoever holds the link, no key.

Not an API view: it renders a template, loads nothing from elsewhere and runs no script, so it works under the
service's HTML Content-Security-Policy and offline.

A page that asks for a password shows a form instead until one of the sharing's passwords is given. The unlock is a
signed, HttpOnly cookie for that page alone (its salt holds the token, its path the page) naming the password that
opened it, for 24 hours: revoking that password, or refreshing the token, locks the page again at once. Failed
attempts are counted per address and every attempt is recorded in the activity log.
"""

from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.exceptions import Throttled

from dashboards.charts import shared_tiles
from dashboards.models import SharingConfiguration, SharingPassword
from dashboards.selectors import shared_dashboard_get
from dashboards.services import sharing_password_matching
from workspace.api.throttling import FailedAuthenticationThrottle
from workspace.services import activity_log_record

LOCKED_PAGE = "dashboards/shared_dashboard_locked.html"
UNLOCK_COOKIE = "shared_unlock"
UNLOCK_MAX_AGE = 24 * 3600


class SharedPageUnlockThrottle(FailedAuthenticationThrottle):
    """Wrong passwords for shared pages per client address (`shared_page_unlock` rate)."""

    scope = "shared_page_unlock"


@require_http_methods(["GET", "HEAD", "POST"])
@never_cache
def shared_dashboard(request, access_token: str):
    """The dashboard's name, description and tiles; 404 when the token is unknown, sharing is off or expired, or the
    dashboard is deleted (the same answer for each, so a token's past is not revealed). POST gives a password."""
    dashboard = shared_dashboard_get(access_token=access_token)
    if dashboard is None:
        raise Http404("No shared dashboard here.")
    configuration = dashboard.sharing_configuration
    if configuration.password_required:
        if request.method == "POST":
            return unlock(request, configuration)
        if unlocked_by(request, configuration) is None:
            return page(request, LOCKED_PAGE, {"wrong": False}, status=403)
    elif request.method == "POST":
        return HttpResponseNotAllowed(["GET", "HEAD"])
    return page(request, "dashboards/shared_dashboard.html", {"dashboard": dashboard, "tiles": shared_tiles(dashboard)})


def unlock(request, configuration: SharingConfiguration):
    throttle = SharedPageUnlockThrottle()
    try:
        throttle.refuse_if_over(request)
    except Throttled as refusal:
        response = page(request, LOCKED_PAGE, {"throttled": True}, status=429)
        response["Retry-After"] = str(int(refusal.wait or 1))
        return response
    password = sharing_password_matching(configuration=configuration, raw_password=request.POST.get("password", ""))
    record_attempt(request, configuration, password)
    if password is None:
        throttle.record_failure(request)
        return page(request, LOCKED_PAGE, {"wrong": True}, status=403)
    response = redirect(request.path, permanent=False)
    response.status_code = 303  # see the page with a GET
    response.set_signed_cookie(
        UNLOCK_COOKIE,
        str(password.pk),
        salt=cookie_salt(configuration),
        max_age=UNLOCK_MAX_AGE,
        path=f"/shared/{configuration.access_token}",
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )
    return response


def unlocked_by(request, configuration: SharingConfiguration) -> SharingPassword | None:
    """The password whose unlock cookie this request carries, if it is still one of the sharing's."""
    password_id = request.get_signed_cookie(
        UNLOCK_COOKIE, default=None, salt=cookie_salt(configuration), max_age=UNLOCK_MAX_AGE
    )
    if password_id is None:
        return None
    return configuration.passwords.filter(pk=password_id).first()


def cookie_salt(configuration: SharingConfiguration) -> str:
    # A cookie opens the page of the token it was made for only: a new token makes every earlier one worthless.
    return f"dashboards.shared-page:{configuration.access_token}"


def record_attempt(request, configuration: SharingConfiguration, password: SharingPassword | None) -> None:
    dashboard = configuration.dashboard
    activity_log_record(
        user=None,
        api_key=None,
        scope="SharingConfiguration",
        item_id=configuration.pk,
        activity="unlocked" if password is not None else "unlock_failed",
        organization_id=dashboard.project.organization_id,
        project_id=dashboard.project_id,
        name=dashboard.name,
        after={"password": str(password.pk) if password is not None else None, "address": client_address(request)},
    )


def client_address(request) -> str:
    return SharedPageUnlockThrottle().get_ident(request)


def page(request, template: str, context: dict, status: int = 200):
    response = render(request, template, context, status=status)
    # The token is in the URL: never send it on as a referrer, and keep the page out of search engines. The password
    # form's page says same-origin instead (other sites still get nothing): under no-referrer browsers send the form
    # with `Origin: null`, which CSRF protection rightly refuses.
    response["Referrer-Policy"] = "same-origin" if template == LOCKED_PAGE else "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response
