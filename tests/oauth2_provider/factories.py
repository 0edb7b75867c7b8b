"""django-oauth-toolkit's models (app label `oauth2_provider`), as the OAuth room (apikeys/oauth/) uses them."""

import hashlib
import secrets
from datetime import timedelta

import factory
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, IDToken, RefreshToken

from tests.workspace.factories import UserFactory


class ApplicationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Application

    name = factory.Sequence(lambda n: f"Agent {n}")
    client_type = Application.CLIENT_PUBLIC
    authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
    redirect_uris = "http://127.0.0.1:8765/callback"


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AccessTokenFactory(factory.django.DjangoModelFactory):
    """Stored as the server stores them: the digest only."""

    class Meta:
        model = AccessToken

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    token = ""
    token_checksum = factory.LazyFunction(lambda: _checksum("pha_" + secrets.token_urlsafe(32)))
    expires = factory.LazyFunction(lambda: timezone.now() + timedelta(hours=1))
    scope = "dashboard:read"


class RefreshTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RefreshToken

    user = factory.SelfAttribute("access_token.user")
    application = factory.SelfAttribute("access_token.application")
    access_token = factory.SubFactory(AccessTokenFactory)
    token = ""
    token_checksum = factory.LazyFunction(lambda: _checksum("phr_" + secrets.token_urlsafe(32)))
    token_family = factory.Faker("uuid4")


class GrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Grant

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    code = factory.LazyFunction(lambda: secrets.token_urlsafe(32))
    expires = factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=1))
    redirect_uri = "http://127.0.0.1:8765/callback"
    scope = "dashboard:read"
    code_challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    code_challenge_method = "S256"


class IDTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = IDToken

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    expires = factory.LazyFunction(lambda: timezone.now() + timedelta(hours=1))
