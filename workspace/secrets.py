"""The keys that encrypt what the service keeps secret at rest (`SECRETS_ENCRYPTION_KEYS`), and the encryption itself:
Fernet from `cryptography`, with rotation through MultiFernet.

The keys are `SECRETS_ENCRYPTION_KEYS`, newest first: the newest encrypts, every one of them decrypts. When the
setting is empty one key is derived from SECRET_KEY (HKDF), so a development setup needs nothing; production sets
its own keys, since changing SECRET_KEY would then make everything encrypted with the derived one unreadable.
"""

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["InvalidToken", "decrypt", "derived_key", "encrypt", "encryption_keys", "keyring"]


@functools.lru_cache(maxsize=4)
def derived_key(secret_key: str) -> str:
    """The Fernet key used when SECRETS_ENCRYPTION_KEYS is empty: HKDF-SHA256 of SECRET_KEY, bound to this use (the
    `info` names where the key was first used, and stays so that what it encrypted stays readable)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"pipelines.secrets destination secrets")
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode())).decode()


def encryption_keys() -> tuple[str, ...]:
    """The configured keys, newest first."""
    keys = tuple(key for key in settings.SECRETS_ENCRYPTION_KEYS if key)
    return keys or (derived_key(settings.SECRET_KEY),)


@functools.lru_cache(maxsize=4)
def _keyring(keys: tuple[str, ...]) -> tuple[MultiFernet, Fernet]:
    fernets = []
    for position, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key))
        except ValueError:
            raise ImproperlyConfigured(
                f"Key {position} of SECRETS_ENCRYPTION_KEYS is not a Fernet key (32 url-safe base64-encoded bytes); "
                "see README (Configuration) for how to make one."
            ) from None
    return MultiFernet(fernets), fernets[0]


def keyring() -> tuple[MultiFernet, Fernet]:
    """Every key (to decrypt and rotate) and the newest alone (to tell a token already under it); kept per key
    list, so a changed setting takes effect at once."""
    return _keyring(encryption_keys())


def encrypt(data: bytes) -> bytes:
    return keyring()[0].encrypt(data)


def decrypt(token: bytes) -> bytes:
    """Raises InvalidToken when no configured key encrypted `token`."""
    return keyring()[0].decrypt(token)
