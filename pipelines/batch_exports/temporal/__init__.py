"""Batch exports on Temporal (DECISIONS.md §14): a schedule per export, a workflow per run and per backfill.

PostgreSQL stays the source of truth for exports, runs and backfills; Temporal holds the schedules and executes the
runs in the workers (`manage.py batch_export_worker`).

- `inputs`: what workflows and activities pass each other, and the workflow ids (no Django here: the workflow
  sandbox imports it).
- the client: one connection per process (`pipelines.temporal.client`, shared with the query layer).
- `schedules`: an export's schedule, kept in step on every write and reconciled in bulk.
- `orchestration`: what the services ask of Temporal after their transaction commits.
- `activities` / `workflows`: the work of a run and a backfill; `worker`: the process that executes them.
"""
