"""The headers every answer of a signed embed carries (dashboards.public.embed_pages, and an endpoint's,
dashboards.public.endpoint_pages): who may frame its pages, which origins may read its data, and no referrer."""

from django.conf import settings
from django.http import JsonResponse

from dashboards.public.embeds import Embed


def allow_origin(request, response, embed: Embed) -> None:
    """A page of an allowed origin may read the JSON from its own script (CORS), and no other."""
    origin = request.headers.get("Origin", "").lower()
    response["Vary"] = "Origin"
    if origin and origin in embed.secret.allowed_origins:
        response["Access-Control-Allow-Origin"] = origin


def framed_policy(embed: Embed) -> str:
    """The HTML pages' Content-Security-Policy with `frame-ancestors` set to the secret's allowed origins."""
    directives = [
        directive.strip()
        for directive in settings.CONTENT_SECURITY_POLICY_HTML.split(";")
        if directive.strip() and directive.split()[0] != "frame-ancestors"
    ]
    return "; ".join([*directives, f"frame-ancestors {embed.frame_ancestors}"])


def json_page_headers(body: dict, *, status: int):
    response = JsonResponse(body, status=status)
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response
