"""Events at scale in ClickHouse, behind one setting (DECISIONS.md §20, docs/clickhouse.md).

`CLICKHOUSE_URL` unset: nothing here runs and nothing of ClickHouse is imported. Set, this room holds the one client
(`client.py`, the only module that knows whether it talks to a server or to embedded chDB), the ClickHouse tables as
versioned migrations (`schema.py`, `manage.py clickhouse_migrate`), and the events sync (`sync.py`, `manage.py
sync_events`), which copies the events the service took in, and every change of a distinct id's person, to ClickHouse
exactly once, then lets synced months leave the service's database (`retention.py`). It reads the events room; nothing
below it imports it.
"""
