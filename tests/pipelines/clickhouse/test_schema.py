"""The ClickHouse tables as versioned migrations (`manage.py clickhouse_migrate`): applied in order, recorded in
ClickHouse, applying twice does nothing, a migration cut short is finished; the cluster form's statements are what
this page says (no cluster runs here: they are checked as text, and parsed by ClickHouse's own parser)."""

import io
import textwrap

from django.core.management import call_command

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse.schema import MIGRATIONS, TABLE, Form, migrate, plan
from tests.pipelines.clickhouse.conftest import rows


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("clickhouse_migrate", *args, stdout=out)
    return out.getvalue()


def columns(client, table: str) -> list[tuple[str, str]]:
    return rows(
        client,
        "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {table:String} "
        "ORDER BY position",
        table=table,
    )


def test_migrating_twice_applies_each_migration_once(clickhouse_url):
    first = command()
    assert "CREATE TABLE IF NOT EXISTS events (" in first
    assert first.strip().endswith("Applied 0001_events, 0002_person_distinct_ids, 0003_person_distinct_ids_latest.")

    assert command().strip() == "ClickHouse is up to date."

    client = clickhouse_client.get_client()
    assert rows(client, f"SELECT version, name FROM {TABLE} ORDER BY version") == [
        (1, "events"),
        (2, "person_distinct_ids"),
        (3, "person_distinct_ids_latest"),
    ]


def test_the_tables_are_what_the_query_layer_reads(clickhouse):
    """The events table has the events model's columns under their names (the ClickHouse dialect reads `events`
    and `person_distinct_ids` with `project_id`, `distinct_id`, `person_id`)."""
    assert columns(clickhouse, "events") == [
        ("id", "Int64"),
        ("uuid", "UUID"),
        ("project_id", "Int64"),
        ("event", "String"),
        ("distinct_id", "String"),
        ("properties", "String"),
        ("timestamp", "DateTime64(6, 'UTC')"),
        ("inserted_at", "DateTime64(6, 'UTC')"),
    ]
    assert columns(clickhouse, "person_distinct_ids") == [
        ("project_id", "Int64"),
        ("distinct_id", "String"),
        ("person_id", "UUID"),
        ("is_deleted", "UInt8"),
        ("version", "Int64"),
    ]
    [(engine, partition, order)] = rows(
        clickhouse,
        "SELECT engine, partition_key, sorting_key FROM system.tables WHERE database = currentDatabase() AND "
        "name = 'events'",
    )
    assert (engine, partition, order) == (
        "MergeTree",
        "toYYYYMM(timestamp)",
        "project_id, toDate(timestamp), event, cityHash64(distinct_id), cityHash64(uuid)",
    )
    [(engine, order)] = rows(
        clickhouse,
        "SELECT engine_full, sorting_key FROM system.tables WHERE database = currentDatabase() AND "
        "name = 'person_distinct_ids'",
    )
    assert engine.startswith("ReplacingMergeTree(version)")
    assert order == "project_id, distinct_id"


def test_a_migration_cut_short_is_applied_again(clickhouse_url):
    """The first migration's table made, and nothing recorded (a migrator stopped there): migrating again finishes
    the job without an error, since every statement is idempotent."""
    client = clickhouse_client.get_client()
    for statement in plan(Form(), MIGRATIONS[:1]):
        client.command(statement)

    applied = migrate(client, Form())

    assert [migration.version for migration in applied] == [1, 2, 3]
    assert rows(client, f"SELECT count() FROM {TABLE}") == [(3,)]


def test_plan_prints_the_pending_statements_and_applies_nothing(clickhouse_url):
    printed = command("--plan")
    assert "CREATE TABLE IF NOT EXISTS person_distinct_ids (" in printed
    client = clickhouse_client.get_client()
    assert rows(client, "EXISTS TABLE events") == [(0,)]
    command()
    assert command("--plan").strip() == ""


