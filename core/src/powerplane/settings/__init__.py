"""The validated sections of the deployment file beyond channels and nodes.

- :mod:`.lifecycle`: the ``lifecycle:`` section (``LifecycleConfig``, the configs of core's
  port types, :func:`~powerplane.settings.lifecycle.lifecycle_config`); its public names
  are exported by :mod:`powerplane.lifecycle`;
- :mod:`.authority`: the ``policy:`` and ``audit:`` sections (``PolicySpec``,
  ``AuditSettings``, :func:`~powerplane.settings.authority.validated_policy`).

Below :mod:`powerplane.config`, which validates the whole file with them, and above the
registry they look types up in (:mod:`powerplane.plugins`): the lifecycle and the
authority, which run what these sections say, sit elsewhere (the lifecycle above the host,
the authority beside this package, naming none of it). The package exports nothing of its
own, and importing it imports neither section.
"""
