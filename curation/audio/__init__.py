"""Audio: the WavTokenizer-family codec that turns 24 kHz mono waveforms into discrete codes."""
