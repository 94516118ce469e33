"""Test machinery the metal3 plugin ships: the stand-in baremetal-operator.

* :mod:`~powerplane_metal3.testing.operator`: :func:`baremetalhost_crd` (the
  ``metal3.io/v1alpha1`` BareMetalHost CRD) and :class:`BareMetalOperator`, which behaves as
  the real operator is documented to, on powerplane-kubernetes' test API server
  (:class:`powerplane_kubernetes.testing.apiserver.KubeApiServer`, the ``test`` extra).
"""
