"""The ClickHouse tables, as versioned migrations (`manage.py clickhouse_migrate`).

Each migration is a number, a name and its statements, written once for both forms: one server (or chDB), and a
cluster (`--cluster NAME`: every statement `ON CLUSTER`, `Replicated…` engines, and events spread over the shards by a
`Distributed` table). ClickHouse keeps the numbers applied in `clickhouse_migrations`; `migrate()` applies, in order,
those it does not list, and records each once its statements have run. Every statement is idempotent (`IF NOT
EXISTS`), so a migration cut short is simply applied again, and applying twice does nothing.

The tables are what the query layer's ClickHouse dialect reads (`pipelines.query.dialects.ClickHouse`):
- `events`: the columns of `pipelines.events.models.Event` under their own names (`properties` the JSON text),
  partitioned by month, ordered for a project, a day and an event (the reference's `ORDER BY`). A plain MergeTree: the
  sync inserts each event once (`pipelines.clickhouse.sync`), with an `insert_deduplication_token` per batch that the
  deduplication window below honours. A cluster spreads events over its shards by distinct id (`EVENT_SHARDING_KEY`).
- `person_distinct_ids`: each change of a distinct id's person (`project_id, distinct_id, person_id`, `is_deleted`),
  with the change's `version`; a ReplacingMergeTree on that version keyed by `(project_id, distinct_id)`, the
  reference's `person_distinct_id2`, read with the latest version of each id: through the view
  `person_distinct_ids_latest`, which the reads join events to.
"""

from dataclasses import dataclass

TABLE = "clickhouse_migrations"
# A cluster's tables that exist once per shard live at this path in Keeper; those every node holds whole (the persons'
# table, the migrations applied) at the `noshard` one, replicated to every node.
SHARD_PATH = "/clickhouse/tables/{shard}/{database}/%s"
NOSHARD_PATH = "/clickhouse/tables/noshard/{database}/%s"
# Inserts the sync may repeat with the same token are recognised among this many recent blocks of the table (a
# non-replicated table keeps none unless told; replicated ones keep `replicated_deduplication_window`).
DEDUPLICATION_WINDOW = 1000


@dataclass(frozen=True)
class Form:
    """One server (cluster None) or a cluster: how a statement names the cluster and an engine."""

    cluster: str | None = None

    @property
    def on_cluster(self) -> str:
        return f" ON CLUSTER {quote_identifier(self.cluster)}" if self.cluster else ""

    def engine(self, engine: str, table: str, *arguments: str, everywhere: bool = False) -> str:
        """`engine(arguments)` on one server; its Replicated form on a cluster, once per shard or (`everywhere`) whole
        on every node."""
        if not self.cluster:
            return f"{engine}({', '.join(arguments)})"
        path, replica = (NOSHARD_PATH, "{replica}-{shard}") if everywhere else (SHARD_PATH, "{replica}")
        return f"Replicated{engine}({', '.join([quote_string(path % table), quote_string(replica), *arguments])})"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: callable  # (Form) -> list[str]


def quote_identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def quote_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _migrations_table(form: Form) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {TABLE}{form.on_cluster} (\n"
        "    version UInt32,\n"
        "    name String,\n"
        "    applied_at DateTime64(3, 'UTC') DEFAULT now64(3)\n"
        f") ENGINE = {form.engine('MergeTree', TABLE, everywhere=True)}\n"
        "ORDER BY version"
    ]


EVENT_COLUMNS = """    id Int64,
    uuid UUID,
    project_id Int64,
    event String,
    distinct_id String,
    properties String,
    timestamp DateTime64(6, 'UTC'),
    inserted_at DateTime64(6, 'UTC'),
    INDEX id_range id TYPE minmax GRANULARITY 1"""
# `id_range`: a batch the sync is not sure landed is looked up by its rows' ids (pipelines.clickhouse.sync); such a
# batch is among the newest parts, whose ids lie close together.
EVENT_LAYOUT = """PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, toDate(timestamp), event, cityHash64(distinct_id), cityHash64(uuid))"""
# Which shard an event goes to: its distinct id's, so that the events of a person with one distinct id sit on one shard
# (as the reference shards them). Not the person the id names now: a merge can change that between two attempts at one
# batch, and a repeated batch must land where the first attempt did for its token to recognise it on that shard. The
# events of a person whose ids were joined may sit on several shards, whose partial aggregates ClickHouse merges.
EVENT_SHARDING_KEY = "cityHash64(project_id, distinct_id)"


