"""The private base every pnsolve package builds on; it imports nothing of pnsolve.

``StopReason`` (why an iterative method stopped), the error types, the one validation
module (tensors, dtypes, devices, generators, counts, observed targets), the random
draws (:mod:`~pnsolve._core.random`: on the generator's device, moved to the data's), the
append-only column storage of growing factors, and dtype-derived precision levels.
"""
