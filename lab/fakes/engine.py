"""One fake engine as a real process: python -m lab.fakes.engine --kind KIND --port PORT ...

KIND is llama-server or vllm (lab.fakes.llm), comfyui (lab.fakes.comfyui) or llama-swap
(lab.fakes.llama_swap); the rest of the arguments are that kind's. --port 0 takes a free
port; --ready FILE receives {"pid", "port", "kind"} once the engine answers and its
weights are resident.
"""

import argparse

from lab.fakes import comfyui, llama_swap, llm

KINDS = {"llama-server": llm, "vllm": llm, "comfyui": comfyui, "llama-swap": llama_swap}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.fakes.engine", description=__doc__)
    parser.add_argument("--kind", required=True, choices=sorted(KINDS))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready", help="file to write once ready")
    kind = parser.parse_known_args(argv)[0].kind
    KINDS[kind].add_arguments(parser)
    args = parser.parse_args(argv)
    KINDS[kind].main(args)


if __name__ == "__main__":
    main()
