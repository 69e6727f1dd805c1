"""``python -m streamtrain`` behaves exactly as the ``streamtrain`` command."""

from streamtrain.cli import main

main(prog_name="streamtrain")
