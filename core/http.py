"""HTTP session set-up shared by the Plex and Stash clients."""

from __future__ import annotations


def fixed_environment_session(session, url: str):
    """Read proxy and CA settings from the environment once, not on every request.

    requests re-scans os.environ for proxies on each call; the environment does not
    change during a run, so resolve it once and turn the per-request lookup off.
    """
    import os

    import requests

    session.proxies.update(requests.utils.get_environ_proxies(url))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle and url.lower().startswith("https:") and session.verify is True:  # never over a chosen False
        # Only for TLS: with a path in ``verify`` requests stats it on every request
        # (adapters._urllib3_request_context: os.path.isdir), 14% of a bulk sync's
        # CPU time over plain http (py-spy), where no certificate is ever checked.
        session.verify = bundle
    session.trust_env = False
    return session
