"""The public side of dashboards: sharing configuration and passwords, shared links, embed secrets and the tokens
they sign, the public pages (shared and embedded) and their charts. It builds on the core (`dashboards.core`),
never the reverse."""
