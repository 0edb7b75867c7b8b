"""The consent page's form: the authorization request's hidden fields, plus the project and the scopes chosen."""

from django import forms
from oauth2_provider.forms import AllowForm

from apikeys.scopes import ALL_SCOPES, READ
from organizations.models import Project


def read_scopes(scopes) -> list[str]:
    return [scope for scope in scopes if scope.endswith(f":{READ}")]


class ConsentForm(AllowForm):
    """`project` lists the projects of the person's organizations ("Organization / Project"); `scopes` lists every
    scope of a personal key, read scopes of those asked for preselected, write scopes only if ticked. The hidden
    `scope` field keeps what the client asked for; what is granted is `scopes`."""

    project = forms.TypedChoiceField(coerce=int, label="Project")
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in ALL_SCOPES],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Access",
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.projects = {
            project.pk: project
            for project in Project.objects.filter(organization__memberships__user=user)
            .select_related("organization")
            .order_by("organization__name", "name", "id")
        }
        self.fields["project"].choices = [
            (pk, f"{project.organization.name} / {project.name}") for pk, project in self.projects.items()
        ]
        current = getattr(user, "current_project_id", None)
        if current in self.projects:
            self.fields["project"].initial = current
        asked = (self.initial.get("scope") or "").split()
        self.fields["scopes"].initial = read_scopes(asked) or read_scopes(ALL_SCOPES)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("allow") and not cleaned.get("scopes"):
            self.add_error("scopes", "Choose at least one kind of access, or deny.")
        return cleaned

    @property
    def chosen_project(self) -> Project | None:
        return self.projects.get(self.cleaned_data.get("project"))
