import factory

from workspace.models import User


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    first_name = factory.Sequence(lambda n: f"User{n}")
    last_name = "Example"
    password = factory.django.Password("correct horse battery staple")
