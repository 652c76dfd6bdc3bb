"""The run's graph: nodes, the phase table, step composition, fingerprints, explain."""
