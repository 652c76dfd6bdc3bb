"""Compliance steps: licence policy and approved constituents, retroactive robots.txt opt-out."""
