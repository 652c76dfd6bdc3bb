"""Pipeline steps on one contract (`base`); one folder per modality (`text/`, `image/`, `audio/`) and `compliance/`."""
