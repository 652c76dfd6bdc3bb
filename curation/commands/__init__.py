"""The command line and the commands behind it: run, ablate, tokenizer training."""
