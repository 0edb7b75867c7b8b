"""Optional destinations whose vendor connector comes with a pyproject extra."""

from importlib import import_module

from pipelines.batch_exports.exporters.base import DestinationError


def require_extra(module: str, extra: str, destination: str):
    """The module, or a DestinationError (not retryable) saying which extra installs it."""
    try:
        return import_module(module)
    except ImportError:
        raise DestinationError(
            f"The {destination} destination needs its connector, which is not installed: "
            f"pip install 'analytics-workspace[{extra}]'"
        ) from None
