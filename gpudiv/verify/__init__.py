"""Verification of rewrites: run the original and the result and compare
(`equivalence`); the analysis oracle itself is `gpudiv.verify.oracle`."""
