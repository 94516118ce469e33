"""The routes, an :class:`fastapi.APIRouter` per resource: :mod:`.session` (who is asking,
the page and its login), :mod:`.servers`, :mod:`.maintenances` (with pre-flight) and
:mod:`.audit`. Who is asking comes from :mod:`powerplane_servers.deps`; the application
(:func:`powerplane_servers.app.create_app`) includes them."""
