"""The Kubernetes CEL environment, as the API server builds it for
ValidatingAdmissionPolicy (``k8s.io/apiserver/pkg/cel/environment/base.go``), on the
cpp engine.

=====================  ==============================================================
language               optional types and syntax (``?.``, ``[?``, ``{?``,
                       ``optional.*``, ``orValue``...), two-variable comprehensions
                       (``all``/``exists``/``existsOne`` with two variables,
                       ``transformList``, ``transformMap``, ``transformMapEntry``),
                       homogeneous aggregate literals, cross-type numeric comparisons
extensions             ``ext.Strings`` version 2, ``ext.Sets``
Kubernetes libraries   lists, regex, URLs, IP, CIDR, quantity, format, semver
=====================  ==============================================================

cel-expr-python cannot hand Kubernetes' own types (``net.IP``, ``kubernetes.Quantity``,
optionals) back from a Python function, so the engine uses cel-cpp environments made
from the same declarations (``library.py``): the *checker* (``environment.py``) has
Kubernetes' exact signatures and types and compiles every program; a *runtime* holds
the Python implementations, where a Kubernetes value is a plain CEL map, and plans
the checked program (``Expression.serialize``/``Env.deserialize``) after
``literals.check`` and ``rewrite.Rewriter`` have seen it. The standard runtime
(``runtime.py``) has the extensions, poolgate's functions and the rewrites' helpers;
a program that calls a Kubernetes library gets the full one (``environment.py``).
Nothing here is imported or built before a program needs it: a run whose rules are
all in the program cache and call no Kubernetes library imports only ``runtime.py``.

Modules: ``library.py`` (how a library is declared), one module per library
(``lists``, ``regex``, ``urls``, ``ip`` with CIDR, ``quantity``, ``formats``,
``semver``; ``strings`` and ``standard`` declare what cel-cpp runs itself),
``literals.py``, ``rewrite.py``, ``runtime.py``, ``environment.py``.

Variables: the checker declares every name in ``variables`` as ``dyn``; a caller that
needs more (ValidatingAdmissionPolicy's ``oldObject``, ``request``,
``namespaceObject``, ``authorizer``, ``params``) passes them to ``environments``.
"""
