"""Test profiles: `ci` (the default) keeps the property tests at the depth CI can afford;
`thorough` runs three times as many examples; `dev` runs few. Choose with
HYPOTHESIS_PROFILE=dev; `pytest -m "not slow"` skips the long property tests altogether
(the fast local loop)."""

import os

from hypothesis import settings

# Property tests state their example counts for the `ci` profile and scale them by
# `settings.default.max_examples / 100`, so `dev` (10) runs a tenth of each.
settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=10)
settings.register_profile("thorough", max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
