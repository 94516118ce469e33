"""Peers for tests, benchmarks and demos of the ``redfish`` channel (loopback only).

- :mod:`~powerplane_redfish.testing.tls`: a throwaway CA and a server certificate for 127.0.0.1.
- :mod:`~powerplane_redfish.testing.emulator`: the sushy-tools emulator (fake driver) as a
  subprocess, over TLS with HTTP basic auth, counting the requests it receives.
- :mod:`~powerplane_redfish.testing.mockup`: a small server for DMTF mockups that applies
  ``ComputerSystem.Reset`` to its own copy of the state and implements SessionService
  login and logout, counting sessions created and deleted.
- :mod:`~powerplane_redfish.testing.sockets`: a closed port, and a server that accepts and
  never answers.

These need the distribution's ``test`` extra (sushy-tools, bcrypt, cryptography).
"""
