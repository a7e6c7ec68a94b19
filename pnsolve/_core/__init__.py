"""The private base every pnsolve package builds on; it imports nothing of pnsolve.

``StopReason`` (why an iterative method stopped), the error types, the one validation
module (tensors, dtypes, devices, generators, counts, observed targets), the
append-only column storage of growing factors, and dtype-derived precision levels.
"""
