"""Authority: who may take which action, and the record of who did.

Every act is one action name (:mod:`.actions`); the identity comes from the platform
(:mod:`.identity`: the OS user, the API server, a verified token), never from a flag; a
policy port decides (:mod:`.policy`; the built-in ``local`` type reads a roles file,
:mod:`.roles`); every accepted act is audited, durably, before it is performed, and every
denial is audited too (:mod:`.audit`). :class:`Authority` (:mod:`.service`) puts them
together for the host, the lifecycle and the CLI. The deployment's ``policy:`` and
``audit:`` sections are validated in :mod:`powerplane.settings.authority`, beside this
package; a policy type (``PolicyType``) is of the seam layer, :mod:`powerplane.kinds`.

Modules (each imports only those below it, type-only imports included), top first:
``service``; ``roles``, ``folding`` (repeated denials counted in one record); ``audit``;
``policy``, ``seal`` (signed checkpoints), ``export`` (copies for an inspector); ``chain``
(the chained trail); ``identity``, ``actions``.

Its public names are exported by :mod:`powerplane` (the embedding API and the policy SDK:
``Identity``, ``Authority``, ``authority_for``, ``Decision``, ``Policy``, ``PolicyType``,
``PolicyContext``, ``PolicyDenied``, ``AuditNotRecorded``) and, for store vendors,
:mod:`powerplane.lifecycle` (``Action``, ``AuditRecord``): this package exports nothing of
its own (one home per name).
"""
