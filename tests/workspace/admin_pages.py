"""Drive admin pages as an operator's browser would, and read what they recorded."""

from html.parser import HTMLParser

from django.urls import reverse

from workspace.models import ActivityLog


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def run_action(client, model, action: str, objects) -> None:
    response = client.post(changelist_url(model), {"action": action, "_selected_action": [o.pk for o in objects]})
    assert response.status_code == 302


def entries(**filters) -> list[ActivityLog]:
    return list(ActivityLog.objects.filter(**filters).order_by("id"))


def assert_by_operator(entry: ActivityLog, operator, organization_id=None, project_id=None) -> None:
    """The entry was made in admin: by the operator, with no key, in the given organization and project."""
    assert (entry.user, entry.api_key_mask) == (operator, "")
    assert (entry.organization_id, entry.project_id) == (organization_id, project_id)


class _FormFields(HTMLParser):
    """The values a browser would send for the admin's change form (`<form id="..._form">`)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.in_form = False
        self.data: dict[str, list[str]] = {}
        self.select: str | None = None
        self.textarea: str | None = None
        self.text: list[str] = []

    def add(self, name: str, value: str) -> None:
        if "__prefix__" not in name:  # the inline's template for rows added in the browser
            self.data.setdefault(name, []).append(value)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.in_form = attrs.get("id", "").endswith("_form")
        if not self.in_form or "disabled" in attrs or ("name" not in attrs and tag != "option"):
            return
        if tag == "input":
            kind = attrs.get("type", "text")
            if kind in ("submit", "button", "file", "image", "reset"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    self.add(attrs["name"], attrs.get("value") or "on")
                return
            self.add(attrs["name"], attrs.get("value") or "")
        elif tag == "select":
            self.select = attrs["name"]
        elif tag == "option" and self.select and "selected" in attrs:
            self.add(self.select, attrs.get("value") or "")
        elif tag == "textarea":
            self.textarea, self.text = attrs["name"], []

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea" and self.textarea:
            # A browser drops the one newline that follows <textarea>.
            self.add(self.textarea, "".join(self.text).removeprefix("\n"))
            self.textarea = None

    def handle_data(self, data):
        if self.textarea:
            self.text.append(data)


def change_form_data(client, url: str, **changes) -> dict:
    """The POST body of the change form at `url` submitted unchanged, apart from `changes`."""
    response = client.get(url)
    assert response.status_code == 200, url
    parser = _FormFields()
    parser.feed(response.content.decode())
    data = {name: values if len(values) > 1 else values[0] for name, values in parser.data.items()}
    for name, value in changes.items():
        if value is False:
            data.pop(name, None)
        else:
            data[name] = "on" if value is True else value
    return data
