"""The admin's form for issuing a key, with the scope vocabulary (apikeys.scopes) shown as one row per object."""

from django import forms
from django.apps import apps
from django.core.exceptions import ValidationError

from apikeys.models import PersonalAPIKey, ProjectSecretKey
from apikeys.scopes import ACTIONS, ALL, ALL_SCOPES, OBJECTS, validate_project_scopes, validate_scopes
from apikeys.services import clean_endpoint_names


class ScopesWidget(forms.CheckboxSelectMultiple):
    """Checkboxes named `scopes`, one per scope, laid out as a grid: `*` ("all") first, then a row per object with
    its read and write boxes. A browser sends the same list of scope strings as with plain checkboxes, in the
    vocabulary's order."""

    template_name = "apikeys/scopes_widget.html"

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        options = {
            option["value"]: option for _group, choices, _index in context["widget"]["optgroups"] for option in choices
        }
        context["widget"]["all_option"] = options.get(ALL)
        context["widget"]["actions"] = ACTIONS
        context["widget"]["rows"] = [
            {"object": obj, "options": [options.get(f"{obj}:{action}") for action in ACTIONS]} for obj in OBJECTS
        ]
        return context

    def id_for_label(self, id_, index=None):
        # The grid is labelled as a whole (its legend); each box has a label of its own.
        return "" if index is None else super().id_for_label(id_, index)


class ScopesField(forms.MultipleChoiceField):
    """The scopes a key is issued with, cleaned by `validate_scopes` exactly as the API and the command clean them."""

    widget = ScopesWidget

    def __init__(self, **kwargs):
        kwargs.setdefault("choices", [(ALL, "all"), *[(scope, scope.partition(":")[2]) for scope in ALL_SCOPES]])
        kwargs.setdefault("help_text", "Write includes read. “All” grants every scope, present and future.")
        super().__init__(**kwargs)

    def clean(self, value):
        selected = super().clean(value)
        try:
            return validate_scopes(selected)
        except ValidationError as error:
            raise forms.ValidationError(error.messages, code="invalid") from error

    def valid_value(self, value):
        # Unknown scopes reach `validate_scopes`, whose message names the vocabulary.
        return True


class PersonalAPIKeyIssueForm(forms.ModelForm):
    """Issues a key: the plaintext is generated on save and shown once in a message."""

    scopes = ScopesField()
    organizations = forms.ModelMultipleChoiceField(
        queryset=None,  # set per form: organizations sit above keys, so they are looked up, not imported
        required=False,
        help_text="Limit the key to these organizations; leave empty for all of the user's.",
    )
    expires_in_days = forms.IntegerField(required=False, min_value=1)

    class Meta:
        model = PersonalAPIKey
        fields = ["user", "label"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        organization_model = apps.get_model("organizations", "Organization")
        self.fields["organizations"].queryset = organization_model.objects.order_by("name")


class ProjectScopesField(ScopesField):
    """The scopes of a project's key: the same grid, cleaned by `validate_project_scopes` (no `*`, nothing beyond one
    project)."""

    def clean(self, value):
        selected = forms.MultipleChoiceField.clean(self, value)
        try:
            return validate_project_scopes(selected)
        except ValidationError as error:
            raise forms.ValidationError(error.messages, code="invalid") from error


class ProjectSecretKeyIssueForm(forms.ModelForm):
    """Issues a project's key: the plaintext is generated on save and shown once in a message."""

    scopes = ProjectScopesField(help_text="Write includes read. A project's key holds at most a project's scopes.")
    endpoints = forms.CharField(
        required=False, help_text="Comma-separated endpoint names the key is limited to; empty for all."
    )

    class Meta:
        model = ProjectSecretKey
        fields = ["project", "label"]

    def clean_endpoints(self):
        names = [name.strip() for name in self.cleaned_data["endpoints"].split(",") if name.strip()]
        try:
            return clean_endpoint_names(names)
        except ValidationError as error:
            raise forms.ValidationError(error.message_dict["endpoints"]) from error
