# `python -m evidence.cli`: how `evidence serve` starts each capture process with its own
# interpreter, wherever the `evidence` script is.
from evidence.cli import run

run()
