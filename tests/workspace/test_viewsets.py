"""Guards over every API viewset, so new ones keep the shared behaviour."""

import pytest
from rest_framework import mixins

from tests.apikeys.test_scope_matrix import viewset_routes
from workspace.api.viewsets import BaseViewSet

VIEWSETS = sorted({viewset for _, _, viewset, _ in viewset_routes()}, key=lambda cls: cls.__name__)


@pytest.mark.parametrize("viewset", VIEWSETS, ids=lambda cls: cls.__name__)
def test_viewset_derives_from_the_base_viewset(viewset):
    assert issubclass(viewset, BaseViewSet)


@pytest.mark.parametrize("viewset", VIEWSETS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize(
    "hook,mixin",
    [
        ("perform_create", mixins.CreateModelMixin),
        ("perform_update", mixins.UpdateModelMixin),
        ("perform_destroy", mixins.DestroyModelMixin),
    ],
)
def test_writes_are_recorded_in_the_activity_log(viewset, hook, mixin):
    # DRF's mixins define perform_* too; listed before the base viewset they would skip the activity log.
    assert getattr(viewset, hook) is not getattr(mixin, hook), (
        f"{viewset.__name__}: put the base viewset before DRF's mixins so {hook} records activity."
    )
