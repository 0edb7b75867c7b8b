"""Fetching a client ID metadata document (OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]).

django-oauth-toolkit's fetcher does the protocol (https only, the document at most CIMD_MAX_DOCUMENT_SIZE bytes,
CIMD_FETCH_TIMEOUT_SECONDS for the whole fetch, no redirects, a connection to the address that was checked with the
certificate checked against the URL's host). Which addresses it may reach is the service's one rule for outbound
connections (`workspace.outbound`, as for batch export destinations), and development and tests may allow loopback
and private addresses with `OAUTH_CLIENT_METADATA_ALLOW_PRIVATE`.
"""

import ipaddress
import socket
import ssl
import time

import urllib3
from django.conf import settings
from oauth2_provider import cimd
from oauth2_provider.settings import oauth2_settings

from apikeys.oauth.services import redirect_uri_problem
from workspace.outbound import is_loopback_name, is_metadata_name, is_public_address


def private_addresses_allowed() -> bool:
    return bool(getattr(settings, "OAUTH_CLIENT_METADATA_ALLOW_PRIVATE", False))


def resolve_client_host(hostname: str, port: int) -> list[str]:
    """The addresses to try for a metadata document's host; CIMDError when any of them may not be reached."""
    allow_private = private_addresses_allowed()
    if not allow_private and (is_loopback_name(hostname) or is_metadata_name(hostname)):
        raise cimd.CIMDError("client_id host names this machine or a metadata service")
    try:
        infos = socket.getaddrinfo(hostname, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise cimd.CIMDError(f"could not resolve client_id host: {exc}") from exc
    addresses = []
    for info in infos:
        address = info[4][0].split("%", 1)[0]
        if not allow_private and not is_public_address(ipaddress.ip_address(address)):
            raise cimd.CIMDError(f"client_id host resolves to a non-public address ({address})")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise cimd.CIMDError("client_id host did not resolve to any address")
    return addresses


class ClientMetadataFetcher(cimd.SafeMetadataFetcher):
    """The toolkit's fetcher (its document checks, bounds and TLS handling) with the service's address rule, and the
    same redirect URI policy as dynamic registration."""

    def fetch(self, client_id):
        metadata, max_age = self.fetch_document(client_id)
        redirect_uris = metadata.get("redirect_uris")
        for uri in redirect_uris if isinstance(redirect_uris, list) else []:
            problem = redirect_uri_problem(uri) if isinstance(uri, str) else "a redirect URI is no string"
            if problem is not None:
                raise cimd.CIMDError(f"client metadata refused: {problem}")
        return metadata, max_age

    def fetch_document(self, client_id):
        parsed = cimd._validate_client_id_url(client_id)
        port = parsed.port or 443
        addresses = resolve_client_host(parsed.hostname, port)
        timeout = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        ssl_context = ssl.create_default_context()
        # One deadline for every address tried, so a name with many addresses cannot hold a worker longer.
        deadline = time.monotonic() + timeout
        last_error = None
        for address in addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # Connect to the checked address; SNI, the certificate and the Host header use the URL's host.
            pool = urllib3.HTTPSConnectionPool(
                host=address,
                port=port,
                timeout=urllib3.Timeout(connect=remaining, read=remaining, total=remaining),
                retries=False,
                maxsize=1,
                ssl_context=ssl_context,
                server_hostname=parsed.hostname,
                assert_hostname=parsed.hostname,
            )
            try:
                response = pool.urlopen("GET", path, headers=headers, redirect=False, preload_content=False)
                try:
                    return self._read_document(response)
                finally:
                    response.release_conn()
            except urllib3.exceptions.HTTPError as error:
                last_error = error
            finally:
                pool.close()
        raise cimd.CIMDError(f"could not fetch client_id document: {last_error}")
