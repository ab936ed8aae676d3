"""The PostgreSQL fixtures (``pg``, ``database``, ``migrated``) live in tests/conftest.py:
the index and state tests run over both backends with them."""
