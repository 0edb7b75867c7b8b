"""The floor of this stack: a minimal WSGI app, served by the same gunicorn configuration as the service, that does
the least work the service's answers need.

- `GET /api/projects/<id>/dashboards/?limit=&offset=`: the same JSON page as the service's dashboards list (same
  fields, same order, the count/next/previous envelope), from one indexed lookup of the key and one SQL query that
  returns the page's rows with their creator, tags, sharing state, the caller's right to edit them and the total
  count; rendered with orjson.
- `GET /auth/`: the key lookup and a tiny JSON answer, the floor of a single-object read.
- `PATCH /api/projects/<id>/dashboards/<id>/`: the least a dashboard edit must do, in one transaction: lock the
  dashboard's row (a dashboard of that project, in an organization the caller belongs to, that the caller may edit),
  update the fields the JSON body changes (`name`, `description`), insert the activity-log entry the service records
  for it (who, with which key, before and after), commit; it answers the id and the changed fields. The service's
  PATCH does this and more (its representation with tags and tiles, the ETag), so the floor bounds what it could
  reach, as the page does for the lists.

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
DASHBOARD = re.compile(r"^/api/projects/(\d+)/dashboards/(\d+)/?$")
# The key's mask comes with the lookup (one more column of the same row): the write floor's activity entry names it.
KEY_QUERY = """
    SELECT k.user_id, k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND u.is_active,
           k.mask_value
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

# The write floor. The row is locked with its project's organization and the caller's right to edit it (the
# page's rule: everyone in the project may edit, or the creator, an admin, a collaborator); OF d locks the
# dashboard's row only, as the service's select_for_update(of=("self",)) does. A soft-deleted dashboard is found:
# the service's PATCH may restore one.
LOCK_QUERY = """
    SELECT d.name, d.description, p.organization_id,
           d.restriction_level = 21 OR d.created_by_id = %(user)s OR m.level >= 8
               OR EXISTS (SELECT 1 FROM dashboards_dashboardcollaborator c
                          WHERE c.dashboard_id = d.id AND c.user_id = %(user)s)
    FROM dashboards_dashboard d
    JOIN organizations_project p ON p.id = d.project_id
    JOIN organizations_membership m ON m.organization_id = p.organization_id AND m.user_id = %(user)s
    WHERE d.id = %(dashboard)s AND d.project_id = %(project)s
    FOR UPDATE OF d
"""
# The fields a PATCH may change here, with their columns' lengths (None: text), and the statements that set them.
EDITABLE = {"name": 400, "description": None}
UPDATES = {
    fields: f"UPDATE dashboards_dashboard SET {', '.join(f'{name} = %({name})s' for name in fields)} "
    "WHERE id = %(dashboard)s"
    for fields in (("name",), ("description",), ("name", "description"))
}
ACTIVITY_INSERT = """
    INSERT INTO workspace_activitylog
        (created_at, user_id, api_key_mask, organization_id, project_id, scope, item_id, activity, detail)
    VALUES (now(), %s, %s, %s, %s, 'Dashboard', %s, 'updated', %s)
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


def authenticate(environ, cur) -> tuple[int, str] | None:
    """The key's user id and mask, or None for a missing, unknown, revoked or expired key."""
    header = environ.get("HTTP_AUTHORIZATION", "")
    if not header.startswith("Bearer "):
        return None
    cur.execute(KEY_QUERY, [hashlib.sha256(header[7:].encode()).hexdigest()])
    row = cur.fetchone()
    return (row[0], row[2]) if row and row[1] else None


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


def dashboard_patch(environ, start_response, cur, caller: tuple[int, str], project_id: int, dashboard_id: int):
    """Lock, update, record and commit in one transaction; a change to nothing writes nothing, as in the service."""
    try:
        body = orjson.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
    except (orjson.JSONDecodeError, ValueError):
        return respond(start_response, "400 Bad Request", b'{"detail":"JSON parse error."}')
    if not isinstance(body, dict):
        return respond(start_response, "400 Bad Request", b'{"detail":"Expected an object."}')
    asked = {name: body[name] for name in EDITABLE if name in body}
    for name, value in asked.items():
        if not isinstance(value, str) or (EDITABLE[name] is not None and len(value) > EDITABLE[name]):
            return respond(start_response, "400 Bad Request", orjson.dumps({name: ["Not a valid string."]}))
    user_id, key_mask = caller
    with cur.connection.transaction():
        cur.execute(LOCK_QUERY, {"user": user_id, "project": project_id, "dashboard": dashboard_id})
        row = cur.fetchone()
        if row is None:
            return respond(start_response, "404 Not Found", b'{"detail":"Not found."}')
        name, description, organization_id, may_edit = row
        if not may_edit:
            return respond(start_response, "403 Forbidden", b'{"detail":"You may not edit this dashboard."}')
        current = {"name": name, "description": description}
        changed = {field: value for field, value in asked.items() if current[field] != value}
        if changed:
            cur.execute(
                UPDATES[tuple(field for field in EDITABLE if field in changed)], {**changed, "dashboard": dashboard_id}
            )
            detail = {
                "name": changed.get("name", name),
                "before": {field: current[field] for field in changed},
                "after": changed,
            }
            cur.execute(
                ACTIVITY_INSERT,
                [user_id, key_mask, organization_id, project_id, str(dashboard_id), orjson.dumps(detail).decode()],
            )
    return respond(start_response, "200 OK", orjson.dumps({"id": dashboard_id, **asked}))


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")
    try:
        with cursor() as cur:
            caller = authenticate(environ, cur)
            if caller is None:
                return respond(start_response, "401 Unauthorized", b'{"detail":"Invalid API key."}')
            user_id = caller[0]
            if path == "/auth/":
                return respond(start_response, "200 OK", orjson.dumps({"id": user_id, "authenticated": True}))
            match = DASHBOARDS.match(path)
            if match:
                return dashboards_page(environ, start_response, cur, user_id, int(match[1]))
            match = DASHBOARD.match(path)
            if match and method == "PATCH":
                return dashboard_patch(environ, start_response, cur, caller, int(match[1]), int(match[2]))
    except psycopg.OperationalError:
        _local.connection = None
        raise
    return respond(start_response, "404 Not Found", b'{"detail":"Not found."}')
