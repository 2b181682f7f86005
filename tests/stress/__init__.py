"""The stress tests (marker ``stress``): what is too big or too long for CI, run by
``make stress`` (TIINTERP_STRESS=1); tests/stress/conftest.py documents the run."""
