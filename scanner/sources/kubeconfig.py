"""Kubeconfig files, read and checked before the ``kubernetes`` client sees them, and the
client configured from them (``api_client``).

The client crashes on a kubeconfig that is not one (a YAML list, a directory, a
``tokenFile`` that is gone), logs a failing exec credential plugin and goes on without
credentials, and would send a bearer token to an ``http://`` server. Here every one of
those is a ``ClusterError``: one line, exit code 2. ``KUBECONFIG`` lists merge as
client-go merges them: entries that do not exist are skipped, an empty file adds
nothing, contexts are first-of-each-name and the first non-empty ``current-context``
wins.
"""

from __future__ import annotations

import binascii
import contextlib
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from scanner.errors import PoolgateError
from scanner.sources.snapshot import json_type


class ClusterError(PoolgateError):
    """The cluster cannot be reached or refuses the credentials: nothing can be audited."""


def check_server(context: str, configuration: Any) -> None:
    """TLS verified, and credentials never sent in clear text."""
    from urllib.parse import urlsplit

    server = str(configuration.host or "")
    scheme = urlsplit(server).scheme.lower() if "://" in server else ""
    credentials = bool(
        configuration.api_key
        or configuration.cert_file
        or configuration.username
        or configuration.password
    )
    if scheme not in ("http", "https") or not urlsplit(server).hostname:
        raise ClusterError(
            f"context {context}: server {server!r} is not an https:// URL",
            hint="set clusters[].cluster.server to the API server's https:// URL",
        )
    if scheme == "http" and credentials:
        # kubectl would send the token in clear text to anyone on the path.
        raise ClusterError(
            f"context {context}: server {server} is plain http://, and poolgate sends "
            "credentials only over HTTPS",
            hint="use the API server's https:// URL (http:// only works without "
            "credentials, as through `kubectl proxy`)",
        )
    if not configuration.verify_ssl:
        # insecure-skip-tls-verify in the kubeconfig: said out loud, not silently accepted.
        raise ClusterError(
            f"context {context} disables TLS verification (insecure-skip-tls-verify)",
            hint="give the cluster's certificate-authority in the kubeconfig",
        )


