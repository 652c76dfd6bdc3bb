"""Acquisition: fetching and unpacking sources into the raw/ layer."""
