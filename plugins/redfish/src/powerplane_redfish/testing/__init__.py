"""Peers for tests, benchmarks and demos of the ``redfish`` channel (loopback only).

- :mod:`~powerplane_redfish.testing.emulator`: the sushy-tools emulator (fake driver) as a
  subprocess, over TLS with HTTP basic auth, counting the requests it receives.
- :mod:`~powerplane_redfish.testing.mockup`: a server for DMTF mockups (on
  :class:`powerplane.testing.JsonHttpServer`) that applies ``ComputerSystem.Reset`` to its
  own copy of the state and implements SessionService login and logout, counting sessions
  created and deleted.

Ports, silent servers, processes and certificates come from :mod:`powerplane.testing`.
The emulator needs the distribution's ``test`` extra (sushy-tools, bcrypt, cryptography).
"""
