"""Destination secrets encrypted at rest: the one place where a config's secrets turn from plaintext to ciphertext
and back.

In memory a destination config is plaintext, so the serializers, admin, services and the export activities read
it as they always did. In the database the value of each secret key
(`pipelines.batch_exports.destinations.SECRET_KEYS`) is *sealed*: replaced by `{"$fernet": "<token>"}`, a Fernet token
of its JSON. `EncryptedSecretsJSONField` seals on every write and opens on every read; the other keys stay readable
(they are not secret, and runs filter on `include_events`). A read also takes a secret stored before encryption as it
is, until the next write, the migration or `rotate_secrets` seals it.

The keys are `SECRETS_ENCRYPTION_KEYS`, newest first: the newest seals, every one of them opens (MultiFernet), so a
key is replaced by putting a new one first, running `manage.py rotate_secrets`, then dropping the old one. When the
setting is empty one key is derived from SECRET_KEY (HKDF), so a development setup needs nothing; production sets
its own keys, since changing SECRET_KEY would then make every stored secret unreadable.
"""

import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from pipelines.batch_exports.destinations import SECRET_KEYS
from workspace.secrets import derived_key, encryption_keys, keyring

__all__ = ["EncryptedSecretsJSONField", "derived_key", "encryption_keys", "open_secrets", "seal_secrets"]

SEALED = "$fernet"


def _keys() -> tuple[MultiFernet, Fernet]:
    return keyring()


def is_sealed(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(SEALED), str)


def seal(value) -> dict:
    """A secret value as stored: a Fernet token of its JSON under the newest key."""
    every, _ = _keys()
    return {SEALED: every.encrypt(json.dumps(value).encode()).decode()}


def _unreadable() -> ImproperlyConfigured:
    return ImproperlyConfigured(
        "A stored destination secret cannot be decrypted with SECRETS_ENCRYPTION_KEYS: keep the key it was "
        "encrypted with in the list until `manage.py rotate_secrets` has run with the new one first."
    )


def _open(sealed: dict):
    every, _ = _keys()
    try:
        return json.loads(every.decrypt(sealed[SEALED].encode()))
    except InvalidToken:
        raise _unreadable() from None


def seal_secrets(config):
    """The config as stored: the value of each secret key sealed (a value sealed already is kept as it is)."""
    if not isinstance(config, dict):
        return config
    return {key: seal(value) if key in SECRET_KEYS and not is_sealed(value) else value for key, value in config.items()}


def open_secrets(config):
    """The config as used: every sealed value opened (and a secret stored before encryption, as it is)."""
    if not isinstance(config, dict):
        return config
    return {key: _open(value) if is_sealed(value) else value for key, value in config.items()}


def reseal_secrets(stored) -> dict | None:
    """A stored config with every secret sealed under the newest key, or None when it is so already."""
    if not isinstance(stored, dict):
        return None
    every, newest = _keys()
    changed = False
    resealed = {}
    for key, value in stored.items():
        if is_sealed(value):
            token = value[SEALED].encode()
            try:
                newest.decrypt(token)
            except InvalidToken:
                try:
                    value = {SEALED: every.rotate(token).decode()}
                except InvalidToken:
                    raise _unreadable() from None
                changed = True
        elif key in SECRET_KEYS:
            value = seal(value)
            changed = True
        resealed[key] = value
    return resealed if changed else None


class EncryptedSecretsJSONField(models.JSONField):
    """A destination config whose secrets are sealed in the database and plaintext in memory (see the module)."""

    def get_prep_value(self, value):
        return super().get_prep_value(seal_secrets(value))

    def from_db_value(self, value, expression, connection):
        return open_secrets(super().from_db_value(value, expression, connection))

    def value_to_string(self, obj):
        # dumpdata writes the secrets sealed, and loaddata stores them as they are.
        return seal_secrets(self.value_from_object(obj))
