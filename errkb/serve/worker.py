"""One worker process of ``errkb.serve.workers.WorkerPool``: ``python -m errkb.serve.worker [DB]``.

It opens and prepares the knowledge base, says it is ready, then answers one JSON line per
request line until stdin closes; errors are answers, only a broken pipe ends it early.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any

from errkb.atomic import write_all
from errkb.serve import Service
from errkb.serve.workers import OK, READY, error_kind


def operations(service: Service) -> dict[str, Callable[..., dict[str, Any]]]:
    return {
        "explain": service.explain_local,
        "match": service.match_local,
        "search": service.search_local,
    }


def main(argv: list[str]) -> int:
    from errkb.kb import open_kb

    kb = open_kb(argv[0] if argv else None, bundled=False)
    service = Service(kb)
    ops = operations(service)
    # Replies go to the pipe with ``os.write`` until whole (``errkb.atomic.write_all``), never
    # through a buffered ``sys.stdout``.
    out = sys.stdout.fileno()
    with service.preparing():
        kb.prepare()
        write_all(out, (READY + "\n").encode())
        for line in sys.stdin:
            request = json.loads(line)
            try:
                # "ok", a tab, the result's JSON: passed on unparsed (``WorkerPool.call_json``).
                result = ops[request["op"]](**request["args"])
                reply = OK + json.dumps(result, separators=(",", ":"))
            except Exception as exc:  # every error is the request's answer, the loop goes on
                if error_kind(exc) == "internal":
                    logging.getLogger("errkb.serve").error(
                        "worker: %s", "".join(traceback.format_exception(exc))
                    )
                reply = json.dumps({"error": {"kind": error_kind(exc), "message": str(exc)}})
            write_all(out, (reply + "\n").encode("utf-8", "surrogatepass"))
    kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
