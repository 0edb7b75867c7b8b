from django.db import migrations, models

import organizations.models


def fill_api_tokens(apps, schema_editor):
    """Give every existing project its own token; the next migration makes the column unique and required."""
    Project = apps.get_model("organizations", "Project")
    taken = set()
    for project in Project.objects.filter(api_token__isnull=True).only("pk"):
        token = organizations.models.new_project_api_token()
        while token in taken:
            token = organizations.models.new_project_api_token()
        taken.add(token)
        Project.objects.filter(pk=project.pk).update(api_token=token)


class Migration(migrations.Migration):

    dependencies = [
        ("organizations", "0004_one_pending_invite_per_email"),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="api_token",
            field=models.CharField(editable=False, max_length=64, null=True),
        ),
        migrations.RunPython(fill_api_tokens, migrations.RunPython.noop),
    ]
