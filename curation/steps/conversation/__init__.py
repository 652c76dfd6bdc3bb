"""Conversations (SFT data): layouts read into one form, the Apertus 1.5 chat template, tool
declarations, reasoning spans, and the images and clips a conversation refers to."""
