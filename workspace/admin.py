from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

from workspace.models import ActivityLog, User


class UserCreationForm(AdminUserCreationForm):
    class Meta:
        model = User
        fields = ("email",)


class UserEditForm(UserChangeForm):
    class Meta:
        model = User
        fields = "__all__"


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    form = UserEditForm
    add_form = UserCreationForm
    list_display = ("email", "first_name", "last_name", "is_active", "is_staff", "current_organization", "date_joined")
    list_select_related = ("current_organization",)
    list_filter = ("is_active", "is_staff", "is_superuser", "is_2fa_enabled")
    search_fields = ("email", "first_name", "last_name", "uuid")
    ordering = ("email",)
    raw_id_fields = ("current_organization", "current_project")
    readonly_fields = ("uuid", "last_login", "date_joined")
    fieldsets = (
        (None, {"fields": ("email", "password", "uuid", "distinct_id")}),
        ("Profile", {"fields": ("first_name", "last_name", "is_email_verified", "hedgehog_config")}),
        ("Security", {"fields": ("is_2fa_enabled", "has_social_auth")}),
        ("Current context", {"fields": ("current_organization", "current_project")}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)


@admin.register(ActivityLog)
class ActivityLogAdmin(admin.ModelAdmin):
    list_display = ("created_at", "scope", "item_id", "activity", "user", "api_key_mask", "organization_id")
    list_select_related = ("user",)
    list_filter = ("scope", "activity", "created_at")
    search_fields = ("item_id", "user__email", "api_key_mask", "organization_id")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
