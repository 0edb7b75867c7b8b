"""The service's MCP endpoint (`/mcp`): its tools are the operations of its own OpenAPI description.

It knows no app. The catalogue (`tools.py`) reads the schema drf-spectacular generates, with each operation's
`x-required-scopes`; a call (`dispatch.py`) goes through Django's URL resolver and middleware to the operation's
view, as the caller already authenticated, so scopes, tenancy, rate limits, budgets, idempotency and the activity
log apply as for REST. The protocol is the official `mcp` SDK's, stateless and in JSON (`server.py`); the view
(`views.py`) authenticates with DRF's configured authenticators and checks `Origin`.
"""