def _events(form: Form) -> list[str]:
    settings = f"SETTINGS non_replicated_deduplication_window = {DEDUPLICATION_WINDOW}"
    if not form.cluster:
        return [
            f"CREATE TABLE IF NOT EXISTS events (\n{EVENT_COLUMNS}\n) ENGINE = MergeTree\n{EVENT_LAYOUT}\n{settings}"
        ]
    cluster = quote_string(form.cluster)
    return [
        f"CREATE TABLE IF NOT EXISTS sharded_events{form.on_cluster} (\n{EVENT_COLUMNS}\n) "
        f"ENGINE = {form.engine('MergeTree', 'sharded_events')}\n{EVENT_LAYOUT}",
        f"CREATE TABLE IF NOT EXISTS events{form.on_cluster} AS sharded_events\n"
        f"ENGINE = Distributed({cluster}, currentDatabase(), 'sharded_events', {EVENT_SHARDING_KEY})",
    ]


def _person_distinct_ids(form: Form) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS person_distinct_ids{form.on_cluster} (\n"
        "    project_id Int64,\n"
        "    distinct_id String,\n"
        "    person_id UUID,\n"
        "    is_deleted UInt8,\n"
        "    version Int64\n"
        f") ENGINE = {form.engine('ReplacingMergeTree', 'person_distinct_ids', 'version', everywhere=True)}\n"
        "ORDER BY (project_id, distinct_id)"
    ]


def _person_distinct_ids_latest(form: Form) -> list[str]:
    """What the reads join events to: each distinct id's person as of its latest change, a deleted id left out, the
    person's uuid as text (as the service's database gives it). A view, so a read never sees two versions of one id
    whatever ClickHouse has merged yet."""
    return [
        f"CREATE VIEW IF NOT EXISTS person_distinct_ids_latest{form.on_cluster} AS\n"
        "SELECT project_id, distinct_id, toString(argMax(person_id, version)) AS person_id\n"
        "FROM person_distinct_ids\n"
        "GROUP BY project_id, distinct_id\n"
        "HAVING argMax(is_deleted, version) = 0"
    ]


MIGRATIONS = (
    Migration(1, "events", _events),
    Migration(2, "person_distinct_ids", _person_distinct_ids),
    Migration(3, "person_distinct_ids_latest", _person_distinct_ids_latest),
)


def recorded(client) -> bool:
    """Whether ClickHouse has the table of applied migrations."""
    return bool(int(client.command(f"EXISTS TABLE {TABLE}")))


def pending(client, form: Form) -> list[Migration]:
    """The migrations ClickHouse has not recorded (all of them where the table of applied migrations is missing)."""
    applied = set()
    if recorded(client):
        applied = {row[0] for row in client.query(f"SELECT DISTINCT version FROM {TABLE}").result_rows}
    return [migration for migration in MIGRATIONS if migration.version not in applied]


def migrate(client, form: Form, *, report=lambda statement: None) -> list[Migration]:
    """Apply the pending migrations in order, each statement reported before it runs; returns those applied."""
    if not recorded(client):
        for statement in _migrations_table(form):
            report(statement)
            client.command(statement)
    applied = []
    for migration in pending(client, form):
        for statement in migration.statements(form):
            report(statement)
            client.command(statement)
        client.command(
            f"INSERT INTO {TABLE} (version, name) VALUES ({migration.version}, {quote_string(migration.name)})"
        )
        applied.append(migration)
    return applied


def plan(form: Form, migrations=MIGRATIONS, *, recorded: bool = False) -> list[str]:
    """Every statement that applying `migrations` runs, in order, the table of applied migrations first unless
    ClickHouse has it (`recorded`): what `--plan` prints."""
    statements = [] if recorded else list(_migrations_table(form))
    for migration in migrations:
        statements += migration.statements(form)
    return statements
