"""The query layer: the reference's query nodes computed over a project's events (DECISIONS.md §15).

`run_query(project=..., query=..., refresh=...)` (pipelines.query.runner) parses a node strictly
(pipelines.query.nodes), builds it as a sqlglot syntax tree with the project's filter in it (trends, funnels,
retention, hogql), renders the tree for the database and runs it read-only with its own timeout (sql), and keeps
results in the shared cache.
"""
