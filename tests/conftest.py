"""Test-suite configuration: hypothesis without wall-clock deadlines (CI is noisy)."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "pnsolve",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.load_profile("pnsolve")
