"""What a run of an endpoint answers: its JSON (`answer`), or the same rows as CSV or NDJSON. Shared by the run route
(pipelines.endpoints.views) and the public embeds of an endpoint, which show the same answer."""

import csv
import io
import json

from pipelines.endpoints.services import Run

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "ndjson": "application/x-ndjson"}


def answer(run: Run, options: dict) -> dict:
    """The run's answer: the result's rows (a page of them for HogQL, by `options`' `limit` and `offset`), columns and
    types, the version run and the effective parameters."""
    result = run.outcome.response
    return result_answer(result, version=run.version, parameters=run.parameters, options=options)


def result_answer(result: dict, *, version: int, parameters: dict, options: dict) -> dict:
    """`answer` of a query layer's `result` for the `version` run with the effective `parameters`."""
    shown = {
        "results": result["results"],
        "columns": result.get("columns"),
        "types": result.get("types"),
        "version": version,
        "parameters": parameters,
    }
    if result.get("columns") is not None:  # a HogQL result: its rows within the query's LIMIT, by page
        rows = result["results"]
        offset = options.get("offset", 0)
        limit = options.get("limit", result.get("limit") or len(rows))
        shown["results"] = rows[offset : offset + limit]
        shown |= {
            "limit": limit,
            "offset": offset,
            "hasMore": offset + limit < len(rows) or bool(result.get("hasMore")),
        }
    return shown


def cell(value) -> str:
    """A value as one cell of text: empty for null, `true` / `false`, objects and lists as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def records(answer: dict) -> tuple[list[str], list[list]]:
    """The answer's columns and rows: a HogQL result's own, or each result object's keys (their union, in order)."""
    results = answer["results"] or []
    if answer["columns"] is not None:
        return list(answer["columns"]), results
    columns = list(dict.fromkeys(key for item in results if isinstance(item, dict) for key in item))
    return columns, [[item.get(key) if isinstance(item, dict) else None for key in columns] for item in results]


def csv_text(answer: dict) -> str:
    """The answer as CSV: a header of the columns, then a line per row (objects and lists as JSON)."""
    columns, rows = records(answer)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(columns)
    writer.writerows([cell(value) for value in row] for row in rows)
    return buffer.getvalue()


def ndjson_text(answer: dict) -> str:
    """The answer as NDJSON: one object per row, by column name."""
    columns, rows = records(answer)
    return "".join(
        json.dumps(dict(zip(columns, row, strict=False)), ensure_ascii=False, separators=(",", ":")) + "\n"
        for row in rows
    )
