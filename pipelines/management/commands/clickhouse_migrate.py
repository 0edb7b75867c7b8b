from django.core.management.base import BaseCommand, CommandError

from pipelines.clickhouse import client as clickhouse
from pipelines.clickhouse.schema import MIGRATIONS, Form, migrate, pending, plan, recorded


class Command(BaseCommand):
    help = (
        "Create and upgrade the ClickHouse tables CLICKHOUSE_URL names: the migrations ClickHouse has not recorded, in "
        "order, each statement printed as it runs. Applying them again does nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--cluster",
            metavar="NAME",
            help="The cluster form: every statement ON CLUSTER NAME, Replicated tables, events in a Distributed table.",
        )
        parser.add_argument(
            "--plan",
            dest="only_print",
            action="store_true",
            help="Print the statements of the migrations ClickHouse has not recorded, and apply nothing.",
        )
        parser.add_argument(
            "--all",
            action="store_true",
            help="With --plan: the statements of every migration, without asking ClickHouse.",
        )

    def handle(self, *args, cluster: str | None, only_print: bool, all: bool, **options):
        form = Form(cluster or None)
        if only_print and all:
            self._print(plan(form, MIGRATIONS))
            return None
        if not clickhouse.configured():
            raise CommandError("CLICKHOUSE_URL is not set: there is no ClickHouse to migrate.")
        try:
            client = clickhouse.get_client()
            if only_print:
                self._print(plan(form, pending(client, form), recorded=recorded(client)))
                return None
            applied = migrate(client, form, report=lambda statement: self._print([statement]))
        except clickhouse.error_types() as error:
            raise CommandError(f"ClickHouse refused: {error}") from error
        finally:
            clickhouse.close()
        if not applied:
            return "ClickHouse is up to date."
        return "Applied " + ", ".join(f"{migration.version:04d}_{migration.name}" for migration in applied) + "."

    def _print(self, statements: list[str]) -> None:
        for statement in statements:
            self.stdout.write(f"{statement};\n")
