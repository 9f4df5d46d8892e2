"""Tests of the tooz driver (monolock/tooz_driver.py). They need tooz, so
they run in make tooz-test's virtualenv, not in make python-test."""
