"""Destination secrets encrypted at rest: the one place where a config's secrets turn from plaintext to ciphertext
and back.

In memory a destination config is plaintext, so the serializers, admin, services and the export activities read
it as they always did. In the database the value of each secret key
(`pipelines.batch_exports.destinations.SECRET_KEYS`) is *sealed*: replaced by `{"$fernet": "<token>"}`, a Fernet token
of its JSON. `EncryptedSecretsJSONField` seals on every write and opens on read; the other keys stay readable
(they are not secret, and runs filter on `include_events`). A read also takes a secret stored before encryption as it
is, until the next write, the migration or `rotate_secrets` seals it.

A row is read with its secrets still sealed (`Sealed`), and the model's attribute opens them the first time it is
read, so that a read which never looks at a config decrypts nothing (a list of exports, whose answer never shows a
secret, reads what it shows through `without_secrets`). Every reader of the attribute gets the plaintext dict, as
before; a `.values()` read gets the `Sealed` mapping, which opens on first use too.

The keys are `SECRETS_ENCRYPTION_KEYS`, newest first: the newest seals, every one of them opens (MultiFernet), so a
key is replaced by putting a new one first, running `manage.py rotate_secrets`, then dropping the old one. When the
setting is empty one key is derived from SECRET_KEY (HKDF), so a development setup needs nothing; production sets
its own keys, since changing SECRET_KEY would then make every stored secret unreadable.
"""

import json
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.query_utils import DeferredAttribute

from pipelines.batch_exports.destinations import SECRET_KEYS
from workspace.secrets import derived_key, encryption_keys, keyring

__all__ = [
    "EncryptedSecretsJSONField",
    "Sealed",
    "derived_key",
    "encryption_keys",
    "open_secrets",
    "seal_secrets",
    "without_secrets",
]

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


class Sealed(Mapping):
    """A config as read from the database, its secrets still sealed: opened (once) when it is first used, so that
    reading a row costs no decryption until its config is looked at."""

    __slots__ = ("_opened", "stored")

    def __init__(self, stored: dict):
        self.stored = stored
        self._opened = None

    def opened(self) -> dict:
        """The config as used (`open_secrets`), a new dict."""
        if self._opened is None:
            self._opened = open_secrets(self.stored)
        return dict(self._opened)

    def without(self, keys) -> dict:
        """The config without `keys`, opening only the sealed values it keeps: none, when `keys` are the secret keys
        (only their values are ever sealed), so that a config shown without its secrets decrypts nothing."""
        if self._opened is not None:
            return {key: value for key, value in self._opened.items() if key not in keys}
        kept = ((key, value) for key, value in self.stored.items() if key not in keys)
        return {key: _open(value) if is_sealed(value) else value for key, value in kept}

    def __getitem__(self, key):
        return self.opened()[key]

    def __iter__(self):
        return iter(self.opened())

    def __len__(self) -> int:
        return len(self.stored)

    def __repr__(self) -> str:
        return f"<Sealed {sorted(self.stored)}>"


class OpenedOnRead(DeferredAttribute):
    """The model attribute of an `EncryptedSecretsJSONField`: the config with its secrets open (a plain dict), opened
    the first time the attribute is read, and kept so."""

    def __get__(self, instance, cls=None):
        if instance is None:
            return self
        value = super().__get__(instance, cls)
        if type(value) is Sealed:
            value = instance.__dict__[self.field.attname] = value.opened()
        return value

    def __set__(self, instance, value):
        instance.__dict__[self.field.attname] = value

    def without(self, instance, keys):
        """The value without `keys`, opening none of the secrets it leaves out (`Sealed.without`)."""
        value = super().__get__(instance)
        if type(value) is Sealed:
            return value.without(keys)
        if not isinstance(value, dict):
            return value
        return {key: item for key, item in value.items() if key not in keys}


def without_secrets(instance: models.Model, name: str):
    """The config in `instance`'s `EncryptedSecretsJSONField` `name` without its secret keys, read without decrypting
    them: what the API shows of a config (`destinations.public_config`) costs no decryption."""
    return getattr(type(instance), name).without(instance, SECRET_KEYS)


class EncryptedSecretsJSONField(models.JSONField):
    """A destination config whose secrets are sealed in the database and plaintext in memory (see the module)."""

    descriptor_class = OpenedOnRead

    def get_prep_value(self, value):
        if type(value) is Sealed:
            value = value.stored  # as read: what is sealed stays so, without being opened
        return super().get_prep_value(seal_secrets(value))

    def from_db_value(self, value, expression, connection):
        value = super().from_db_value(value, expression, connection)
        # Opened when first read (OpenedOnRead, Sealed); anything but an object has nothing sealed.
        return Sealed(value) if isinstance(value, dict) else value

    def value_to_string(self, obj):
        # dumpdata writes the secrets sealed, and loaddata stores them as they are.
        return seal_secrets(self.value_from_object(obj))
