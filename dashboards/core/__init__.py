"""The authenticated core of dashboards: dashboards, their tiles, texts, tags, collaborators, versions and
templates; insights and their results. It imports nothing of the public side (`dashboards.public`)."""