class ClientLog(logging.Handler):
    """What the ``kubernetes`` client logs at ERROR while it loads credentials.

    The client reports a failing exec credential plugin with ``logging.error`` on the
    root logger, which prints ``ERROR:root:...`` and goes on without credentials. While
    attached, this handler takes those records (the root logger then has a handler, so
    ``logging.error`` does not add one that prints) and poolgate says it in one line.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    @contextlib.contextmanager
    def attached(self) -> Iterator[None]:
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield
        finally:
            root.removeHandler(self)


def kubeconfig_files(explicit: str | None, listed: str | None) -> list[tuple[str, dict[str, Any]]]:
    """The kubeconfig files to load, with their documents: ``explicit`` (``--kubeconfig``,
    one file that must exist), else the existing entries of ``listed`` (``KUBECONFIG``),
    else ``~/.kube/config``. Each is read and checked; empty ones are left out."""
    hint = "pass --kubeconfig, set KUBECONFIG, or run inside the cluster"
    if explicit is not None:
        candidates, required = [explicit], True
    elif listed is not None:
        candidates = [os.path.expanduser(p) for p in listed.split(os.pathsep) if p]
        required = False
    else:
        candidates, required = [os.path.expanduser("~/.kube/config")], True
    found: list[tuple[str, dict[str, Any]]] = []
    existing = 0
    for path in candidates:
        if not os.path.exists(path):
            if required:
                raise ClusterError(f"kubeconfig {path} does not exist", hint=hint)
            continue  # client-go skips KUBECONFIG entries that do not exist
        existing += 1
        document = _read_kubeconfig(path)
        if document is not None:
            found.append((path, document))
    if not existing:
        raise ClusterError(f"kubeconfig {listed} does not exist (KUBECONFIG)", hint=hint)
    if not found:
        where = explicit or listed or candidates[0]
        raise ClusterError(f"kubeconfig {where} is empty", hint=hint)
    return found


def _read_kubeconfig(path: str) -> dict[str, Any] | None:
    """The kubeconfig in ``path`` (None: empty); ``ClusterError`` when it cannot be read
    or is not one (the client would crash on it)."""
    import yaml

    if os.path.isdir(path):
        raise ClusterError(f"kubeconfig {path} is a directory", hint="name the kubeconfig file")
    try:
        with open(path, encoding="utf-8") as file:
            document = yaml.safe_load(file)
    except OSError as error:
        raise ClusterError(f"kubeconfig {path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ClusterError(f"kubeconfig {path}: not UTF-8 text") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
        problem = getattr(error, "problem", None) or str(error)
        raise ClusterError(f"kubeconfig {where}: invalid YAML: {one_line(problem)}") from None
    if document is None:
        return None
    if not isinstance(document, dict):
        raise ClusterError(
            f"kubeconfig {path}: not a kubeconfig (the YAML is {json_type(document)}, "
            "not a mapping with clusters, contexts and users)"
        )
    for key in ("clusters", "contexts", "users"):
        entries = document.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise ClusterError(f"kubeconfig {path}: {key} is {json_type(entries)}, not a list")
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ClusterError(f"kubeconfig {path}: {key}[{index}] has no name")
            body = entry.get(key[:-1])
            if body is not None and not isinstance(body, dict):
                raise ClusterError(f"kubeconfig {path}: {key}[{index}].{key[:-1]} is not a mapping")
    current = document.get("current-context")
    if current is not None and not isinstance(current, str):
        raise ClusterError(f"kubeconfig {path}: current-context is not a string")
    return document


def one_line(text: str) -> str:
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def kubeconfig_from_env() -> str | None:
    value = os.environ.get("KUBECONFIG", "")
    return value or None


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


def context_name(
    path: str, files: Sequence[tuple[str, Mapping[str, Any]]], wanted: str | None
) -> str:
    """``wanted``, or the current context as client-go merges it: the first file that
    sets a non-empty ``current-context`` wins (contexts: the first of each name)."""
    names = [
        str(entry["name"]) for _, document in files for entry in document.get("contexts") or []
    ]
    if wanted:
        if wanted not in names:
            raise ClusterError(
                f"kubeconfig {path} has no context {wanted!r}",
                hint=f"contexts: {', '.join(names) or 'none'}",
            )
        return wanted
    current = next((str(d["current-context"]) for _, d in files if d.get("current-context")), "")
    if not current:
        raise ClusterError(f"kubeconfig {path} has no current context", hint="pass --context")
    if current not in names:
        raise ClusterError(
            f"kubeconfig {path}: its current context {current!r} is not one of its contexts",
            hint=f"contexts: {', '.join(names) or 'none'}; pass --context",
        )
    return current


_CLUSTER_PATHS: Final = ("certificate-authority",)
_USER_PATHS: Final = ("client-certificate", "client-key", "tokenFile")
SUPPORTED_AUTH_PROVIDERS: Final = frozenset({"gcp", "oidc"})
"""The ``auth-provider`` plugins the kubernetes client implements (kubectl has dropped
the others, azure among them, for exec plugins such as kubelogin)."""


def merged(files: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The kubeconfig ``files`` merged as client-go merges ``KUBECONFIG``: the first
    definition of each cluster, context and user wins, and the first non-empty
    ``current-context``. Relative paths (a CA, client certificate and key, a token file,
    an exec command with a directory) are resolved against the directory of the file
    that defines them, as client-go does; the kubernetes client resolves them all
    against the file of the cluster."""
    result: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for key, paths in (("clusters", _CLUSTER_PATHS), ("contexts", ()), ("users", _USER_PATHS)):
        seen: dict[str, Any] = {}
        for path, document in files:
            base = os.path.dirname(os.path.abspath(path))
            for entry in document.get(key) or []:
                if entry["name"] not in seen:
                    seen[entry["name"]] = _resolved(entry, key[:-1], paths, base)
        result[key] = list(seen.values())
    current = next((d["current-context"] for _, d in files if d.get("current-context")), "")
    if current:
        result["current-context"] = current
    return result


