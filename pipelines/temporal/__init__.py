"""Temporal, as every room that runs work on it reaches it: one client per process (`client`), for synchronous Django
code too. Batch exports (DECISIONS.md §14) and the query layer's computations that go on without their client (§21)
both use it; this room imports no other."""
