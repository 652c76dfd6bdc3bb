"""Core: records and step statistics, atomic I/O, the output folder's layout, graph helpers, the Hamming index, the vocabulary, URLs."""
