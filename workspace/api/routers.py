from rest_framework.routers import SimpleRouter


class OptionalSlashRouter(SimpleRouter):
    """Routes match with and without the trailing slash, so no redirect ever drops a POST body."""

    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"