def _resolved(entry: Mapping[str, Any], field: str, paths: Sequence[str], base: str) -> Any:
    body = entry.get(field)
    if not isinstance(body, Mapping):
        return dict(entry)
    body = dict(body)
    for name in paths:
        value = body.get(name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[name] = os.path.join(base, os.path.expanduser(value))
    command = body.get("exec", {}).get("command") if isinstance(body.get("exec"), Mapping) else None
    if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
        body["exec"] = {**body["exec"], "command": os.path.join(base, command)}
    return {**entry, field: body}


def unsupported_auth_provider(config: Mapping[str, Any], context: str) -> str | None:
    """The ``auth-provider`` of ``context``'s user in ``config`` (``merged``) when the
    client cannot use it (it would send the requests without credentials, and the API
    server answer 401)."""
    provider = _user(config, context).get("auth-provider")
    name = provider.get("name") if isinstance(provider, Mapping) else None
    if isinstance(name, str) and name not in SUPPORTED_AUTH_PROVIDERS:
        return name
    return None


def token_file(config: Mapping[str, Any], context: str) -> str | None:
    """The ``tokenFile`` (its path resolved by ``merged``) whose token the client sends
    for ``context``'s user: None when the user has none, or when an ``auth-provider``
    or a ``token`` comes first (the client's order)."""
    user = _user(config, context)
    path = user.get("tokenFile")
    if not isinstance(path, str) or not path or "auth-provider" in user or user.get("token"):
        return None
    return path


def _user(config: Mapping[str, Any], context: str) -> Mapping[str, Any]:
    """The ``user`` body of ``context``'s user in ``config`` (``merged``); empty if none."""
    found = [c for c in config["contexts"] if c.get("name") == context]
    if not found or not isinstance(found[0].get("context"), Mapping):
        return {}
    user_name = found[0]["context"].get("user")
    for user in config["users"]:
        body = user.get("user")
        if user.get("name") == user_name and isinstance(body, Mapping):
            return body
    return {}


TOKEN_FILE_REREAD: Final = 60.0
"""Seconds between reads of a kubeconfig ``tokenFile``, as client-go re-reads one."""


class TokenFile:
    """A client ``refresh_api_key_hook`` that reads a ``tokenFile`` again every
    ``TOKEN_FILE_REREAD`` seconds. The client reads it once; a projected service account
    token rotated during a long audit then made every later request 401.

    The client calls the hook before each request. A file that cannot be read, or is
    empty, keeps the last token, as client-go keeps the last one it read."""

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._clock = clock
        self._period = TOKEN_FILE_REREAD
        self._next = clock() + self._period  # the client has just read it

    def __call__(self, configuration: Any) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._period
        try:
            with open(self._path, encoding="utf-8") as file:
                token = file.read().strip()  # trimmed, as client-go trims it
        except (OSError, UnicodeDecodeError):
            return
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"


# -- the client, configured --------------------------------------------------------

IN_CLUSTER: Final = "in-cluster"
"""The context name live objects carry when poolgate runs inside the cluster."""


def api_client(explicit: str | None, wanted: str | None) -> tuple[Any, str, str]:
    """A ``kubernetes`` ``ApiClient`` for the context ``wanted`` (None: the current one)
    of the kubeconfig ``explicit`` (None: the usual search), the context's name and its
    server; ``ClusterError`` when the configuration is unusable.

    Search order, as ``kubectl`` does it: ``--kubeconfig``, then ``KUBECONFIG``, then
    the in-cluster service account (inside a pod), then ``~/.kube/config``. ``KUBECONFIG``
    may list several files (``:``-separated, ``;`` on Windows); as client-go does, the
    ones that do not exist are skipped and an empty one adds nothing. Every file is
    read and checked here first, so a broken one is one error line, never a traceback
    from the client.
    """
    from kubernetes import client

    configuration = _configuration(client.Configuration)
    log = ClientLog()
    context = _load(configuration, explicit, wanted, log)
    if log.messages:
        # The client logs a failing exec credential plugin (aws, gcloud, kubelogin) and
        # goes on without credentials; the API server would then answer 401.
        raise ClusterError(
            f"context {context}: the exec credential plugin failed: {one_line(log.messages[0])}",
            hint="check users[].user.exec in the kubeconfig, that the command is installed, "
            "and log in with it (aws sso login, gcloud auth login, ...)",
        )
    check_server(context, configuration)
    # poolgate owns retries (bounded, with backoff); urllib3's own would multiply timeouts.
    configuration.retries = False
    try:
        with warnings.catch_warnings():  # urllib3 warns before it fails on socks5://
            warnings.simplefilter("ignore")
            api = client.ApiClient(configuration)
    except ImportError as error:  # a socks5:// proxy-url needs PySocks
        raise ClusterError(
            f"context {context}: proxy {configuration.proxy}: {one_line(str(error))}",
            hint="a SOCKS proxy needs the PySocks package (pip install pysocks)",
        ) from None
    except Exception as error:  # urllib3 refusing a proxy-url that is not a URL, ...
        raise ClusterError(
            f"context {context}: cannot set up the connection: "
            f"{type(error).__name__}: {one_line(str(error))}",
            hint="check the cluster's server and proxy-url in the kubeconfig",
        ) from None
    return api, context, configuration.host


def _configuration(base: Any) -> Any:
    """A client configuration whose bearer token is trimmed when it is used, as
    client-go trims the one it reads from a ``tokenFile``: a trailing line break made
    every request's header invalid. (The client sets the token again before each
    request, so it is trimmed there, not once.)"""

    class Trimmed(base):  # type: ignore[misc]
        def get_api_key_with_prefix(self, identifier: str, alias: str | None = None) -> Any:
            key = super().get_api_key_with_prefix(identifier, alias)
            return key.strip() if isinstance(key, str) else key

    return Trimmed()


def _load(configuration: Any, explicit: str | None, wanted: str | None, log: ClientLog) -> str:
    """Load the context into ``configuration`` and say its name; the client's failures on
    odd input become one ``ClusterError`` line each."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    config: Any = kube_config  # an untyped package
    listed = None if explicit else kubeconfig_from_env()
    context = wanted or "current"
    try:
        if explicit is None and listed is None and in_cluster() and not wanted:
            config.load_incluster_config(client_configuration=configuration)
            return IN_CLUSTER
        files = kubeconfig_files(explicit, listed)
        path = os.pathsep.join(name for name, _ in files)
        context = context_name(path, files, wanted)
        _load_files(config, configuration, files, path, context, log)
        return context
    except ConfigException as error:
        raise ClusterError(
            f"kubeconfig: {one_line(str(error))}", hint="check --kubeconfig and --context"
        ) from None
    except binascii.Error as error:  # certificate-authority-data, client-*-data
        raise ClusterError(
            f"context {context}: a certificate or key (*-data) is not base64: "
            f"{one_line(str(error))}",
            hint="check the *-data fields of the context's cluster and user in the kubeconfig",
        ) from None
    except OSError as error:  # a file the kubeconfig names (tokenFile, a certificate)
        raise ClusterError(
            f"context {context}: cannot read {error.filename}: {error.strerror or error}",
            hint="check the file paths in the kubeconfig",
        ) from None
    except ClusterError:
        raise
    except Exception as error:
        # The client's own failures on odd input: an OIDC id-token that is not a JWT, a
        # gcp auth-provider without a token, ...
        raise ClusterError(
            f"context {context}: the kubernetes client cannot use this kubeconfig: "
            f"{type(error).__name__}: {one_line(str(error))}",
            hint="check the context's cluster and user in the kubeconfig",
        ) from None


def _load_files(
    config: Any,
    configuration: Any,
    files: Sequence[tuple[str, dict[str, Any]]],
    path: str,
    context: str,
    log: ClientLog,
) -> None:
    """Load ``context`` of the kubeconfig ``files`` (``path``: their names joined)."""
    config_dict = merged(files)
    provider = unsupported_auth_provider(config_dict, context)
    if provider is not None:
        raise ClusterError(
            f"context {context}: its user's auth-provider {provider!r} is not "
            "supported (kubectl removed it too); the requests would carry no "
            "credentials",
            hint="use an exec credential plugin (kubelogin for Azure) in users[].user",
        )
    with log.attached():
        if len(files) == 1:
            config.load_kube_config(
                config_file=path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        else:  # several KUBECONFIG files: paths relative to their own files
            config.load_kube_config_from_dict(
                config_dict,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    rotating = token_file(config_dict, context)
    if rotating is not None:  # the client reads it once; kubelet rotates it
        configuration.refresh_api_key_hook = TokenFile(rotating)
