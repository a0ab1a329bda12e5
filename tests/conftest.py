"""Test profiles: `ci` (the default) keeps the property tests at the depth CI can afford;
`thorough` runs three times as many examples; `dev` runs few. Choose with
HYPOTHESIS_PROFILE=dev. The fast local loop, `pytest -m "not slow"`, skips the long
property tests and sample-wide sweeps altogether and runs the rest under `dev` unless
HYPOTHESIS_PROFILE says otherwise."""

import compileall
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

import gpudiv

# Property tests state their example counts for the `ci` profile and scale them by
# `settings.default.max_examples / 100`, so `dev` (10) runs a tenth of each.
settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=10)
settings.register_profile("thorough", max_examples=300)


def pytest_configure(config: pytest.Config) -> None:
    """Load the profile: HYPOTHESIS_PROFILE, else `dev` for the fast loop, else `ci`.
    Before the workers start, bring the package's bytecode up to date: with
    PYTHONDONTWRITEBYTECODE set (as on this project's machines) every `gpudiv` process a
    test starts would compile the modules edited since it was last written again. The same
    setting made pytest rewrite the asserts of every test module again in every worker
    (about 4 s of processor time each): its rewritten modules are cached from now on."""
    sys.dont_write_bytecode = False
    fast_loop = config.getoption("markexpr", "").replace(" ", "") == "notslow"
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev" if fast_loop else "ci"))
    if not hasattr(config, "workerinput"):  # the controller, once
        compileall.compile_dir(Path(gpudiv.__file__).parent, quiet=2)
