"""Readers of text inputs: JSON lines and Parquet, WARC/WET and HTML, with bounded decompression."""
