"""Execution: Ray runtime, per-phase task functions, atomic files and completion markers."""
