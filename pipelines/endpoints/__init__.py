"""Endpoints: saved queries with typed parameters and versions, run by name (DECISIONS.md §21)."""
