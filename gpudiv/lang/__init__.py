"""The language stage: reading program text into the IR and printing it back, one
folder per dialect (`musimd`, `ptx`, `host`: parse, lower, print), and `load`
(pick the front end by file extension)."""
