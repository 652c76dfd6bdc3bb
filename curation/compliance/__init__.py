"""Compliance: licence policy, robots.txt opt-out."""
