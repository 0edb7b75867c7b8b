"""The answer to a change is read again as far as the change can have altered it (workspace/api/viewsets.py): the
row always, a related read only when a table it depends on was written, and the rows kept from the read under the
lock out of the change's reach. Here: what counts as written, which reads each write sends back to the database, and
that the schema changes no row but through a statement naming its table."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.models import Prefetch

from dashboards.models import Dashboard, DashboardTag, DashboardTile
from dashboards.serializers import DashboardSerializer
from organizations.models import Membership
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from workspace.api.serializers import read_queryset
from workspace.api.viewsets import TablesWritten, detach_related, read_again


def seen(*statements: str) -> TablesWritten:
    written = TablesWritten()
    for sql in statements:
        written(lambda *args: None, sql, None, False, {})
    return written


class TestTablesWritten:
    @pytest.mark.parametrize(
        "sql",
        [
            'UPDATE "dashboards_dashboard" SET "description" = %s WHERE "dashboards_dashboard"."id" = %s',
            'INSERT INTO "dashboards_dashboard" ("name") VALUES (%s) RETURNING "dashboards_dashboard"."id"',
            'DELETE FROM "dashboards_dashboard" WHERE "dashboards_dashboard"."id" IN (%s)',
            "update dashboards_dashboard set name = 'raw'",
            '  INSERT INTO "Dashboards_Dashboard"("name") VALUES (%s)',
        ],
    )
    def test_a_write_names_the_table_it_writes(self, sql):
        written = seen(sql)
        assert written.tables == {"dashboards_dashboard"}
        assert not written.every_table

    @pytest.mark.parametrize(
        "sql",
        [
            'SELECT "dashboards_dashboard"."id" FROM "dashboards_dashboard" FOR UPDATE OF "dashboards_dashboard"',
            'SAVEPOINT "s1_x2"',
            'RELEASE SAVEPOINT "s1_x2"',
            'ROLLBACK TO SAVEPOINT "s1_x2"',
        ],
    )
    def test_reads_and_savepoints_write_nothing(self, db, sql):
        written = seen(sql)
        assert not written
        assert not written.decides(Dashboard, Prefetch("tag_rows", to_attr="tags"))

    @pytest.mark.parametrize(
        "sql",
        [
            'WITH gone AS (DELETE FROM "dashboards_dashboardtag" RETURNING 1) SELECT count(*) FROM gone',
            'UPDATE "public"."dashboards_dashboard" SET "name" = %s',
            'TRUNCATE "dashboards_dashboardtag"',
            "SET LOCAL statement_timeout = 1000",
            '/* a comment */ UPDATE "dashboards_dashboard" SET "name" = %s',
            "COMMIT",
        ],
    )
    def test_any_other_statement_counts_as_writing_every_table(self, db, sql):
        written = seen(sql)
        assert written.every_table
        assert written.decides(Dashboard, Prefetch("tag_rows", to_attr="tags"))

    def test_a_lookup_decides_by_the_tables_of_its_path_and_its_queryset(self, db):
        written = seen('UPDATE "dashboards_dashboard" SET "deleted" = %s')
        assert not written.decides(Dashboard, Prefetch("tag_rows", to_attr="tags"))
        assert not written.decides(Dashboard, Prefetch("tiles", DashboardTile.objects.all(), to_attr="all_tiles"))
        assert written.decides(
            Dashboard,
            Prefetch("tiles", DashboardTile.objects.shown().filter(dashboard__deleted=False), to_attr="live_tiles"),
        )
        # A foreign key's column on the object says which row it reaches: the object's own table decides too.
        moved = seen('UPDATE "dashboards_dashboardtag" SET "dashboard_id" = %s')
        assert moved.decides(DashboardTag, Prefetch("dashboard", to_attr="owner"))

    def test_a_lookup_whose_tables_are_not_known_is_read_again_once_anything_is_written(self, db):
        written = seen('UPDATE "dashboards_text" SET "body" = %s')
        assert written.decides(Dashboard, "tag_rows")
        assert written.decides(Dashboard, Prefetch("tag_rows"))
        assert not seen().decides(Dashboard, "tag_rows")

    def test_it_sees_the_statements_run_while_it_is_entered(self, db):
        dashboard = DashboardFactory()
        with TablesWritten() as written:
            Dashboard.objects.filter(pk=dashboard.pk).update(description="changed")
            list(DashboardTag.objects.filter(dashboard=dashboard))
        DashboardTile.objects.filter(dashboard=dashboard).update(color="blue")
        assert written.tables == {"dashboards_dashboard"}
        assert not written.every_table


def test_no_row_changes_but_through_a_statement_naming_its_table(db):
    """TablesWritten sees the table each statement names: a trigger, a rule or a foreign key acting by itself (ON
    DELETE / ON UPDATE in the database rather than Django's own statements) would change rows behind its back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal")
            triggers = cursor.fetchall()
            cursor.execute(
                "SELECT tablename, rulename FROM pg_rules WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            )
            rules = cursor.fetchall()
            cursor.execute(
                "SELECT conrelid::regclass::text, conname FROM pg_constraint "
                "WHERE contype = 'f' AND (confdeltype <> 'a' OR confupdtype <> 'a')"
            )
            acting_keys = cursor.fetchall()
            cursor.execute("SELECT count(*) FROM pg_constraint WHERE contype = 'f'")
            assert cursor.fetchone()[0] > 0  # the foreign keys are there, and none acts by itself
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            triggers, rules = cursor.fetchall(), []
            acting_keys = []
            for table in connection.introspection.table_names(cursor):
                cursor.execute(f'PRAGMA foreign_key_list("{table}")')
                acting_keys += [(table, row[2]) for row in cursor.fetchall() if {row[5], row[6]} != {"NO ACTION"}]
    assert triggers == []
    assert rules == []
    assert acting_keys == []


ROOT = Path(__file__).resolve().parents[2]
APPS = ("apikeys", "dashboards", "organizations", "pipelines", "workspace")
# Statements sent through the driver's own cursor or connection, where no execute wrapper sees them.
AROUND_DJANGOS_CURSOR = re.compile(
    r"\.callproc\(|\.copy\(\s*f?[\"']COPY|copy_expert\(|copy_from\(|connection\.connection\b"
)
ALLOWED = {
    # COPY into a destination's own database, through a connection of the exporter's.
    "pipelines/batch_exports/exporters/postgres.py",
    # The SQLite dialect's read-only guard: registers a function and a progress handler on the driver's connection,
    # and sends its statements through Django's cursor.
    "pipelines/query/dialects.py",
}


def test_no_statement_to_this_database_goes_around_djangos_cursor():
    """TablesWritten sees the statements sent through Django's cursors; one sent through the driver's (a COPY, a
    stored procedure) would write tables it cannot see."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in ALLOWED
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if AROUND_DJANGOS_CURSOR.search(line)
    ]
    assert found == []


@pytest.fixture
def dashboard(project, alice):
    """A dashboard with a tag, an insight tile (the insight tagged, and shown on another dashboard too) and a text."""
    dashboard = DashboardFactory(project=project, created_by=alice, tags=["a"])
    tile = DashboardTileFactory(dashboard=dashboard, insight__tags=["x"])
    DashboardTileFactory(dashboard=DashboardFactory(project=project, created_by=alice), insight=tile.insight)
    DashboardTileFactory(dashboard=dashboard, text_tile=True)
    return dashboard


def plan(alice):
    """The read of a dashboard's representation, as the write path makes it: its row, tags, tiles (with insights and
    texts joined), the insights' tags and the insights' dashboards."""
    return read_queryset(DashboardSerializer, Dashboard.objects.for_caller(alice))


def kept_in(alice, relation: str) -> str:
    """The attribute of the dashboard that `plan` puts its `relation` rows in."""
    (lookup,) = [lookup for lookup in plan(alice)._prefetch_related_lookups if lookup.prefetch_through == relation]
    return lookup.to_attr


def represent(dashboard, alice) -> dict:
    view = SimpleNamespace(request=SimpleNamespace(user=alice), membership_level=Membership.Level.OWNER)
    return DashboardSerializer(dashboard, context={"view": view}).data


def read_afresh(dashboard, alice) -> dict:
    return represent(plan(alice).get(pk=dashboard.pk), alice)


def change(alice, dashboard, write) -> tuple[Dashboard, dict, TablesWritten]:
    """Read the dashboard, take its related rows off it, run `write` and note what it wrote."""
    locked = plan(alice).get(pk=dashboard.pk)
    detached = detach_related(locked, plan(alice))
    with TablesWritten() as written:
        write()
    return locked, detached, written


class TestReadAgain:
    def test_the_related_rows_are_out_of_the_changes_reach(self, alice, dashboard):
        locked, detached, _ = change(alice, dashboard, lambda: None)
        assert set(detached) == {kept_in(alice, "tag_rows"), kept_in(alice, "tiles")}
        assert not set(detached) & set(locked.__dict__)

    def test_a_change_of_a_column_reads_the_row_and_what_reads_its_table(
        self, alice, dashboard, django_assert_num_queries
    ):
        _, detached, written = change(
            alice, dashboard, lambda: Dashboard.objects.filter(pk=dashboard.pk).update(description="changed")
        )
        # the row (+creator join, annotations), the insights' dashboards (which joins dashboards for `deleted`)
        with django_assert_num_queries(2):
            row = read_again(plan(alice), dashboard.pk, detached, written)
        assert represent(row, alice) == read_afresh(dashboard, alice)
        assert represent(row, alice)["description"] == "changed"
        for relation in ("tag_rows", "tiles"):
            assert getattr(row, kept_in(alice, relation)) is detached[kept_in(alice, relation)]

    def test_a_soft_delete_reaches_the_insights_dashboards(self, alice, dashboard):
        _, detached, written = change(
            alice, dashboard, lambda: Dashboard.objects.filter(pk=dashboard.pk).update(deleted=True)
        )
        answer = represent(read_again(plan(alice), dashboard.pk, detached, written), alice)
        assert answer == read_afresh(dashboard, alice)
        (insight,) = (tile["insight"] for tile in answer["tiles"] if tile["insight"])
        assert len(insight["dashboards"]) == 1
        assert dashboard.pk not in insight["dashboards"]

    def test_a_written_relation_is_read_again(self, alice, dashboard, django_assert_num_queries):
        _, detached, written = change(
            alice, dashboard, lambda: DashboardTag.objects.create(dashboard=dashboard, name="b")
        )
        # the row, its tags
        with django_assert_num_queries(2):
            row = read_again(plan(alice), dashboard.pk, detached, written)
        assert represent(row, alice) == read_afresh(dashboard, alice)
        assert represent(row, alice)["tags"] == ["a", "b"]
        assert getattr(row, kept_in(alice, "tiles")) is detached[kept_in(alice, "tiles")]

    def test_a_written_tile_reads_the_tiles_and_what_they_show_again(self, alice, dashboard, django_assert_num_queries):
        _, detached, written = change(
            alice, dashboard, lambda: DashboardTile.objects.filter(dashboard=dashboard).update(color="blue")
        )
        # the row, its tiles (+insights, texts and users joined), the insights' tags, the insights' dashboards
        with django_assert_num_queries(4):
            row = read_again(plan(alice), dashboard.pk, detached, written)
        assert represent(row, alice) == read_afresh(dashboard, alice)
        assert {tile["color"] for tile in represent(row, alice)["tiles"]} == {"blue"}
        assert getattr(row, kept_in(alice, "tag_rows")) is detached[kept_in(alice, "tag_rows")]

    def test_a_statement_of_unknown_shape_reads_everything_again(self, alice, dashboard, django_assert_num_queries):
        def write():
            with connection.cursor() as cursor:
                cursor.execute("WITH one AS (SELECT 1 AS n) SELECT n FROM one")

        _, detached, written = change(alice, dashboard, write)
        with django_assert_num_queries(5):
            read_again(plan(alice), dashboard.pk, detached, written)

    def test_rows_not_read_with_the_object_are_read(self, alice, dashboard, django_assert_num_queries):
        with TablesWritten() as written:
            pass
        with django_assert_num_queries(5):
            row = read_again(plan(alice), dashboard.pk, {}, written)
        assert represent(row, alice) == read_afresh(dashboard, alice)

    def test_nothing_written_keeps_every_related_row(self, alice, dashboard, django_assert_num_queries):
        _, detached, written = change(alice, dashboard, lambda: None)
        with django_assert_num_queries(1):
            row = read_again(plan(alice), dashboard.pk, detached, written)
        assert represent(row, alice) == read_afresh(dashboard, alice)
