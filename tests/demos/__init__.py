"""Tests of the demos and benchmark scripts, run as users run them."""