CLUSTER_PLAN = textwrap.dedent(
    """\
    CREATE TABLE IF NOT EXISTS clickhouse_migrations ON CLUSTER `analytics` (
        version UInt32,
        name String,
        applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
    ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/noshard/{database}/clickhouse_migrations', '{replica}-{shard}')
    ORDER BY version;
    CREATE TABLE IF NOT EXISTS sharded_events ON CLUSTER `analytics` (
        id Int64,
        uuid UUID,
        project_id Int64,
        event String,
        distinct_id String,
        properties String,
        timestamp DateTime64(6, 'UTC'),
        inserted_at DateTime64(6, 'UTC'),
        INDEX id_range id TYPE minmax GRANULARITY 1
    ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/sharded_events', '{replica}')
    PARTITION BY toYYYYMM(timestamp)
    ORDER BY (project_id, toDate(timestamp), event, cityHash64(distinct_id), cityHash64(uuid));
    CREATE TABLE IF NOT EXISTS events ON CLUSTER `analytics` AS sharded_events
    ENGINE = Distributed('analytics', currentDatabase(), 'sharded_events', cityHash64(project_id, distinct_id));
    CREATE TABLE IF NOT EXISTS person_distinct_ids ON CLUSTER `analytics` (
        project_id Int64,
        distinct_id String,
        person_id UUID,
        is_deleted UInt8,
        version Int64
    ) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/noshard/{database}/person_distinct_ids', \
'{replica}-{shard}', version)
    ORDER BY (project_id, distinct_id);
    CREATE VIEW IF NOT EXISTS person_distinct_ids_latest ON CLUSTER `analytics` AS
    SELECT project_id, distinct_id, toString(argMax(person_id, version)) AS person_id
    FROM person_distinct_ids
    GROUP BY project_id, distinct_id
    HAVING argMax(is_deleted, version) = 0;
    """
)


def test_the_cluster_form_is_replicated_and_sharded_by_distinct_id():
    """Every statement ON CLUSTER; the events once per shard (ReplicatedMergeTree at the shard's path) behind a
    Distributed table that sends an event to its distinct id's shard; the distinct ids' persons and the record of
    migrations whole on every node (the `noshard` path), so that every shard joins its events to every person."""
    assert command("--cluster", "analytics", "--plan", "--all") == CLUSTER_PLAN


def test_the_cluster_statements_parse_as_clickhouse(clickhouse_url):
    client = clickhouse_client.get_client()
    for statement in plan(Form("analytics")):
        formatted = client.command("SELECT formatQuery({statement:String})", parameters={"statement": statement})
        assert "ON CLUSTER analytics" in formatted


def test_a_cluster_name_is_quoted():
    assert Form("odd`name").on_cluster == " ON CLUSTER `odd\\`name`"


def test_reads_see_each_distinct_ids_latest_person(clickhouse):
    """`person_distinct_ids_latest`, what the reads join events to: the latest version of each id, a deleted one
    gone, the person's uuid as text, however many versions ClickHouse has not merged yet."""
    first, second = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
    clickhouse.command(
        "INSERT INTO person_distinct_ids (project_id, distinct_id, person_id, is_deleted, version) VALUES "
        f"(1, 'a', '{first}', 0, 1), (1, 'a', '{second}', 0, 2), (1, 'b', '{first}', 0, 3), (1, 'b', '{first}', 1, 4)"
    )

    latest = rows(clickhouse, "SELECT project_id, distinct_id, person_id FROM person_distinct_ids_latest")

    assert latest == [(1, "a", second)]


def test_the_events_table_drops_a_block_whose_token_it_has_seen(clickhouse):
    """What the sync's exactly-once rests on, checked on chDB: the same insert with the same token lands once, and
    another token lands again, whatever the rows (here spread over two months, so two parts a block)."""
    lines = b"".join(
        f"{index}\t{index:08x}-0000-4000-8000-000000000000\t1\te\td\t{{}}\t2026-{10 + index % 2}-02 00:00:00\t"
        f"2026-11-02 00:00:00\n".encode()
        for index in range(1, 7)
    )
    columns = ["id", "uuid", "project_id", "event", "distinct_id", "properties", "timestamp", "inserted_at"]
    for token in ("events:0.0-0.6", "events:0.0-0.6", "events:0.0-0.6:again"):
        clickhouse.raw_insert(
            "events", columns, lines, fmt="TabSeparated", settings={"insert_deduplication_token": token}
        )

    assert rows(clickhouse, "SELECT count(), uniqExact(id) FROM events") == [(12, 6)]
