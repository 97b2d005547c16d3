"""The collector's HTTP client against an engine that trickles its body."""

import threading
import time

from trickle import Trickle, wait_until

from evidence.capture import httpget


def test_a_trickling_body_costs_the_deadline_not_a_64_kib_chunk_of_trickle():
    # 50 bytes a second: one 64 KiB read would wait 22 minutes for its chunk.
    with Trickle(every_s=0.02) as engine:
        answers: list[httpget.Answer] = []
        start = time.monotonic()
        probe = threading.Thread(
            target=lambda: answers.append(httpget.get(engine.url + "/metrics", 1.0)),
            daemon=True,
        )
        probe.start()
        probe.join(10)
        elapsed = time.monotonic() - start
        assert not probe.is_alive(), "the read outlived its 1 s deadline by 9 s"
        assert answers[0].status == "timeout", answers[0]
        assert elapsed < 3.0
        # The socket is closed when the read gives up, not left to the trickle.
        assert wait_until(lambda: engine.open == 0, 5.0)
