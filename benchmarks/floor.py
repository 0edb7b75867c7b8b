"""The floor of this stack: a minimal WSGI app, served by the same gunicorn configuration as the service, that does
the least work the service's answers need.

- `GET /api/projects/<id>/dashboards/?limit=&offset=`: the same JSON page as the service's dashboards list (same
  fields, same order, the count/next/previous envelope), from one indexed lookup of the key and one SQL query that
  returns the page's rows with their creator, tags, sharing state, the caller's right to edit them and the total
  count; rendered with orjson.
- `GET /auth/`: the key lookup and a tiny JSON answer, the floor of a single-object read.

No Django, no middleware, no throttles, no serializers: the database driver (psycopg, with the client-side
parameter binding Django uses) and the JSON encoder are all it shares with the service. JIT is off for its
connections: a planner that compiles an OLTP query costs more than the query, and the floor is what the service
could reach. The database comes from FLOOR_DATABASE_URL.
"""

import hashlib
import os
import re
import threading
from urllib.parse import parse_qs, urlencode

import orjson
import psycopg

DASHBOARDS = re.compile(r"^/api/projects/(\d+)/dashboards/?$")
KEY_QUERY = """
    SELECT k.user_id, k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND u.is_active
    FROM apikeys_personalapikey k JOIN workspace_user u ON u.id = k.user_id
    WHERE k.secure_value = %s
"""
# The page's ids and the total count first, from the dashboards' own columns (a window over every row would
# otherwise evaluate the tag and sharing subqueries for every row, not only the page's); then the page's rows.
PAGE_QUERY = """
    WITH page AS (
        SELECT d.id, d.pinned, d.name, count(*) OVER () AS total
        FROM dashboards_dashboard d
        WHERE d.project_id = %(project)s AND NOT d.deleted
        ORDER BY d.pinned DESC, d.name, d.id
        LIMIT %(limit)s OFFSET %(offset)s
    )
    SELECT d.id, d.name, d.description, d.pinned, d.created_at,
           u.id, u.uuid, u.distinct_id, u.first_name, u.last_name, u.email, u.is_email_verified, u.hedgehog_config,
           EXISTS (SELECT 1 FROM dashboards_sharingconfiguration s WHERE s.dashboard_id = d.id AND s.enabled),
           d.deleted, d.creation_mode,
           ARRAY (SELECT t.name FROM dashboards_dashboardtag t WHERE t.dashboard_id = d.id ORDER BY t.id),
           d.restriction_level,
           d.restriction_level = 21 OR d.created_by_id = %(user)s OR m.level >= 8
               OR EXISTS (SELECT 1 FROM dashboards_dashboardcollaborator c
                          WHERE c.dashboard_id = d.id AND c.user_id = %(user)s),
           page.total
    FROM page
    JOIN dashboards_dashboard d ON d.id = page.id
    JOIN organizations_project p ON p.id = d.project_id
    JOIN organizations_membership m ON m.organization_id = p.organization_id AND m.user_id = %(user)s
    LEFT JOIN workspace_user u ON u.id = d.created_by_id
    ORDER BY page.pinned DESC, page.name, page.id
"""

_local = threading.local()


def cursor() -> psycopg.ClientCursor:
    connection = getattr(_local, "connection", None)
    if connection is None or connection.closed:
        connection = psycopg.connect(
            os.environ["FLOOR_DATABASE_URL"],
            autocommit=True,
            cursor_factory=psycopg.ClientCursor,
            options="-c jit=off -c TimeZone=UTC",
        )
        _local.connection = connection
    return connection.cursor()


def respond(start_response, status: str, body: bytes):
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def timestamp(value) -> str:
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def authenticate(environ, cur) -> int | None:
    header = environ.get("HTTP_AUTHORIZATION", "")
    if not header.startswith("Bearer "):
        return None
    cur.execute(KEY_QUERY, [hashlib.sha256(header[7:].encode()).hexdigest()])
    row = cur.fetchone()
    return row[0] if row and row[1] else None


def page_url(environ, query: dict, limit: int, offset: int | None) -> str:
    """The service's next/previous links (DRF's replace_query_param and remove_query_param: sorted parameters)."""
    params = {name: values for name, values in query.items() if name not in ("limit", "offset")}
    params["limit"] = [str(limit)]
    if offset is not None:
        params["offset"] = [str(offset)]
    base = f"{environ['wsgi.url_scheme']}://{environ['HTTP_HOST']}{environ['PATH_INFO']}"
    return f"{base}?{urlencode(sorted(params.items()), doseq=True)}"


def dashboards_page(environ, start_response, cur, user_id: int, project_id: int):
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    limit = min(max(int(query.get("limit", ["100"])[0]), 1), 1000)
    offset = max(int(query.get("offset", ["0"])[0]), 0)
    cur.execute(PAGE_QUERY, {"user": user_id, "project": project_id, "limit": limit, "offset": offset})
    rows = cur.fetchall()
    count = rows[0][-1] if rows else 0
    results = [
        {
            "id": row[0],
            "name": row[1],
            "description": row[2],
            "pinned": row[3],
            "created_at": timestamp(row[4]),
            "created_by": None
            if row[5] is None
            else {
                "id": row[5],
                "uuid": str(row[6]),
                "distinct_id": row[7],
                "first_name": row[8],
                "last_name": row[9],
                "email": row[10],
                "is_email_verified": row[11],
                "hedgehog_config": row[12],
            },
            "is_shared": row[13],
            "deleted": row[14],
            "creation_mode": row[15],
            "tags": row[16],
            "restriction_level": row[17],
            "effective_restriction_level": row[17],
            "effective_privilege_level": 37 if row[18] else 21,
        }
        for row in rows
    ]
    following = page_url(environ, query, limit, offset + limit) if offset + limit < count else None
    if offset <= 0:
        previous = None
    elif offset - limit <= 0:
        previous = page_url(environ, query, limit, None)
    else:
        previous = page_url(environ, query, limit, offset - limit)
    body = orjson.dumps({"count": count, "next": following, "previous": previous, "results": results})
    return respond(start_response, "200 OK", body)


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    try:
        with cursor() as cur:
            user_id = authenticate(environ, cur)
            if user_id is None:
                return respond(start_response, "401 Unauthorized", b'{"detail":"Invalid API key."}')
            if path == "/auth/":
                return respond(start_response, "200 OK", orjson.dumps({"id": user_id, "authenticated": True}))
            match = DASHBOARDS.match(path)
            if match:
                return dashboards_page(environ, start_response, cur, user_id, int(match[1]))
    except psycopg.OperationalError:
        _local.connection = None
        raise
    return respond(start_response, "404 Not Found", b'{"detail":"Not found."}')
