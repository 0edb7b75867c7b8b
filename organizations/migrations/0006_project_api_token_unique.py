from django.db import migrations, models

import organizations.models


class Migration(migrations.Migration):

    dependencies = [
        ("organizations", "0005_project_api_token"),
    ]

    operations = [
        migrations.AlterField(
            model_name="project",
            name="api_token",
            field=models.CharField(
                db_default=organizations.models.DatabaseProjectToken(),
                default=organizations.models.new_project_api_token,
                editable=False,
                max_length=64,
                unique=True,
            ),
        ),
    ]
