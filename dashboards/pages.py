"""The public page of a shared dashboard, `/shared/<access_token>`: plain HTML for whoever holds the link, no key.

Not an API view: it renders a template, loads nothing from elsewhere and runs no script, so it works under the
service's HTML Content-Security-Policy and offline.
"""

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from dashboards.selectors import shared_dashboard_get


@require_safe
@never_cache
def shared_dashboard(request, access_token: str):
    """The dashboard's name, description and tiles; 404 when the token is unknown, sharing is off or the dashboard
    is deleted (the same answer for each, so a token's past is not revealed)."""
    dashboard = shared_dashboard_get(access_token=access_token)
    if dashboard is None:
        raise Http404("No shared dashboard here.")
    response = render(request, "dashboards/shared_dashboard.html", {"dashboard": dashboard})
    # The token is in the URL: never send it on as a referrer, and keep the page out of search engines.
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response
